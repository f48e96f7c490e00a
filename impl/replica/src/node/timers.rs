//! The core's clock and the timers it sets.

use std::collections::BTreeMap;
use std::time::Duration;

use stutter_core::Timer;
use tokio::time::Instant;

/// The core's clock: microseconds since the Unix epoch, read once and
/// advanced by the monotonic clock, so that trace times of the replicas of
/// one machine are comparable (spec/trace/merge.py orders by them) and a
/// wall-clock step never moves the protocol's time.
pub struct CoreClock {
    start: Instant,
    epoch: u64,
}

impl CoreClock {
    pub fn new() -> CoreClock {
        let epoch = crate::platform::since_epoch().as_micros() as u64;
        CoreClock {
            start: Instant::now(),
            epoch,
        }
    }

    pub fn now(&self) -> u64 {
        self.epoch + self.start.elapsed().as_micros() as u64
    }

    /// The instant of core time `at`.
    pub fn instant(&self, at: u64) -> Instant {
        self.start + Duration::from_micros(at.saturating_sub(self.epoch))
    }
}

/// The timers the core has set: one deadline per timer (setting one again
/// moves it). Bounded by the number of timer kinds the core has.
#[derive(Default)]
pub struct Timers {
    at: BTreeMap<Timer, Instant>,
}

impl Timers {
    pub fn set(&mut self, timer: Timer, at: Instant) {
        self.at.insert(timer, at);
    }

    /// The earliest deadline.
    pub fn next(&self) -> Option<Instant> {
        self.at.values().min().copied()
    }

    /// Removes and returns the timers due at `now`.
    pub fn take_due(&mut self, now: Instant) -> Vec<Timer> {
        let due: Vec<Timer> = self
            .at
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(t, _)| *t)
            .collect();
        for t in &due {
            self.at.remove(t);
        }
        due
    }
}

//! One replica's processor: `cores` cores serving its inputs in arrival
//! order. The protocol step of an input runs when a core takes it (so its
//! outputs leave then); the core stays busy for the input's service time,
//! so that load shows as queueing. A collector's concurrent workers take
//! cores from the mutator (`mutator_cores`): a fractional share slows
//! every core the mutator runs on.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use stutter_core::{Input, Message, Time};

/// CPU µs each kind of input costs a replica.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServiceTable {
    pub message: Time,
    pub client_request: Time,
    pub timer: Time,
    pub persisted: Time,
    /// Extra per kilobyte of a message (serialization and copying).
    pub per_kb: Time,
}

impl Default for ServiceTable {
    /// First estimates for a small VM, kept as the default so that the
    /// seeds and traces recorded with them stay reproducible; the study
    /// uses [`ServiceTable::calibrated`].
    fn default() -> Self {
        ServiceTable { message: 15, client_request: 8, timer: 5, persisted: 4, per_kb: 2 }
    }
}

impl ServiceTable {
    pub fn cost(&self, input: &Input) -> Time {
        match input {
            Input::Message { msg, .. } => self.message + message_kb(msg) * self.per_kb,
            Input::Request(_) => self.client_request,
            Input::Timer(_) | Input::Start | Input::GcDue { .. } | Input::GcDone => self.timer,
            Input::Persisted { .. } => self.persisted,
        }
    }
}

/// The size class of a message, in kilobytes (rough: keys and entries).
pub fn message_kb(msg: &Message) -> Time {
    match msg {
        Message::Accept { value, .. } => {
            value.requests().iter().map(|r| r.op.key().len() as Time + 24).sum::<Time>() / 1024
        }
        Message::Promise { entries, snapshot, .. } => {
            entries.len() as Time / 8 + snapshot.as_ref().map_or(0, |s| s.kv.len() as Time / 16)
        }
        Message::CatchUp { entries, .. } => entries.len() as Time / 8,
        Message::InstallSnapshot { snapshot, .. } => snapshot.kv.len() as Time / 16,
        _ => 0,
    }
}

pub struct Cpu {
    pub cores: u32,
    /// Inputs in service.
    pub busy: u32,
    /// Inputs waiting for a core, oldest first.
    pub inbox: VecDeque<Input>,
    /// `(time, sequence)` at which cores become free, kept out of the
    /// event queue while no input waits: the world counts them free when
    /// it next looks, or queues them once an input waits (`World::kick`).
    pub free_later: Vec<(Time, u64)>,
}

impl Cpu {
    pub fn new(cores: u32) -> Cpu {
        Cpu { cores: cores.max(1), busy: 0, inbox: VecDeque::new(), free_later: Vec::new() }
    }

    /// How many inputs may be in service at once, and the speed of each,
    /// when the mutator may use `mutator_cores` (all cores but what the
    /// collector's concurrent workers hold).
    pub fn slots(&self, mutator_cores: f64) -> (u32, f64) {
        let avail = mutator_cores.min(self.cores as f64);
        if avail >= self.cores as f64 {
            return (self.cores, 1.0);
        }
        let slots = (avail - 1e-9).ceil().max(1.0);
        (slots as u32, (avail / slots).clamp(0.01, 1.0))
    }

    /// Cores the mutator keeps busy now.
    pub fn busy_cores(&self, speed: f64) -> f64 {
        self.busy as f64 * speed
    }

    /// How long an input of `cost` µs (plus `assist` µs of marking) holds
    /// a core at `speed`.
    pub fn duration(cost: Time, assist: Time, speed: f64) -> Time {
        if speed >= 1.0 {
            cost + assist
        } else {
            ((cost + assist) as f64 / speed).ceil() as Time
        }
    }

    /// The process died: queued inputs are gone and no core is busy.
    pub fn crash(&mut self) {
        self.busy = 0;
        self.inbox.clear();
        self.free_later.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_and_speed_follow_the_cores_left_to_the_mutator() {
        let c = Cpu::new(4);
        assert_eq!(c.slots(f64::INFINITY), (4, 1.0));
        assert_eq!(c.slots(3.0), (3, 1.0));
        let (n, s) = c.slots(1.5);
        assert_eq!(n, 2);
        assert!((s - 0.75).abs() < 1e-9);
        let one = Cpu::new(1);
        let (n, s) = one.slots(0.75);
        assert_eq!(n, 1);
        assert!((s - 0.75).abs() < 1e-9);
        assert_eq!(Cpu::duration(30, 0, 1.0), 30);
        assert_eq!(Cpu::duration(30, 15, 0.75), 60);
    }
}

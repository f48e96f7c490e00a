//! One replica's heap: tells its collector, step by step, what the step
//! allocated, what became live (written values, log entries, sessions)
//! and what died, with the young epoch each dead piece was born in, and
//! what is live only while requests are in flight.

use stutter_core::{Replica, Time};
use stutter_gc::{Alloc, Collector, Event};

use super::ages::{KeyAges, Log};
use super::MemoryModel;

/// What the current step did to the state (from its trace events).
#[derive(Default)]
struct Step {
    /// Long-lived bytes born in it.
    retained: u64,
    /// Long-lived bytes that died, with the epoch each was born in (none:
    /// part of the data set, or not tracked).
    released: Vec<(u64, Option<u64>)>,
    /// Allocation the input table does not know (a snapshot copy).
    extra: u64,
    executed: u64,
}

pub struct Heap {
    collector: Collector,
    /// The time of this replica's one queue entry for the collector's
    /// next self-driven change (a mark finishing).
    pub wake_queued: Option<Time>,
    /// Epochs of the keys' current values (a generational collector only).
    keys: Option<KeyAges>,
    log: Log,
    /// Stored keys beyond the preloaded ones and sessions, at the last step.
    extra_keys: u64,
    sessions: u64,
    /// Idle allocation is charged up to here.
    idle_at: Time,
    step: Step,
}

impl Heap {
    pub fn new(m: &MemoryModel, cores: u32, rep: &Replica, now: Time) -> Heap {
        let sm = rep.state_machine();
        let extra_keys = (sm.kv.len() as u64).saturating_sub(m.preloaded_keys());
        let sessions = sm.sessions.len() as u64;
        let live = m.initial_live() + extra_keys * m.new_key_bytes() + sessions * m.session_bytes();
        let mut collector = Collector::new(&m.gc, cores as f64, live, now, m.window);
        collector.set_coordinated(m.coordinated);
        let keys = collector.generational().then(KeyAges::default);
        Heap {
            collector,
            wake_queued: None,
            keys,
            log: Log::new(now),
            extra_keys,
            sessions,
            idle_at: now,
            step: Step::default(),
        }
    }

    /// A request executed in `slot` in the current step, logging
    /// `log_bytes`; a write (`key`) replaced a value of `value_bytes`.
    pub fn executed(&mut self, now: Time, slot: u64, log_bytes: u64, write: Option<(u64, u64)>) {
        let epoch = self.collector.epoch();
        self.step.executed += 1;
        self.step.retained += log_bytes;
        self.log.append(now, slot, epoch, log_bytes);
        if let Some((key, value_bytes)) = write {
            self.step.retained += value_bytes;
            // The old value was born when it was last written in this
            // run, or is part of the data set (older than any epoch).
            let born = self.keys.as_mut().and_then(|k| k.write(key, epoch));
            self.step.released.push((value_bytes, born));
        }
    }

    /// The protocol trimmed its log up to `slot` in the current step.
    pub fn trimmed(&mut self, m: &MemoryModel, slot: u64) {
        self.log.trimmed(m.log_trim, slot, &mut self.step.released);
    }

    /// The current step allocated `bytes` the input table does not know
    /// (a snapshot copy at a trim or an install).
    pub fn extra(&mut self, bytes: u64) {
        self.step.extra += bytes;
    }

    pub fn advance(&mut self, now: Time, busy_cores: f64) {
        self.collector.advance(now, busy_cores);
    }

    /// Cores the collector's concurrent work keeps busy now.
    pub fn concurrent_cores(&self) -> f64 {
        self.collector.concurrent_cores()
    }

    /// The share of a core each thread of the process gets from now on.
    pub fn set_share(&mut self, share: f64) {
        self.collector.set_share(share);
    }

    pub fn mutator_cores(&self) -> f64 {
        self.collector.mutator_cores()
    }

    pub fn next_wakeup(&self) -> Option<Time> {
        self.collector.next_wakeup()
    }

    pub fn poll(&mut self, out: &mut Vec<Event>) {
        self.collector.poll(out)
    }

    /// The protocol granted the due collection: run it now. Returns
    /// whether there was one to run.
    pub fn collect_now(&mut self, now: Time) -> bool {
        self.collector.collect_now(now)
    }

    /// Whether bytes' ages matter to the collector.
    pub fn generational(&self) -> bool {
        self.collector.generational()
    }

    /// Live bytes of the log now.
    pub fn log_bytes(&self) -> u64 {
        self.log.bytes()
    }

    /// The step of an input that allocated `input_bytes` is done, at a
    /// replica that leads (`leader`) or not, with `in_flight` bytes of
    /// client operations waiting for their reply: returns the assist µs
    /// the input must also spend.
    pub fn after_step(
        &mut self,
        now: Time,
        m: &MemoryModel,
        input_bytes: u64,
        rep: &Replica,
        leader: bool,
        in_flight: u64,
    ) -> Time {
        let step = std::mem::take(&mut self.step);
        let mut released = step.released;
        self.log.tick(m.log_trim, now, &mut released);
        // Stored keys beyond the data set, and sessions: born now, or old
        // garbage when they go (evictions, a snapshot installed).
        let sm = rep.state_machine();
        let extra_keys = (sm.kv.len() as u64).saturating_sub(m.preloaded_keys());
        let sessions = sm.sessions.len() as u64;
        let grown = extra_keys.saturating_sub(self.extra_keys) * m.new_key_bytes()
            + sessions.saturating_sub(self.sessions) * m.session_bytes();
        let shrunk = self.extra_keys.saturating_sub(extra_keys) * m.new_key_bytes()
            + self.sessions.saturating_sub(sessions) * m.session_bytes();
        self.extra_keys = extra_keys;
        self.sessions = sessions;
        let idle = m.idle_per_s(leader) * now.saturating_sub(self.idle_at) as f64 / 1e6;
        self.idle_at = now;
        let retained = step.retained + grown;
        // stutter's table charges the decoded payload apart from the
        // state it becomes; a profile's bytes per operation include it.
        let bytes = if m.per_op.is_some() {
            (input_bytes + idle as u64 + step.extra).max(retained)
        } else {
            input_bytes + step.extra + step.executed * m.alloc.executed + retained
        };
        for (b, born) in released {
            self.collector.release(b, born);
        }
        if self.collector.generational() {
            self.collector.set_in_flight(in_flight);
        }
        self.collector.allocate(
            now,
            Alloc {
                bytes,
                retained,
                released: shrunk,
            },
        )
    }

    pub fn finish(&mut self, now: Time, busy_cores: f64) -> stutter_gc::Stats {
        self.collector.finish(now, busy_cores).clone()
    }
}

//! Each replica's heap under a collector model (`stutter_gc`): what every
//! input allocates, what of it stays live, and the collector's answer —
//! stop-the-world pauses, cores taken by concurrent workers, and assists
//! charged to the input that allocated.
//!
//! The live heap is the replica's state: the data set it was loaded with
//! (the seed paper's 4 GiB; here `dataset_bytes`, never materialized), the
//! key-value entries and sessions it executed, and the log not yet
//! trimmed; times `overhead`, the runtime's bytes per byte of data. A write
//! that executes replaces a value: its bytes become live and the old
//! value's become garbage. Everything else an input allocates (decoding,
//! messages, replies) is garbage at once.

use serde::{Deserialize, Serialize};
use stutter_core::{Input, Message, Op, Output, Replica, Time};
use stutter_gc::{Alloc, Collector, Event, GcModel};

/// Bytes each kind of input allocates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AllocTable {
    pub client_request: u64,
    pub message: u64,
    pub timer: u64,
    pub persisted: u64,
    /// Per byte of keys and values an input carries (decoded copies).
    pub per_payload_byte: f64,
    /// Per request executed (the session entry).
    pub executed: u64,
    /// Per reply to a client and per message sent (the encoded frame).
    pub reply: u64,
    pub send: u64,
}

impl Default for AllocTable {
    fn default() -> Self {
        crate::calibration::ALLOC
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MemoryModel {
    pub gc: GcModel,
    /// Data every replica holds before the run, bytes.
    pub dataset_bytes: u64,
    /// Heap bytes per byte of data.
    pub overhead: f64,
    pub alloc: AllocTable,
    /// Window of the collector-CPU timeline, µs.
    pub window: Time,
    /// GC coordination (Blade): the long collections wait for the
    /// protocol's grant (`Config::gc_coordination`).
    pub coordinated: bool,
}

impl Default for MemoryModel {
    fn default() -> Self {
        MemoryModel {
            gc: GcModel::None,
            dataset_bytes: 0,
            overhead: 1.0,
            alloc: AllocTable::default(),
            window: 100_000,
            coordinated: false,
        }
    }
}

impl MemoryModel {
    /// A Go-like runtime (GOGC=100) with GOMEMLIMIT at `ratio` × the data,
    /// holding `dataset` bytes of data.
    pub fn go(dataset: u64, ratio: f64) -> MemoryModel {
        let limit = (dataset as f64 * ratio) as u64;
        let p = stutter_gc::GoParams {
            memory_limit: Some(limit),
            ..stutter_gc::GoParams::default()
        };
        MemoryModel {
            gc: GcModel::Go(p),
            dataset_bytes: dataset,
            overhead: crate::calibration::GO_OVERHEAD,
            ..MemoryModel::default()
        }
    }

    /// A G1-like runtime with -Xmx at `ratio` × the data.
    pub fn g1(dataset: u64, ratio: f64) -> MemoryModel {
        let heap_size = (dataset as f64 * ratio) as u64;
        let p = stutter_gc::G1Params {
            heap_size,
            ..stutter_gc::G1Params::default()
        };
        MemoryModel {
            gc: GcModel::G1(p),
            dataset_bytes: dataset,
            overhead: crate::calibration::G1_OVERHEAD,
            ..MemoryModel::default()
        }
    }

    /// A runtime without a collector holding `dataset` bytes.
    pub fn none(dataset: u64) -> MemoryModel {
        MemoryModel {
            dataset_bytes: dataset,
            ..MemoryModel::default()
        }
    }

    pub fn is_on(&self) -> bool {
        !matches!(self.gc, GcModel::None)
    }

    /// Long-lived bytes of a replica's state.
    fn state_bytes(&self, rep: &Replica, value_size: u64) -> u64 {
        let sm = rep.state_machine();
        let entry = 24 + value_size + 48;
        let slot = 64 + 24 + value_size;
        let log = if rep.last_index() > rep.trimmed() {
            rep.last_index() - rep.trimmed()
        } else {
            0
        };
        let own = sm.kv.len() as u64 * entry + sm.sessions.len() as u64 * 64 + log * slot;
        ((self.dataset_bytes + own) as f64 * self.overhead) as u64
    }

    /// Bytes a step's outputs allocate (replies and sends encoded).
    pub fn output_bytes(&self, out: &[Output]) -> u64 {
        out.iter()
            .map(|o| match o {
                Output::Reply { .. } => self.alloc.reply,
                Output::Send { .. } => self.alloc.send,
                _ => 0,
            })
            .sum()
    }

    /// Bytes an input allocates before its protocol step.
    pub fn input_bytes(&self, input: &Input, value_size: u64) -> u64 {
        let a = &self.alloc;
        let payload = |op: &Op| -> u64 {
            let v = match op {
                Op::Put { .. } | Op::Cas { .. } => value_size,
                _ => 0,
            };
            op.key().len() as u64 + v
        };
        let (base, bytes) = match input {
            Input::Request(req) => (a.client_request, payload(&req.op)),
            Input::Message { msg, .. } => {
                let carried: u64 = match msg {
                    Message::Accept { value, .. } => {
                        value.requests().iter().map(|r| payload(&r.op)).sum()
                    }
                    Message::CatchUp { entries, .. } | Message::Promise { entries, .. } => entries
                        .iter()
                        .flat_map(|e| e.value.requests())
                        .map(|r| payload(&r.op))
                        .sum(),
                    _ => 0,
                };
                (a.message, carried)
            }
            Input::Timer(_)
            | Input::Start
            | Input::GcDue { .. }
            | Input::GcDone
            | Input::StorageAlarm { .. } => (a.timer, 0),
            Input::Persisted { .. } => (a.persisted, 0),
        };
        base + (bytes as f64 * a.per_payload_byte) as u64
    }
}

/// One replica's heap.
pub struct Heap {
    collector: Collector,
    /// The time of this replica's one queue entry for the collector's
    /// next self-driven change (a mark finishing).
    pub wake_queued: Option<Time>,
    state: u64,
    /// During a step: bytes of executed writes (live values replaced) and
    /// other allocation the trace revealed (snapshot copies).
    step_churn: u64,
    step_extra: u64,
    step_executed: u64,
}

impl Heap {
    pub fn new(m: &MemoryModel, cores: u32, rep: &Replica, value_size: u64, now: Time) -> Heap {
        let state = m.state_bytes(rep, value_size);
        let mut collector = Collector::new(&m.gc, cores as f64, state, now, m.window);
        collector.set_coordinated(m.coordinated);
        Heap {
            collector,
            wake_queued: None,
            state,
            step_churn: 0,
            step_extra: 0,
            step_executed: 0,
        }
    }

    /// A request executed in the current step; a write of `bytes` replaces
    /// a live value.
    pub fn executed(&mut self, write_bytes: u64) {
        self.step_executed += 1;
        self.step_churn += write_bytes;
    }

    /// The current step allocated `bytes` the input table does not know
    /// (a snapshot copy at a trim or an install).
    pub fn extra(&mut self, bytes: u64) {
        self.step_extra += bytes;
    }

    pub fn advance(&mut self, now: Time, busy_cores: f64) {
        self.collector.advance(now, busy_cores);
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

    /// The step of an input that allocated `input_bytes` is done: returns
    /// the assist µs the input must also spend.
    pub fn after_step(
        &mut self,
        now: Time,
        m: &MemoryModel,
        input_bytes: u64,
        rep: &Replica,
        value_size: u64,
    ) -> Time {
        let state = m.state_bytes(rep, value_size);
        let churn = (std::mem::take(&mut self.step_churn) as f64 * m.overhead) as u64;
        let extra = std::mem::take(&mut self.step_extra);
        let executed = std::mem::take(&mut self.step_executed);
        let grown = state.saturating_sub(self.state);
        let shrunk = self.state.saturating_sub(state);
        self.state = state;
        let a = Alloc {
            bytes: input_bytes + extra + executed * m.alloc.executed + grown + churn,
            retained: grown + churn,
            released: shrunk + churn,
        };
        self.collector.allocate(now, a)
    }

    pub fn finish(&mut self, now: Time, busy_cores: f64) -> stutter_gc::Stats {
        self.collector.finish(now, busy_cores).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stutter_core::{Reply, Timer};

    #[test]
    fn replies_and_sends_allocate_their_frames() {
        let m = MemoryModel {
            alloc: AllocTable {
                reply: 300,
                send: 200,
                ..AllocTable::default()
            },
            ..MemoryModel::default()
        };
        let out = [
            Output::Reply {
                client: 1,
                seq: 1,
                reply: Reply::Done,
            },
            Output::Send {
                to: 1,
                msg: Message::Accepted {
                    ballot: stutter_core::Ballot(1),
                    slot: stutter_core::Slot(1),
                    ok: true,
                },
            },
            Output::Send {
                to: 2,
                msg: Message::Accepted {
                    ballot: stutter_core::Ballot(1),
                    slot: stutter_core::Slot(1),
                    ok: true,
                },
            },
            Output::SetTimer {
                timer: Timer::Heartbeat,
                at: 5,
            },
        ];
        assert_eq!(m.output_bytes(&out), 300 + 2 * 200);
        assert_eq!(m.output_bytes(&[]), 0);
    }
}

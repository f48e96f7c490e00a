//! Each replica's heap under a collector model (`stutter_gc`): what every
//! input allocates, what of it stays live and for how long, and the
//! collector's answer — stop-the-world pauses, cores taken by concurrent
//! workers, and assists charged to the input that allocated (`heap.rs`).
//!
//! The live heap is the replica's state: the data set it was loaded with
//! (the seed paper's 4 GiB; here `dataset_bytes`, never materialized), the
//! values its writes replaced, its log until trimmed, and its sessions. A
//! write that executes replaces a value: the new value's bytes become live
//! and the old value's garbage. Everything else an input allocates
//! (decoding, messages, replies) is garbage at once, except while the
//! request it belongs to is in flight.
//!
//! Two sources of figures: stutter's own node ([`AllocTable`], the real
//! node's allocation per input and output, and `overhead`, the runtime's
//! live bytes per byte of data, for "what if stutter ran on a Go or JVM
//! heap"), or an allocation profile measured on a real implementation
//! ([`PerOp`], `crate::profile`): bytes per operation by role and live
//! bytes per key, already in the runtime's own bytes.

mod ages;
mod heap;

use serde::{Deserialize, Serialize};
use stutter_core::{Input, Message, Op, Output, Time};
use stutter_gc::GcModel;

pub use heap::Heap;

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

/// An allocation profile's figures (`crate::profile::Profile`), bytes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PerOp {
    /// Per client operation handled by the leader, and by a follower
    /// (which redirects it).
    pub leader_read: f64,
    pub leader_write: f64,
    pub follower_read: f64,
    /// Per write a follower accepts.
    pub follower_write: f64,
    /// With no load, per second.
    pub leader_idle_per_s: f64,
    pub follower_idle_per_s: f64,
    /// Live heap per stored key, and of an empty replica.
    pub bytes_per_key: f64,
    pub base_bytes: f64,
    /// Keys preloaded (the data set).
    pub keys: u64,
    pub key_bytes: u64,
    pub value_bytes: u64,
    /// Whether the implementation runs reads through the log as writes
    /// (Replicant does: followers accept them and the log keeps them;
    /// stutter serves them at the leader by read index). The simulated
    /// protocol does not, so a follower is charged `follower_read` and the
    /// log a read's entry for each of the reads that come with a write in
    /// the workload's mix, `reads_per_write`.
    pub reads_replicated: bool,
    pub reads_per_write: f64,
}

impl PerOp {
    /// Live bytes one raw byte of keys and values costs.
    fn per_raw_byte(&self) -> f64 {
        self.bytes_per_key / (self.key_bytes + self.value_bytes).max(1) as f64
    }
}

/// When the log's entries die.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "lowercase")]
pub enum LogTrim {
    /// When the protocol core trims (`Action::Trim`).
    #[default]
    Core,
    /// Everything executed once this many bytes were (stutter's node:
    /// `trim_bytes`, 16 MiB), counted in the modelled bytes (the
    /// simulator's own values are short numbers).
    Bytes { bytes: u64 },
    /// Every `interval` µs, what was logged before the previous trim
    /// (Replicant: its commit round, every 3 s, trims to the global last
    /// executed of the round before).
    Interval { interval: Time },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MemoryModel {
    pub gc: GcModel,
    /// Data every replica holds before the run, bytes.
    pub dataset_bytes: u64,
    /// Heap bytes per byte of data (with [`AllocTable`] only).
    pub overhead: f64,
    pub alloc: AllocTable,
    /// A profile's figures instead of `alloc` and `overhead`.
    pub per_op: Option<PerOp>,
    /// When log entries die.
    pub log_trim: LogTrim,
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
            per_op: None,
            log_trim: LogTrim::Core,
            window: 100_000,
            coordinated: false,
        }
    }
}

/// Bytes the log keeps per request beyond its key and value (the entry,
/// the request's ids).
const LOG_ENTRY: u64 = 64 + 24;
/// Bytes of a stored entry beyond its value (key, map node).
const KV_ENTRY: u64 = 24 + 48;
/// Bytes of a session entry.
const SESSION: u64 = 64;
/// Bytes of a key without a profile: the benchmark's 23-byte keys.
const TABLE_KEY: u64 = 23;

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

    /// A G1-like runtime with -Xmx at `ratio` × the data. Its live data
    /// starts at `G1_OVERHEAD` (1.25) × the data: at a ratio of 1.25 or
    /// less the heap cannot hold it, no eden fits, and the collector runs
    /// full collections back to back (a JVM that cannot run).
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

    /// Live bytes of the data set before the run.
    pub fn initial_live(&self) -> u64 {
        match &self.per_op {
            Some(p) => (p.base_bytes + p.keys as f64 * p.bytes_per_key) as u64,
            None => (self.dataset_bytes as f64 * self.overhead) as u64,
        }
    }

    /// Live bytes a written value adds (and the value it replaces frees).
    pub fn value_bytes(&self, value_size: u64) -> u64 {
        match &self.per_op {
            Some(p) => (p.value_bytes as f64 * p.per_raw_byte()) as u64,
            None => (value_size as f64 * self.overhead) as u64,
        }
    }

    /// Live bytes a key written for the first time adds beyond its value
    /// (none for a preloaded key).
    pub fn new_key_bytes(&self) -> u64 {
        match &self.per_op {
            Some(p) => (p.key_bytes as f64 * p.per_raw_byte()) as u64,
            None => (KV_ENTRY as f64 * self.overhead) as u64,
        }
    }

    /// Keys the data set holds (writes to them replace a value).
    pub fn preloaded_keys(&self) -> u64 {
        self.per_op.as_ref().map_or(0, |p| p.keys)
    }

    /// Live bytes the log keeps for an executed write until trimmed: its
    /// own entry, and those of the reads an implementation that replicates
    /// reads logs with it (`PerOp::reads_replicated`).
    pub fn write_log_bytes(&self, value_size: u64) -> u64 {
        let reads = match &self.per_op {
            Some(p) if p.reads_replicated => p.reads_per_write,
            _ => 0.0,
        };
        self.log_bytes(true, value_size) + (reads * self.log_bytes(false, value_size) as f64) as u64
    }

    /// Live bytes a logged request (a write, `update`, or not) keeps until
    /// its entry is trimmed.
    pub fn log_bytes(&self, update: bool, value_size: u64) -> u64 {
        match &self.per_op {
            Some(p) => {
                let raw = p.key_bytes + if update { p.value_bytes } else { 0 };
                (raw as f64 * p.per_raw_byte()) as u64 + LOG_ENTRY
            }
            None => {
                let raw = TABLE_KEY + if update { value_size } else { 0 };
                ((raw + LOG_ENTRY) as f64 * self.overhead) as u64
            }
        }
    }

    /// Live bytes of a session entry.
    pub fn session_bytes(&self) -> u64 {
        match &self.per_op {
            Some(_) => SESSION,
            None => (SESSION as f64 * self.overhead) as u64,
        }
    }

    /// Bytes a step's outputs allocate (replies and sends encoded; a
    /// profile counts them in its bytes per operation).
    pub fn output_bytes(&self, out: &[Output]) -> u64 {
        if self.per_op.is_some() {
            return 0;
        }
        out.iter()
            .map(|o| match o {
                Output::Reply { .. } => self.alloc.reply,
                Output::Send { .. } => self.alloc.send,
                _ => 0,
            })
            .sum()
    }

    /// Bytes an input allocates before its protocol step, at a replica
    /// that leads (`leader`) or not.
    pub fn input_bytes(&self, input: &Input, value_size: u64, leader: bool) -> u64 {
        if let Some(p) = &self.per_op {
            return per_op_bytes(p, input, leader) as u64;
        }
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

    /// What one client operation allocates while it is in flight (its
    /// request decoded, its reply): what a young collection copies for a
    /// request being handled.
    pub fn op_bytes(&self, read_fraction: f64, value_size: u64) -> u64 {
        match &self.per_op {
            Some(p) => {
                (read_fraction * p.leader_read + (1.0 - read_fraction) * p.leader_write) as u64
            }
            None => {
                let a = &self.alloc;
                let payload = 24.0 + (1.0 - read_fraction) * value_size as f64;
                a.client_request + a.reply + (payload * a.per_payload_byte) as u64
            }
        }
    }

    /// Idle allocation per second of a leader or a follower.
    pub fn idle_per_s(&self, leader: bool) -> f64 {
        match &self.per_op {
            Some(p) if leader => p.leader_idle_per_s,
            Some(p) => p.follower_idle_per_s,
            None => 0.0,
        }
    }
}

/// A profile's bytes for one input: client operations at the replica
/// they reach, writes at the followers that accept them.
fn per_op_bytes(p: &PerOp, input: &Input, leader: bool) -> f64 {
    match input {
        Input::Request(req) => {
            let read = matches!(req.op, Op::Get { .. } | Op::Register);
            match (leader, read) {
                (true, true) => p.leader_read,
                (true, false) => p.leader_write,
                // Redirected (the follower's share of a replicated read is
                // charged with the writes it accepts).
                (false, _) if p.reads_replicated => 0.0,
                (false, _) => p.follower_read,
            }
        }
        Input::Message {
            msg: Message::Accept { value, .. },
            ..
        } if !leader => {
            let writes = value
                .requests()
                .iter()
                .filter(|r| !matches!(r.op, Op::Get { .. } | Op::Register))
                .count() as f64;
            let reads = if p.reads_replicated {
                writes * p.reads_per_write
            } else {
                0.0
            };
            p.follower_write * writes + p.follower_read * reads
        }
        _ => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use stutter_core::{Reply, Request, Timer};

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

    #[test]
    fn a_profile_charges_operations_by_role_and_counts_runtime_bytes_without_overhead() {
        let p = PerOp {
            leader_read: 5_000.0,
            leader_write: 9_000.0,
            follower_read: 100.0,
            follower_write: 3_000.0,
            bytes_per_key: 1_046.0,
            keys: 1_000,
            key_bytes: 23,
            value_bytes: 500,
            ..PerOp::default()
        };
        let m = MemoryModel {
            per_op: Some(p),
            overhead: 7.0,
            ..MemoryModel::default()
        };
        let put = |k: &'static [u8]| {
            Request::new(
                1,
                1,
                Op::Put {
                    key: Bytes::from_static(k),
                    value: Bytes::from_static(b"1"),
                },
            )
        };
        let get = Request::new(
            1,
            2,
            Op::Get {
                key: Bytes::from_static(b"a"),
            },
        );
        assert_eq!(m.input_bytes(&Input::Request(put(b"a")), 500, true), 9_000);
        assert_eq!(
            m.input_bytes(&Input::Request(get.clone()), 500, true),
            5_000
        );
        assert_eq!(m.input_bytes(&Input::Request(get), 500, false), 100);
        let accept = Input::Message {
            from: 0,
            msg: Message::Accept {
                ballot: stutter_core::Ballot(1),
                slot: stutter_core::Slot(1),
                value: stutter_core::Value::Batch(std::sync::Arc::new(vec![put(b"a"), put(b"b")])),
                committed: None,
            },
        };
        assert_eq!(m.input_bytes(&accept, 500, false), 6_000);
        assert_eq!(
            m.output_bytes(&[Output::Reply {
                client: 1,
                seq: 1,
                reply: Reply::Done,
            }]),
            0
        );
        // 1,046 live bytes per 523 raw: 2 per raw byte, never `overhead`.
        assert_eq!(m.initial_live(), 1_046_000);
        assert_eq!(m.value_bytes(500), 1_000);
        assert_eq!(m.op_bytes(0.5, 500), 7_000);
    }
}

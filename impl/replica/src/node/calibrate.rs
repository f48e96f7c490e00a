//! `replica --calibrate FILE`: one CSV line per protocol-loop turn, the
//! data from which `impl/replica/calibrate/fit.py` fits the simulator's
//! service and allocation tables (docs/calibration.md).
//!
//! A line holds what the turn took in (client requests by operation, peer
//! messages by type, timers, a durability notice), what it gave out (sends
//! by type, replies, persisted records), the payload bytes of both, the
//! requests it executed, and cumulative counters read at the turn's start
//! and end: the loop thread's CPU time, the process's allocated and freed
//! bytes, and the log thread's CPU, group commits and bytes. The time from
//! one turn's end to the next one's start is the runtime's other tasks on
//! the same thread (reading and decoding the next inputs, encoding and
//! writing this turn's sends and replies): the fit attributes it from the
//! columns of both turns.
//!
//! Lines are kept in blocks of [`BLOCK`] and written by a thread of their
//! own, which hands the emptied blocks back: in steady state recording
//! allocates nothing and the loop never writes to a file.

use std::io::Write;
use std::path::Path;
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use stutter_core::{Input, Message, Op, Output, Record, Replica, Slot, Timer};

use super::group_commit::WalMeter;
use crate::alloc_count;

const BLOCK: usize = 4096;

/// Message kinds, in the order of the CSV's columns.
pub const MESSAGE_KINDS: [&str; 16] = [
    "Prepare",
    "Promise",
    "Accept",
    "Accepted",
    "Heartbeat",
    "HeartbeatReply",
    "CatchUp",
    "InstallSnapshot",
    "ReadProbe",
    "ReadProbeAck",
    "GcRequest",
    "GcGrant",
    "GcDone",
    "TimeoutNow",
    "PreVote",
    "PreVoteReply",
];

fn kind_index(m: &Message) -> usize {
    match m {
        Message::Prepare { .. } => 0,
        Message::Promise { .. } => 1,
        Message::Accept { .. } => 2,
        Message::Accepted { .. } => 3,
        Message::Heartbeat { .. } => 4,
        Message::HeartbeatReply { .. } => 5,
        Message::CatchUp { .. } => 6,
        Message::InstallSnapshot { .. } => 7,
        Message::ReadProbe { .. } => 8,
        Message::ReadProbeAck { .. } => 9,
        Message::GcRequest { .. } => 10,
        Message::GcGrant { .. } => 11,
        Message::GcDone { .. } => 12,
        Message::TimeoutNow { .. } => 13,
        Message::PreVote { .. } => 14,
        Message::PreVoteReply { .. } => 15,
    }
}

/// Bytes of keys and values an operation carries.
pub(super) fn op_bytes(op: &Op) -> u64 {
    let k = op.key().len() as u64;
    match op {
        Op::Get { .. } | Op::Del { .. } => k,
        Op::Put { value, .. } => k + value.len() as u64,
        Op::Cas { from, to, .. } => {
            k + from.as_ref().map_or(0, |f| f.len() as u64) + to.len() as u64
        }
        Op::Register => 0,
    }
}

/// Requests a message carries, and their bytes of keys and values.
fn message_payload(m: &Message) -> (u64, u64) {
    let mut n = 0;
    let mut b = 0;
    let mut add = |v: &stutter_core::Value| {
        for r in v.requests() {
            n += 1;
            b += op_bytes(&r.op);
        }
    };
    match m {
        Message::Accept { value, .. } => add(value),
        Message::CatchUp { entries, .. } | Message::Promise { entries, .. } => {
            entries.iter().for_each(|e| add(&e.value))
        }
        Message::InstallSnapshot { snapshot, .. } => {
            b = snapshot
                .kv
                .iter()
                .map(|(k, v)| (k.len() + v.len()) as u64)
                .sum();
        }
        _ => {}
    }
    (n, b)
}

/// What started a turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TurnKind {
    /// Peer messages and client requests taken from the event channel.
    Events = 0,
    /// The log thread made records durable.
    Persisted = 1,
    Timers = 2,
    /// The collector model's own wake-up (`[gc]`).
    Gc = 3,
}

/// One turn's line. Counters named `*_start`/`*_end` are cumulative
/// values read at the turn's start and end; the rest count this turn.
#[derive(Clone, Debug, Default)]
pub struct Turn {
    kind: u8,
    /// ns since the Unix epoch.
    wall_start_ns: u64,
    wall_end_ns: u64,
    cpu_start_ns: u64,
    cpu_end_ns: u64,
    alloc_start: u64,
    alloc_end: u64,
    freed_start: u64,
    freed_end: u64,
    nalloc_start: u64,
    nalloc_end: u64,
    wal_cpu_ns: u64,
    wal_syncs: u64,
    wal_records: u64,
    wal_bytes: u64,
    wal_write_sync_ns: u64,
    // inputs
    req_get: u32,
    req_put: u32,
    req_del: u32,
    req_cas: u32,
    req_bytes: u64,
    status: u32,
    msg_in: [u32; MESSAGE_KINDS.len()],
    msg_in_reqs: u64,
    msg_in_bytes: u64,
    persisted: u32,
    timer_election: u32,
    timer_heartbeat: u32,
    // outputs
    send: [u32; MESSAGE_KINDS.len()],
    send_reqs: u64,
    send_bytes: u64,
    send_peers: u32,
    replies: u32,
    persists: u32,
    persist_records: u32,
    persist_reqs: u64,
    persist_bytes: u64,
    set_timers: u32,
    // execution
    executed_slots: u64,
    executed_reqs: u64,
    executed_writes: u64,
    executed_write_bytes: u64,
    // the collector model (`[gc]`), if any: assist spun and pauses slept
    // after the turn's end, µs
    gc_assist_us: u64,
    gc_pause_us: u64,
    // persist requests made durable in this turn: how many, and the sum
    // and maximum of their latencies (from the turn that asked to the
    // turn that learnt it), µs — what the simulator's disk stands for
    persist_done: u32,
    persist_lat_sum_us: u64,
    persist_lat_max_us: u64,
}

fn header() -> String {
    let mut h: Vec<String> = [
        "kind",
        "wall_start_ns",
        "wall_end_ns",
        "cpu_start_ns",
        "cpu_end_ns",
        "alloc_start",
        "alloc_end",
        "freed_start",
        "freed_end",
        "nalloc_start",
        "nalloc_end",
        "wal_cpu_ns",
        "wal_syncs",
        "wal_records",
        "wal_bytes",
        "wal_write_sync_ns",
        "req_get",
        "req_put",
        "req_del",
        "req_cas",
        "req_bytes",
        "status",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    h.extend(MESSAGE_KINDS.iter().map(|k| format!("in_{k}")));
    h.extend(
        [
            "msg_in_reqs",
            "msg_in_bytes",
            "persisted",
            "timer_election",
            "timer_heartbeat",
        ]
        .map(String::from),
    );
    h.extend(MESSAGE_KINDS.iter().map(|k| format!("send_{k}")));
    h.extend(
        [
            "send_reqs",
            "send_bytes",
            "send_peers",
            "replies",
            "persists",
            "persist_records",
            "persist_reqs",
            "persist_bytes",
            "set_timers",
            "executed_slots",
            "executed_reqs",
            "executed_writes",
            "executed_write_bytes",
            "gc_assist_us",
            "gc_pause_us",
            "persist_done",
            "persist_lat_sum_us",
            "persist_lat_max_us",
        ]
        .map(String::from),
    );
    h.join(",")
}

impl Turn {
    fn write_csv(&self, w: &mut impl Write) -> std::io::Result<()> {
        write!(
            w,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            self.kind,
            self.wall_start_ns,
            self.wall_end_ns,
            self.cpu_start_ns,
            self.cpu_end_ns,
            self.alloc_start,
            self.alloc_end,
            self.freed_start,
            self.freed_end,
            self.nalloc_start,
            self.nalloc_end,
            self.wal_cpu_ns,
            self.wal_syncs,
            self.wal_records,
            self.wal_bytes,
            self.wal_write_sync_ns,
            self.req_get,
            self.req_put,
            self.req_del,
            self.req_cas,
            self.req_bytes,
            self.status
        )?;
        for c in self.msg_in {
            write!(w, ",{c}")?;
        }
        write!(
            w,
            ",{},{},{},{},{}",
            self.msg_in_reqs,
            self.msg_in_bytes,
            self.persisted,
            self.timer_election,
            self.timer_heartbeat
        )?;
        for c in self.send {
            write!(w, ",{c}")?;
        }
        writeln!(
            w,
            ",{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            self.send_reqs,
            self.send_bytes,
            self.send_peers,
            self.replies,
            self.persists,
            self.persist_records,
            self.persist_reqs,
            self.persist_bytes,
            self.set_timers,
            self.executed_slots,
            self.executed_reqs,
            self.executed_writes,
            self.executed_write_bytes,
            self.gc_assist_us,
            self.gc_pause_us,
            self.persist_done,
            self.persist_lat_sum_us,
            self.persist_lat_max_us
        )
    }
}

/// Records the protocol loop's turns.
pub struct TurnMeter {
    t0: Instant,
    /// `t0` in ns since the Unix epoch: lines carry wall times on that
    /// scale, so that a driver can cut out the measured part of a run.
    epoch_ns: u64,
    wal: Arc<WalMeter>,
    cur: Turn,
    /// Peers sent to in the current turn (bit per replica id < 64).
    peers: u64,
    last_executed: Slot,
    /// Persist requests not yet durable: (token, wall ns when asked).
    persisting: std::collections::VecDeque<(u64, u64)>,
    block: Vec<Turn>,
    full: SyncSender<Vec<Turn>>,
    empty: Receiver<Vec<Turn>>,
}

impl TurnMeter {
    /// Creates `path` and starts its writer thread.
    pub fn create(path: &Path, wal: Arc<WalMeter>) -> Result<TurnMeter> {
        let file =
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let (full, full_rx) = sync_channel::<Vec<Turn>>(64);
        let (empty_tx, empty) = channel::<Vec<Turn>>();
        for _ in 0..4 {
            let _ = empty_tx.send(Vec::with_capacity(BLOCK));
        }
        std::thread::Builder::new()
            .name("calibrate".into())
            .spawn(move || writer(file, full_rx, empty_tx))?;
        let epoch_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Ok(TurnMeter {
            t0: Instant::now(),
            epoch_ns,
            wal,
            cur: Turn::default(),
            peers: 0,
            last_executed: Slot::ZERO,
            persisting: std::collections::VecDeque::with_capacity(1024),
            block: Vec::with_capacity(BLOCK),
            full,
            empty,
        })
    }

    fn now_ns(&self) -> u64 {
        self.epoch_ns + self.t0.elapsed().as_nanos() as u64
    }

    pub fn start(&mut self, kind: TurnKind, replica: &Replica) {
        let a = alloc_count::counts();
        self.cur = Turn {
            kind: kind as u8,
            wall_start_ns: self.now_ns(),
            cpu_start_ns: crate::thread_cpu::now_ns(),
            alloc_start: a.allocated,
            freed_start: a.freed,
            nalloc_start: a.allocations,
            wal_cpu_ns: self.wal.cpu_ns(),
            wal_syncs: self.wal.syncs.load(std::sync::atomic::Ordering::Relaxed),
            wal_records: self.wal.records.load(std::sync::atomic::Ordering::Relaxed),
            wal_bytes: self.wal.bytes.load(std::sync::atomic::Ordering::Relaxed),
            wal_write_sync_ns: self
                .wal
                .write_sync_ns
                .load(std::sync::atomic::Ordering::Relaxed),
            ..Turn::default()
        };
        self.peers = 0;
        self.last_executed = replica.last_executed();
    }

    pub fn input(&mut self, input: &Input) {
        let t = &mut self.cur;
        match input {
            Input::Request(r) => {
                match r.op {
                    Op::Get { .. } => t.req_get += 1,
                    Op::Put { .. } => t.req_put += 1,
                    Op::Del { .. } => t.req_del += 1,
                    Op::Cas { .. } => t.req_cas += 1,
                    // Once per client, not an operation of the workload.
                    Op::Register => {}
                }
                t.req_bytes += op_bytes(&r.op);
            }
            Input::Message { msg, .. } => {
                t.msg_in[kind_index(msg)] += 1;
                let (n, b) = message_payload(msg);
                t.msg_in_reqs += n;
                t.msg_in_bytes += b;
            }
            Input::Persisted { token } => {
                t.persisted += 1;
                let now = t.wall_start_ns;
                while let Some(&(tok, at)) = self.persisting.front() {
                    if tok > *token {
                        break;
                    }
                    self.persisting.pop_front();
                    let us = now.saturating_sub(at) / 1000;
                    t.persist_done += 1;
                    t.persist_lat_sum_us += us;
                    t.persist_lat_max_us = t.persist_lat_max_us.max(us);
                }
            }
            Input::Timer(Timer::Election) => t.timer_election += 1,
            Input::Timer(Timer::Heartbeat) => t.timer_heartbeat += 1,
            // GC coordination's inputs: rare, and not part of the fit.
            Input::Timer(Timer::Gc)
            | Input::GcDue { .. }
            | Input::GcDone
            | Input::Start
            | Input::StorageAlarm { .. } => {}
        }
    }

    pub fn status(&mut self) {
        self.cur.status += 1;
    }

    pub fn output(&mut self, o: &Output) {
        let t = &mut self.cur;
        match o {
            Output::Send { to, msg } => {
                t.send[kind_index(msg)] += 1;
                let (n, b) = message_payload(msg);
                t.send_reqs += n;
                t.send_bytes += b;
                if *to < 64 {
                    self.peers |= 1 << to;
                }
            }
            Output::Reply { .. } => t.replies += 1,
            Output::Persist { token, records } => {
                // Bounded: a log thread that stopped stops the node.
                if self.persisting.len() < 1 << 20 {
                    self.persisting.push_back((*token, t.wall_start_ns));
                }
                t.persists += 1;
                t.persist_records += records.len() as u32;
                for r in records {
                    match r {
                        Record::Accept { value, .. } => {
                            for q in value.requests() {
                                t.persist_reqs += 1;
                                t.persist_bytes += op_bytes(&q.op);
                            }
                        }
                        Record::Snapshot { snapshot, .. } => {
                            t.persist_bytes += snapshot
                                .kv
                                .iter()
                                .map(|(k, v)| (k.len() + v.len()) as u64)
                                .sum::<u64>();
                        }
                        Record::Ballot(_) => {}
                    }
                }
            }
            Output::SetTimer { .. } => t.set_timers += 1,
            Output::Collect { .. } | Output::Trace(_) => {}
        }
    }

    /// The turn's outputs are acted on: closes its line (but for the
    /// collector's share, [`TurnMeter::gc`], which comes after).
    pub fn end(&mut self, replica: &Replica) {
        let le = replica.last_executed();
        for slot in Slot::between(self.last_executed + 1, le) {
            self.cur.executed_slots += 1;
            if let Some(inst) = replica.instance(slot) {
                for r in inst.value.requests() {
                    self.cur.executed_reqs += 1;
                    if !matches!(r.op, Op::Get { .. }) {
                        self.cur.executed_writes += 1;
                        self.cur.executed_write_bytes += op_bytes(&r.op);
                    }
                }
            }
        }
        let a = alloc_count::counts();
        let t = &mut self.cur;
        t.send_peers = self.peers.count_ones();
        t.cpu_end_ns = crate::thread_cpu::now_ns();
        t.wall_end_ns = self.epoch_ns + self.t0.elapsed().as_nanos() as u64;
        t.alloc_end = a.allocated;
        t.freed_end = a.freed;
        t.nalloc_end = a.allocations;
    }

    /// The collector model made the loop assist and pause after the turn.
    pub fn gc(&mut self, assist_us: u64, pause_us: u64) {
        self.cur.gc_assist_us += assist_us;
        self.cur.gc_pause_us += pause_us;
    }

    /// Files the finished turn (called before the next one starts).
    pub fn file(&mut self) {
        if self.cur.cpu_end_ns == 0 {
            return;
        }
        self.block.push(std::mem::take(&mut self.cur));
        if self.block.len() >= BLOCK {
            self.flush();
        }
    }

    /// Hands the block to the writer (at shutdown too). If the writer is
    /// behind, a fresh block is allocated rather than waiting.
    pub fn flush(&mut self) {
        let next = self
            .empty
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(BLOCK));
        let block = std::mem::replace(&mut self.block, next);
        let _ = self.full.send(block);
    }
}

fn writer(file: std::fs::File, full: Receiver<Vec<Turn>>, empty: Sender<Vec<Turn>>) {
    let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
    if writeln!(w, "{}", header()).is_err() {
        return;
    }
    while let Ok(mut block) = full.recv() {
        for t in &block {
            if t.write_csv(&mut w).is_err() {
                return;
            }
        }
        let _ = w.flush();
        block.clear();
        let _ = empty.send(block);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_has_one_value_per_column() {
        let mut line = Vec::new();
        let t = Turn {
            kind: 2,
            timer_heartbeat: 1,
            send: [0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            send_peers: 2,
            ..Turn::default()
        };
        t.write_csv(&mut line).unwrap();
        let line = String::from_utf8(line).unwrap();
        assert_eq!(
            line.trim_end().split(',').count(),
            header().split(',').count()
        );
        let h = header();
        let names: Vec<&str> = h.split(',').collect();
        let vals: Vec<&str> = line.trim_end().split(',').collect();
        let get = |n: &str| vals[names.iter().position(|x| *x == n).unwrap()];
        assert_eq!(get("kind"), "2");
        assert_eq!(get("timer_heartbeat"), "1");
        assert_eq!(get("send_Heartbeat"), "2");
        assert_eq!(get("send_peers"), "2");
    }

    #[test]
    fn payload_counts_keys_and_values_of_carried_requests() {
        use bytes::Bytes;
        use stutter_core::{Request, Value};
        let put = |k: &str, v: &str| {
            Request::new(
                1,
                1,
                Op::Put {
                    key: Bytes::from(k.to_string()),
                    value: Bytes::from(v.to_string()),
                },
            )
        };
        let get = Request::new(
            2,
            1,
            Op::Get {
                key: Bytes::from_static(b"key"),
            },
        );
        let m = Message::Accept {
            ballot: stutter_core::Ballot(1),
            slot: stutter_core::Slot(1),
            value: Value::Batch(std::sync::Arc::new(vec![put("ab", "cdef"), get])),
            committed: None,
        };
        assert_eq!(message_payload(&m), (2, 9));
        assert_eq!(
            message_payload(&Message::Heartbeat {
                ballot: stutter_core::Ballot(1),
                last_executed: stutter_core::Slot(0),
                global_last_executed: stutter_core::Slot(0)
            }),
            (0, 0)
        );
    }
}

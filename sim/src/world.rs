//! The discrete-event world: replicas (the unchanged protocol core), their
//! CPUs, disks and network links, the clients, and the fault schedule. One
//! thread, one event queue ordered by (time, sequence), one seeded RNG: the
//! same seed always produces the same run.

use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::io::Write;

use bytes::Bytes;
use stutter_core::{
    Action, ClientId, Config, DurableState, Input, Message, Op, Output, Record, Replica, ReplicaId,
    Reply, Request, Seq, Slot, Time, Timer, TraceEvent,
};

use crate::check::{Checker, Violation};
use crate::history::{HistOp, Outcome, F};
use crate::rng::{Rng, Zipf};
use crate::scenario::{Fault, Scenario, MS};

/// CPU time each kind of input costs a replica (µs of virtual time).
/// Rough figures for a small VM, to be calibrated from the real node: they
/// make load queue up, so that pauses and overload show in the tail.
pub mod service {
    use stutter_core::Time;
    pub const MESSAGE: Time = 15;
    pub const CLIENT_REQUEST: Time = 8;
    pub const TIMER: Time = 5;
    pub const PERSISTED: Time = 4;
    /// Extra per kilobyte of a message (serialization and copying).
    pub const PER_KB: Time = 2;
}

#[derive(Debug)]
enum Ev {
    Deliver { to: ReplicaId, from: ReplicaId, epoch: u64, msg: Message },
    Timer { r: ReplicaId, timer: Timer, inc: u64, at: Time },
    Disk { r: ReplicaId, token: u64, inc: u64 },
    CpuFree { r: ReplicaId, inc: u64 },
    Resume { r: ReplicaId, inc: u64 },
    Restart { r: ReplicaId },
    Fault(Fault),
    Uncut { links: Vec<(ReplicaId, ReplicaId)> },
    ClientTick { c: usize },
    ClientArrive { r: ReplicaId, req: Request },
    ClientReply { c: usize, seq: Seq, reply: Reply },
    ClientTimeout { c: usize, at: Time },
}

/// A queued event. The queue pops the earliest `(at, seq)`: time order, and
/// among equal times the order of scheduling, so runs are reproducible.
struct Scheduled {
    at: Time,
    seq: u64,
    ev: Box<Ev>,
}

impl PartialEq for Scheduled {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Scheduled {
    // Reversed: BinaryHeap is a max-heap.
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

struct Node {
    replica: Option<Replica>,
    /// Incarnation: bumped by a crash, so that events of the dead process
    /// (timers, disk completions, CPU) are ignored.
    inc: u64,
    paused: bool,
    busy: bool,
    inbox: VecDeque<Input>,
    unsynced: Vec<(u64, Vec<Record>)>,
    synced: Vec<Record>,
    disk_free_at: Time,
    /// Per timer kind (Election, Heartbeat): the deadline the core last set
    /// and the time of the one queue entry that stands for it. A timer the
    /// core re-arms on every message would otherwise leave thousands of
    /// stale entries in the queue; the core ignores early firings anyway
    /// (`Output::SetTimer` replaces the previous deadline).
    timer_deadline: [Time; 2],
    timer_queued: [Option<Time>; 2],
}

fn timer_index(t: Timer) -> usize {
    match t {
        Timer::Election => 0,
        Timer::Heartbeat => 1,
    }
}

#[derive(Default, Clone, Copy)]
struct Link {
    epoch: u64,
    last_arrival: Time,
    cuts: u32,
}

struct Client {
    id: ClientId,
    target: ReplicaId,
    seq: Seq,
    /// Index in the history of the operation in flight.
    current: Option<usize>,
    attempt: u32,
    /// Intended start times of operations not yet started (open loop).
    due: VecDeque<Time>,
    /// Intended start of the operation in flight.
    intended: Time,
    /// The pending timeout `(deadline, seq, attempt)` (the latest one set
    /// replaces the previous), and the time of its one queue entry.
    timeout: Option<(Time, Seq, u32)>,
    timeout_queued: Option<Time>,
}

#[derive(Default, Debug, Clone, serde::Serialize)]
pub struct FaultCounts {
    pub pauses: u64,
    pub pause_ms_total: u64,
    pub crashes: u64,
    pub partitions: u64,
    pub dropped_messages: u64,
    pub duplicated_messages: u64,
}

pub struct RunOutput {
    pub history: Vec<HistOp>,
    /// Virtual latency of every ok operation from its intended start (µs).
    pub latencies: Vec<Time>,
    pub faults: FaultCounts,
    pub violations: Vec<Violation>,
    pub trace_hash: u64,
    pub events: u64,
    pub end: Time,
    pub final_last_executed: Vec<Slot>,
}

pub struct World {
    s: Scenario,
    rng: Rng,
    now: Time,
    seq: u64,
    queue: BinaryHeap<Scheduled>,
    nodes: Vec<Node>,
    links: Vec<Link>,
    clients: Vec<Client>,
    history: Vec<HistOp>,
    latencies: Vec<Time>,
    /// `(client, seq)` ↦ history index.
    by_request: BTreeMap<(ClientId, Seq), usize>,
    next_value: u64,
    /// Values written per key, to make cas expectations plausible.
    written: BTreeMap<u64, Vec<u64>>,
    zipf: Zipf,
    stop_issuing: Time,
    end: Time,
    faults: FaultCounts,
    checker: Checker,
    trace_hash: u64,
    trace_out: Option<Box<dyn Write>>,
    events: u64,
    out: Vec<Output>,
}

/// FNV-1a as a `Hasher`: fixed, so trace hashes compare across runs,
/// builds and machines.
struct Fnv(u64);

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    // FNV-1a over 64-bit words rather than bytes (8x fewer multiplies):
    // fixed, platform-independent (little-endian words), not std's SipHash.
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
        for b in chunks.remainder() {
            self.write_u64(*b as u64);
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(i as u64);
    }
    fn write_u16(&mut self, i: u16) {
        self.write_u64(i as u64);
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(i as u64);
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
    fn write_u64(&mut self, i: u64) {
        self.0 ^= i;
        self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
    }
}

impl World {
    pub fn new(s: Scenario, seed: u64, trace_out: Option<Box<dyn Write>>) -> World {
        let mut rng = Rng::new(seed);
        let cfg = core_config(&s);
        let mut nodes = Vec::new();
        for id in 0..s.n {
            nodes.push(Node {
                replica: Some(Replica::new(id as ReplicaId, cfg.clone(), rng.fork())),
                inc: 0,
                paused: false,
                busy: false,
                inbox: VecDeque::from([Input::Start]),
                unsynced: Vec::new(),
                synced: Vec::new(),
                disk_free_at: 0,
                timer_deadline: [0; 2],
                timer_queued: [None; 2],
            });
        }
        let plan = s.plan(&mut rng);
        let heal = plan.iter().map(|(t, f)| t + fault_length(f)).max().unwrap_or(0);
        let stop_issuing = s.duration;
        let end = s.duration.max(heal) + s.liveness_bound;
        let clients = (0..s.workload.clients)
            .map(|c| Client {
                id: c as ClientId + 1,
                target: (c % s.n) as ReplicaId,
                seq: 0,
                current: None,
                attempt: 0,
                due: VecDeque::new(),
                intended: 0,
                timeout: None,
                timeout_queued: None,
            })
            .collect();
        let n = s.n;
        let zipf = Zipf::new(s.workload.keys, s.workload.zipf_theta);
        let mut w = World {
            checker: Checker::new(n),
            s,
            rng,
            now: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            nodes,
            links: vec![Link::default(); n * n],
            clients,
            history: Vec::new(),
            latencies: Vec::new(),
            by_request: BTreeMap::new(),
            next_value: 1,
            written: BTreeMap::new(),
            zipf,
            stop_issuing,
            end,
            faults: FaultCounts::default(),
            trace_hash: 0xcbf2_9ce4_8422_2325,
            trace_out,
            events: 0,
            out: Vec::new(),
        };
        for (t, f) in plan {
            w.at(t, Ev::Fault(f));
        }
        // Clients start once an election has had time to happen.
        for c in 0..w.clients.len() {
            let first = 500 * MS + w.next_interarrival();
            w.at(first, Ev::ClientTick { c });
        }
        for r in 0..n {
            w.kick(r as ReplicaId);
        }
        w
    }

    fn next_interarrival(&mut self) -> Time {
        let per_client = self.s.workload.rate / self.s.workload.clients.max(1) as f64;
        self.rng.exp(1e6 / per_client.max(1e-3)).max(1)
    }

    fn at(&mut self, t: Time, ev: Ev) {
        self.seq += 1;
        self.queue.push(Scheduled { at: t.max(self.now), seq: self.seq, ev: Box::new(ev) });
    }

    pub fn run(mut self) -> RunOutput {
        while let Some(Scheduled { at, ev, .. }) = self.queue.pop() {
            if at > self.end {
                break;
            }
            self.now = at;
            self.events += 1;
            self.step(*ev);
        }
        self.now = self.end;
        self.finish()
    }

    fn step(&mut self, ev: Ev) {
        match ev {
            Ev::Deliver { to, from, epoch, msg } => {
                let link = self.links[from as usize * self.s.n + to as usize];
                if link.epoch == epoch && link.cuts == 0 {
                    self.enqueue(to, Input::Message { from, msg });
                } else {
                    self.faults.dropped_messages += 1;
                }
            }
            Ev::Timer { r, timer, inc, at } => {
                let k = timer_index(timer);
                let node = &mut self.nodes[r as usize];
                if node.inc != inc || node.timer_queued[k] != Some(at) {
                    return; // superseded by an earlier entry, or a dead process's
                }
                node.timer_queued[k] = None;
                let deadline = node.timer_deadline[k];
                if deadline > self.now {
                    // Re-armed later since: one entry moves to the new deadline.
                    node.timer_queued[k] = Some(deadline);
                    self.at(deadline, Ev::Timer { r, timer, inc, at: deadline });
                } else {
                    self.enqueue(r, Input::Timer(timer));
                }
            }
            Ev::Disk { r, token, inc } => {
                let node = &mut self.nodes[r as usize];
                if node.inc != inc {
                    return;
                }
                let mut keep = Vec::new();
                for (t, recs) in node.unsynced.drain(..) {
                    if t <= token {
                        node.synced.extend(recs);
                    } else {
                        keep.push((t, recs));
                    }
                }
                node.unsynced = keep;
                self.enqueue(r, Input::Persisted { token });
            }
            Ev::CpuFree { r, inc } => {
                let node = &mut self.nodes[r as usize];
                if node.inc == inc {
                    node.busy = false;
                    self.kick(r);
                }
            }
            Ev::Resume { r, inc } => {
                let node = &mut self.nodes[r as usize];
                if node.inc == inc && node.paused {
                    node.paused = false;
                    // What queued up during the pause runs in a seeded order.
                    let mut items: Vec<Input> = node.inbox.drain(..).collect();
                    for i in (1..items.len()).rev() {
                        let j = (self.rng.u64() % (i as u64 + 1)) as usize;
                        items.swap(i, j);
                    }
                    self.nodes[r as usize].inbox = items.into();
                    self.kick(r);
                }
            }
            Ev::Restart { r } => self.restart(r),
            Ev::Fault(f) => self.fault(f),
            Ev::Uncut { links } => {
                for (a, b) in links {
                    let l = &mut self.links[a as usize * self.s.n + b as usize];
                    l.cuts = l.cuts.saturating_sub(1);
                }
            }
            Ev::ClientTick { c } => {
                if self.now < self.stop_issuing {
                    self.clients[c].due.push_back(self.now);
                    let next = self.now + self.next_interarrival();
                    self.at(next, Ev::ClientTick { c });
                    if self.clients[c].current.is_none() {
                        self.start_op(c);
                    }
                }
            }
            Ev::ClientArrive { r, req } => self.enqueue(r, Input::Request(req)),
            Ev::ClientReply { c, seq, reply } => self.client_reply(c, seq, reply),
            Ev::ClientTimeout { c, at } => {
                let cl = &mut self.clients[c];
                if cl.timeout_queued != Some(at) {
                    return;
                }
                cl.timeout_queued = None;
                let Some((deadline, seq, attempt)) = cl.timeout else { return };
                if deadline > self.now {
                    cl.timeout_queued = Some(deadline);
                    self.at(deadline, Ev::ClientTimeout { c, at: deadline });
                    return;
                }
                cl.timeout = None;
                if cl.current.is_some() && cl.seq == seq && cl.attempt == attempt {
                    let next = ((cl.target as usize + 1) % self.s.n) as ReplicaId;
                    self.clients[c].target = next;
                    self.send_current(c);
                }
            }
        }
    }

    // ----- replicas -----

    fn enqueue(&mut self, r: ReplicaId, input: Input) {
        let node = &mut self.nodes[r as usize];
        if node.replica.is_none() {
            return;
        }
        node.inbox.push_back(input);
        self.kick(r);
    }

    /// Runs the next queued input if the replica is up, idle and not paused.
    fn kick(&mut self, r: ReplicaId) {
        let node = &mut self.nodes[r as usize];
        if node.busy || node.paused || node.replica.is_none() {
            return;
        }
        let Some(input) = node.inbox.pop_front() else { return };
        let cost = match &input {
            Input::Message { msg, .. } => service::MESSAGE + message_kb(msg) * service::PER_KB,
            Input::Request(_) => service::CLIENT_REQUEST,
            Input::Timer(_) | Input::Start => service::TIMER,
            Input::Persisted { .. } => service::PERSISTED,
        };
        node.busy = true;
        let inc = node.inc;
        let mut out = std::mem::take(&mut self.out);
        if let Some(rep) = node.replica.as_mut() {
            rep.handle(self.now, input, &mut out);
        }
        self.outputs(r, &mut out);
        self.out = out;
        if let Some(rep) = self.nodes[r as usize].replica.as_ref() {
            self.checker.after_step(r, rep);
        }
        self.at(self.now + cost, Ev::CpuFree { r, inc });
    }

    fn outputs(&mut self, r: ReplicaId, out: &mut Vec<Output>) {
        for o in out.drain(..) {
            match o {
                Output::Send { to, msg } => self.send(r, to, msg),
                Output::SetTimer { timer, at } => {
                    let k = timer_index(timer);
                    let node = &mut self.nodes[r as usize];
                    let inc = node.inc;
                    node.timer_deadline[k] = at;
                    let at = at.max(self.now);
                    if node.timer_queued[k].is_none_or(|q| q > at) {
                        node.timer_queued[k] = Some(at);
                        self.at(at, Ev::Timer { r, timer, inc, at });
                    }
                }
                Output::Persist { token, records } => {
                    let lat = self.rng.range(self.s.disk_min, self.s.disk_max);
                    let node = &mut self.nodes[r as usize];
                    node.unsynced.push((token, records));
                    // One disk per replica: completions in order.
                    let done = (self.now + lat).max(node.disk_free_at);
                    node.disk_free_at = done;
                    let inc = node.inc;
                    self.at(done, Ev::Disk { r, token, inc });
                }
                Output::Reply { client, seq, reply } => {
                    let c = (client - 1) as usize;
                    if c < self.clients.len() {
                        let d = self.client_delay();
                        self.at(self.now + d, Ev::ClientReply { c, seq, reply });
                    }
                }
                Output::Trace(ev) => self.trace(ev),
            }
        }
    }

    fn trace(&mut self, ev: TraceEvent) {
        if let Action::Execute { slot, value } = &ev.action {
            self.checker.executed(ev.replica, *slot, value.clone());
        }
        // The trace hash covers every field of every event, through `Hash`
        // into a fixed-key FNV hasher: no JSON on the hot path.
        let mut h = Fnv(self.trace_hash);
        std::hash::Hash::hash(&ev, &mut h);
        self.trace_hash = h.0;
        if let Some(w) = self.trace_out.as_mut() {
            if let Ok(line) = serde_json::to_vec(&ev) {
                let _ = w.write_all(&line);
                let _ = w.write_all(b"\n");
            }
        }
    }

    fn send(&mut self, from: ReplicaId, to: ReplicaId, msg: Message) {
        let n = self.s.n;
        if to as usize >= n {
            return;
        }
        let idx = from as usize * n + to as usize;
        if self.links[idx].cuts > 0 || self.rng.chance(self.s.loss) {
            self.faults.dropped_messages += 1;
            return;
        }
        let delay = self.s.net_delay_min + self.rng.exp(self.s.net_delay_mean_extra);
        let link = &mut self.links[idx];
        let arrival = (self.now + delay).max(link.last_arrival);
        link.last_arrival = arrival;
        let epoch = link.epoch;
        if self.rng.chance(self.s.duplication) {
            self.faults.duplicated_messages += 1;
            let later = arrival + self.rng.range(1, 2 * MS);
            self.at(later, Ev::Deliver { to, from, epoch, msg: msg.clone() });
        }
        self.at(arrival, Ev::Deliver { to, from, epoch, msg });
    }

    fn fault(&mut self, f: Fault) {
        match f {
            Fault::Pause { replica, duration } => {
                let node = &mut self.nodes[replica as usize];
                if node.replica.is_none() || node.paused {
                    return;
                }
                node.paused = true;
                let inc = node.inc;
                self.faults.pauses += 1;
                self.faults.pause_ms_total += duration / MS;
                self.at(self.now + duration, Ev::Resume { r: replica, inc });
            }
            Fault::Crash { replica, down_for } => {
                let node = &mut self.nodes[replica as usize];
                if node.replica.is_none() {
                    return;
                }
                node.replica = None;
                node.inc += 1;
                node.timer_deadline = [0; 2];
                node.timer_queued = [None; 2];
                node.paused = false;
                node.busy = false;
                node.inbox.clear();
                node.unsynced.clear();
                self.faults.crashes += 1;
                // Connections of the dead process break: in-flight messages are lost.
                let n = self.s.n;
                for other in 0..n {
                    self.links[replica as usize * n + other].epoch += 1;
                    self.links[other * n + replica as usize].epoch += 1;
                }
                let durable = self.durable(replica);
                self.checker.crashed(replica, durable.ballot);
                self.at(self.now + down_for, Ev::Restart { r: replica });
            }
            Fault::Isolate { replica, one_way, duration } => {
                let mut links = Vec::new();
                for other in 0..self.s.n as ReplicaId {
                    if other != replica {
                        links.push((replica, other));
                        if !one_way {
                            links.push((other, replica));
                        }
                    }
                }
                self.cut(links, duration);
            }
            Fault::CutLink { a, b, duration } => self.cut(vec![(a, b), (b, a)], duration),
        }
    }

    fn cut(&mut self, links: Vec<(ReplicaId, ReplicaId)>, duration: Time) {
        let n = self.s.n;
        for (a, b) in &links {
            if (*a as usize) < n && (*b as usize) < n {
                self.links[*a as usize * n + *b as usize].cuts += 1;
            }
        }
        self.faults.partitions += 1;
        self.at(self.now + duration, Ev::Uncut { links });
    }

    fn durable(&self, r: ReplicaId) -> DurableState {
        let mut d = DurableState::default();
        for rec in self.nodes[r as usize].synced.iter().cloned() {
            d.apply(rec);
        }
        d
    }

    fn restart(&mut self, r: ReplicaId) {
        if self.nodes[r as usize].replica.is_some() {
            return;
        }
        let durable = self.durable(r);
        let cfg = core_config(&self.s);
        let rep = Replica::recover(r, cfg, durable, self.rng.fork());
        let node = &mut self.nodes[r as usize];
        node.replica = Some(rep);
        node.inbox.push_back(Input::Start);
        node.disk_free_at = self.now;
        self.kick(r);
    }

    // ----- clients -----

    fn client_delay(&mut self) -> Time {
        self.s.net_delay_min + self.rng.exp(self.s.net_delay_mean_extra)
    }

    fn start_op(&mut self, c: usize) {
        if self.now >= self.stop_issuing {
            // Operations not started by then are never issued, so that every
            // issued one has the liveness bound to complete after healing.
            self.clients[c].due.clear();
            return;
        }
        let Some(intended) = self.clients[c].due.pop_front() else { return };
        let w = self.s.workload.clone();
        let key = self.zipf.sample(&mut self.rng);
        let x = self.rng.f64();
        let (f, value, from) = if x < w.read_fraction {
            (F::Read, 0, 0)
        } else if x < w.read_fraction + w.cas_fraction {
            let seen = self.written.get(&key).cloned().unwrap_or_default();
            let from = if seen.is_empty() || self.rng.chance(0.2) {
                0
            } else {
                seen[seen.len() - 1 - (self.rng.u64() % seen.len().min(3) as u64) as usize]
            };
            let v = self.next_value;
            self.next_value += 1;
            (F::Cas, v, from)
        } else {
            let v = self.next_value;
            self.next_value += 1;
            self.written.entry(key).or_default().push(v);
            (F::Write, v, 0)
        };
        let cl = &mut self.clients[c];
        cl.seq += 1;
        cl.attempt = 0;
        cl.intended = intended;
        let idx = self.history.len();
        cl.current = Some(idx);
        self.by_request.insert((cl.id, cl.seq), idx);
        self.history.push(HistOp {
            client: cl.id,
            seq: cl.seq,
            f,
            key,
            value,
            from,
            invoke: self.now,
            complete: None,
            outcome: Outcome::Pending,
        });
        self.send_current(c);
    }

    fn request_of(&self, op: &HistOp) -> Request {
        let k = Bytes::from(format!("k{}", op.key));
        let v = |x: u64| Bytes::from(x.to_string());
        let op_ = match op.f {
            F::Read => Op::Get { key: k },
            F::Write => Op::Put { key: k, value: v(op.value) },
            F::Cas => Op::Cas { key: k, from: (op.from != 0).then(|| v(op.from)), to: v(op.value) },
        };
        Request { client: op.client, seq: op.seq, op: op_ }
    }

    fn send_current(&mut self, c: usize) {
        let Some(idx) = self.clients[c].current else { return };
        let req = self.request_of(&self.history[idx]);
        let cl = &mut self.clients[c];
        cl.attempt += 1;
        let (r, seq, attempt) = (cl.target, cl.seq, cl.attempt);
        let d = self.client_delay();
        self.at(self.now + d, Ev::ClientArrive { r, req });
        self.set_client_timeout(c, self.now + self.s.client_timeout, seq, attempt);
    }

    /// One queue entry per client stands for its latest timeout (thousands
    /// of superseded timeouts would otherwise sit in the event heap).
    fn set_client_timeout(&mut self, c: usize, deadline: Time, seq: Seq, attempt: u32) {
        let cl = &mut self.clients[c];
        cl.timeout = Some((deadline, seq, attempt));
        if cl.timeout_queued.is_none_or(|q| q > deadline) {
            cl.timeout_queued = Some(deadline);
            self.at(deadline, Ev::ClientTimeout { c, at: deadline });
        }
    }

    fn client_reply(&mut self, c: usize, seq: Seq, reply: Reply) {
        let cl = &self.clients[c];
        let Some(idx) = cl.current else { return };
        if cl.seq != seq {
            return;
        }
        match reply {
            Reply::Redirect { leader: Some(l) } if (l as usize) < self.s.n => {
                self.clients[c].target = l;
                self.send_current(c);
            }
            Reply::Redirect { .. } | Reply::Busy => {
                // No leader known: try another replica a little later.
                let t = self.rng.range(0, self.s.n as u64 - 1) as ReplicaId;
                self.clients[c].target = t;
                let attempt = self.clients[c].attempt;
                self.set_client_timeout(c, self.now + 20 * MS, seq, attempt);
            }
            Reply::Stale => self.complete(c, idx, Outcome::Fail("stale".into())),
            Reply::Value(v) => {
                let value = v.and_then(|b| std::str::from_utf8(&b).ok().and_then(|s| s.parse().ok())).unwrap_or(0);
                self.complete(c, idx, Outcome::Ok { value, cas_ok: false });
            }
            Reply::Done => {
                let value = self.history[idx].value;
                self.complete(c, idx, Outcome::Ok { value, cas_ok: false });
            }
            Reply::Cas { ok, .. } => {
                if ok {
                    let (key, v) = (self.history[idx].key, self.history[idx].value);
                    self.written.entry(key).or_default().push(v);
                }
                self.complete(c, idx, Outcome::Ok { value: 0, cas_ok: ok });
            }
        }
    }

    fn complete(&mut self, c: usize, idx: usize, outcome: Outcome) {
        let op = &mut self.history[idx];
        op.complete = Some(self.now);
        op.outcome = outcome;
        if op.is_ok() {
            self.latencies.push(self.now - self.clients[c].intended);
        }
        self.clients[c].current = None;
        if !self.clients[c].due.is_empty() {
            self.start_op(c);
        }
    }

    fn finish(mut self) -> RunOutput {
        let finals: Vec<(ReplicaId, Slot, u64)> = self
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.replica.as_ref().map(|r| (i as ReplicaId, r.last_executed(), r.executed_digest())))
            .collect();
        let states: Vec<(ReplicaId, Slot, BTreeMap<Bytes, Bytes>)> = self
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.replica.as_ref().map(|r| (i as ReplicaId, r.last_executed(), r.state_machine().kv.clone())))
            .collect();
        let requests: BTreeMap<(ClientId, Seq), Request> =
            self.history.iter().map(|op| ((op.client, op.seq), self.request_of(op))).collect();
        let violations = self.checker.finish(&self.history, &requests, &finals, &states);
        let _ = self.trace_out.as_mut().map(|w| w.flush());
        RunOutput {
            history: self.history,
            latencies: self.latencies,
            faults: self.faults,
            violations,
            trace_hash: self.trace_hash,
            events: self.events,
            end: self.end,
            final_last_executed: finals.iter().map(|f| f.1).collect(),
        }
    }
}

fn message_kb(msg: &Message) -> Time {
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

fn fault_length(f: &Fault) -> Time {
    match f {
        Fault::Pause { duration, .. } | Fault::Isolate { duration, .. } | Fault::CutLink { duration, .. } => *duration,
        Fault::Crash { down_for, .. } => *down_for,
    }
}

pub fn core_config(s: &Scenario) -> Config {
    Config {
        n: s.n,
        heartbeat_interval: 20 * MS,
        election_timeout: 150 * MS,
        election_jitter: 150 * MS,
        window: 8,
        max_batch: 16,
        max_pending: 10_000,
        trim_every: s.trim_every,
        trim_bytes: 0,
        trim_grace: 500 * MS,
        catchup_max: 64,
        trace: true,
        check_invariants: true,
        injected_bug: s.bug,
    }
}

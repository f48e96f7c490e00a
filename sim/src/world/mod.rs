//! The discrete-event world: it owns the event queue, the one seeded RNG,
//! and the simulated components — replica processes (`node`: the unchanged
//! protocol core with its processor, disk, heap and timers), the network,
//! the clients and the fault schedule — and moves events between them.
//! The same seed always produces the same run.

use std::io::Write;

use stutter_core::{
    Action, Config, Input, Message, Output, Record, Replica, ReplicaId, Reply, Request, Seq, Slot,
    Time, Timer, TraceEvent,
};

use crate::check::{Checker, Violation};
use crate::clients::{ClientEvent, Clients};
use crate::cpu::Cpu;
use crate::faults::FaultCounts;
use crate::history::HistOp;
use crate::network::{Network, Sent};
use crate::node::{timer_index, Node};
use crate::queue::Queue;
use crate::rng::Rng;
use crate::scenario::{Fault, Scenario, MS, SEC};
use crate::trace_hash::TraceHash;
use crate::windows::Armed;

mod collector;
mod host;

#[derive(Debug)]
pub(crate) enum Ev {
    Deliver {
        to: ReplicaId,
        from: ReplicaId,
        epoch: u64,
        msg: Message,
    },
    Timer {
        r: ReplicaId,
        timer: Timer,
        inc: u64,
        at: Time,
    },
    Disk {
        r: ReplicaId,
        token: u64,
        inc: u64,
    },
    CpuFree {
        r: ReplicaId,
        inc: u64,
    },
    Resume {
        r: ReplicaId,
        inc: u64,
    },
    Restart {
        r: ReplicaId,
    },
    Fault(Fault),
    Uncut {
        links: Vec<(ReplicaId, ReplicaId)>,
    },
    /// A slowdown of one link ends.
    Unslow {
        from: ReplicaId,
        to: ReplicaId,
        extra: Time,
    },
    ClientTick {
        c: usize,
    },
    /// History operation `op`'s request reaches replica `r`, flagged a
    /// retry or not.
    ClientArrive {
        r: ReplicaId,
        op: usize,
        retry: bool,
    },
    /// A client's `Register` under `nonce` reaches replica `r`.
    ClientRegister {
        r: ReplicaId,
        nonce: stutter_core::ClientId,
        retry: bool,
    },
    ClientReply {
        c: usize,
        client: stutter_core::ClientId,
        seq: Seq,
        reply: Reply,
    },
    ClientTimeout {
        c: usize,
        at: Time,
    },
    /// A collector's concurrent work may have changed its state.
    GcWake {
        r: ReplicaId,
        inc: u64,
        at: Time,
    },
    /// A collection the protocol granted is over.
    GcFinished {
        r: ReplicaId,
        inc: u64,
    },
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
    /// Each running replica's collector at the end (empty without a model).
    pub gc: Vec<(ReplicaId, stutter_gc::Stats)>,
    /// Elections won (`BecomeLeader` steps): the first leader, then one per
    /// leader change.
    pub elections: u64,
    /// With GC coordination on: its steps in time order, for the study's
    /// account of where the tail comes from (`study::split`).
    pub gc_log: Vec<GcStep>,
}

/// One step of GC coordination at one replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GcStep {
    pub at: Time,
    pub replica: ReplicaId,
    pub mark: GcMark,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GcMark {
    /// The collector said a collection is due.
    Due,
    /// The leader stopped proposing to hand leadership off.
    HandOffStart,
    /// It told `to` to campaign and stepped down.
    HandOff { to: ReplicaId },
    /// Won an election.
    Elected,
    /// Started a collection, under a grant or forced.
    Collect { granted: bool },
    /// Its collection ended.
    Done,
}

pub struct World {
    pub(crate) s: Scenario,
    pub(crate) rng: Rng,
    pub(crate) now: Time,
    queue: Queue<Ev>,
    pub(crate) nodes: Vec<Node>,
    pub(crate) net: Network,
    clients: Clients,
    end: Time,
    pub(crate) faults: FaultCounts,
    pub(crate) checker: Checker,
    hash: TraceHash,
    trace_out: Option<Box<dyn Write>>,
    events: u64,
    out: Vec<Output>,
    client_events: Vec<ClientEvent>,
    gc_events: Vec<stutter_gc::Event>,
    /// Faults waiting for their window (`windows.rs`).
    pub(crate) armed: Vec<Armed>,
    elections: u64,
    gc_log: Vec<GcStep>,
    /// Which replicas were handing leadership off after their last step.
    handing_off: Vec<bool>,
    /// On a shared host: until when each replica's collector stops the
    /// world (its GC threads want every core it has).
    gc_until: Vec<Time>,
}

impl World {
    pub fn new(s: Scenario, seed: u64, trace_out: Option<Box<dyn Write>>) -> World {
        let mut rng = Rng::new(seed);
        let cfg = core_config(&s);
        let nodes: Vec<Node> = (0..s.n)
            .map(|id| {
                Node::new(
                    Replica::new(id as ReplicaId, cfg.clone(), rng.fork()),
                    s.cores,
                )
            })
            .collect();
        let plan = s.plan(&mut rng);
        let heal = plan
            .iter()
            .map(|(t, f)| f.healed_by(*t, s.fault_end))
            .max()
            .unwrap_or(0);
        let end = s.duration.max(heal) + s.liveness_bound;
        let n = s.n;
        let mut w = World {
            checker: Checker::new(
                n,
                stutter_core::sessions::Bounds {
                    sessions: s.session_limit,
                    tombstones: s.session_tombstones,
                },
                s.bug != Some(stutter_core::Bug::IgnoreRetryFlag),
            )
            .registered_expiry(s.bug != Some(stutter_core::Bug::RegisteredNoExpiry)),
            net: Network::new(&s),
            clients: Clients::new(&s),
            s,
            rng,
            now: 0,
            queue: Queue::default(),
            nodes,
            end,
            faults: FaultCounts::default(),
            hash: TraceHash::default(),
            trace_out,
            events: 0,
            out: Vec::new(),
            client_events: Vec::new(),
            gc_events: Vec::new(),
            armed: Vec::new(),
            elections: 0,
            gc_log: Vec::new(),
            handing_off: vec![false; n],
            gc_until: vec![0; n],
        };
        for (t, f) in plan {
            w.at(t, Ev::Fault(f));
        }
        let mut evs = std::mem::take(&mut w.client_events);
        w.clients.start(&mut w.rng, &mut evs);
        w.schedule_clients(evs);
        for r in 0..n {
            w.start_heap(r as ReplicaId);
        }
        for r in 0..n {
            w.kick(r as ReplicaId);
        }
        w
    }

    pub(crate) fn at(&mut self, t: Time, ev: Ev) {
        self.queue.push(self.now, t, ev);
    }

    pub fn run(mut self) -> RunOutput {
        while let Some((at, ev)) = self.queue.pop() {
            if at > self.end {
                break;
            }
            self.now = at;
            self.events += 1;
            self.step(ev);
        }
        self.now = self.end;
        // Free-ups kept out of the queue count as the events they stand for.
        let end = self.end;
        self.events += self
            .nodes
            .iter()
            .flat_map(|n| &n.cpu.free_later)
            .filter(|(at, _)| *at <= end)
            .count() as u64;
        self.finish()
    }

    fn step(&mut self, ev: Ev) {
        match ev {
            Ev::Deliver {
                to,
                from,
                epoch,
                msg,
            } => {
                if self.net.deliverable(from, to, epoch) {
                    self.enqueue(to, Input::Message { from, msg });
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
                    self.at(
                        deadline,
                        Ev::Timer {
                            r,
                            timer,
                            inc,
                            at: deadline,
                        },
                    );
                } else {
                    self.enqueue(r, Input::Timer(timer));
                }
            }
            Ev::Disk { r, token, inc } => {
                let node = &mut self.nodes[r as usize];
                if node.inc != inc {
                    return;
                }
                node.disk.synced(token);
                self.enqueue(r, Input::Persisted { token });
            }
            Ev::CpuFree { r, inc } => {
                let node = &mut self.nodes[r as usize];
                if node.inc == inc {
                    let (_, speed) = node.cpu.slots(node.mutator_cores());
                    let busy = node.cpu.busy_cores(speed);
                    if let Some(h) = node.heap.as_mut() {
                        h.advance(self.now, busy);
                    }
                    node.cpu.busy = node.cpu.busy.saturating_sub(1);
                    self.kick(r);
                }
            }
            Ev::Resume { r, inc } => {
                let node = &mut self.nodes[r as usize];
                if node.inc == inc && node.paused && self.now >= node.pause_until {
                    node.paused = false;
                    // What queued up during the pause runs in a seeded order
                    // (shuffled in place: the inbox keeps its capacity).
                    let items = node.cpu.inbox.make_contiguous();
                    for i in (1..items.len()).rev() {
                        let j = (self.rng.u64() % (i as u64 + 1)) as usize;
                        items.swap(i, j);
                    }
                    self.kick(r);
                }
            }
            Ev::Restart { r } => self.restart(r),
            Ev::Fault(f) => self.fault(f),
            Ev::Uncut { links } => self.net.heal(&links),
            Ev::Unslow { from, to, extra } => self.net.unslow(from, to, extra),
            Ev::ClientTick { c } => {
                let mut evs = std::mem::take(&mut self.client_events);
                self.clients.tick(c, self.now, &mut self.rng, &mut evs);
                self.schedule_clients(evs);
            }
            Ev::ClientArrive { r, op, retry } => {
                if let Some(req) = self.clients.requests.get(op) {
                    let req = Request {
                        retry,
                        ..req.clone()
                    };
                    self.enqueue(r, Input::Request(req));
                }
            }
            Ev::ClientRegister { r, nonce, retry } => {
                self.enqueue(r, Input::Request(Request::register(nonce, retry)))
            }
            Ev::ClientReply {
                c,
                client,
                seq,
                reply,
            } => {
                let mut evs = std::mem::take(&mut self.client_events);
                self.clients
                    .reply(c, (client, seq), reply, self.now, &mut self.rng, &mut evs);
                self.schedule_clients(evs);
            }
            Ev::ClientTimeout { c, at } => {
                let mut evs = std::mem::take(&mut self.client_events);
                self.clients
                    .timeout(c, at, self.now, &mut self.rng, &mut evs);
                self.schedule_clients(evs);
            }
            Ev::GcWake { r, inc, at } => {
                let node = &mut self.nodes[r as usize];
                let (_, speed) = node.cpu.slots(node.mutator_cores());
                let busy = node.cpu.busy_cores(speed);
                let Some(h) = node.heap.as_mut() else { return };
                if node.inc != inc || h.wake_queued != Some(at) {
                    return;
                }
                h.wake_queued = None;
                h.advance(self.now, busy);
                self.collect(r);
                self.kick(r);
            }
            Ev::GcFinished { r, inc } => {
                if self.nodes[r as usize].inc == inc {
                    self.enqueue(r, Input::GcDone);
                }
            }
        }
    }

    fn schedule_clients(&mut self, mut evs: Vec<ClientEvent>) {
        for e in evs.drain(..) {
            match e {
                ClientEvent::Tick { c, at } => self.at(at, Ev::ClientTick { c }),
                ClientEvent::Arrive { r, op, retry, at } => {
                    self.at(at, Ev::ClientArrive { r, op, retry })
                }
                ClientEvent::Timeout { c, at } => self.at(at, Ev::ClientTimeout { c, at }),
                ClientEvent::Register {
                    r,
                    nonce,
                    retry,
                    at,
                } => self.at(at, Ev::ClientRegister { r, nonce, retry }),
            }
        }
        self.client_events = evs;
    }

    // ----- replicas -----

    fn enqueue(&mut self, r: ReplicaId, input: Input) {
        let node = &mut self.nodes[r as usize];
        if node.replica.is_none() {
            return;
        }
        node.cpu.inbox.push_back(input);
        self.kick(r);
    }

    /// Starts queued inputs on free cores while the replica is up and not
    /// stopped.
    ///
    /// Every input started holds a core until a `CpuFree` event. Without a
    /// heap model, such an event changes nothing but the count of busy
    /// cores unless an input waits for the core then; and inputs only
    /// come in through here. So a core's free-up stays out of the queue
    /// (`Cpu::free_later`, with its sequence number reserved) while the
    /// inbox is empty: the next kick counts the core free if its time has
    /// passed, and an input left waiting puts the free-ups in the queue,
    /// each at the place it would have had. In `sim bench`'s runs two
    /// thirds of the free-ups (30 % of all events) never enter the queue,
    /// and the run is the same, event for event.
    fn kick(&mut self, r: ReplicaId) {
        self.retire_frees(r);
        self.start_inputs(r);
        let node = &mut self.nodes[r as usize];
        if !node.cpu.inbox.is_empty() && !node.cpu.free_later.is_empty() {
            let inc = node.inc;
            for (at, seq) in node.cpu.free_later.drain(..) {
                self.queue.push_reserved(at, seq, Ev::CpuFree { r, inc });
            }
        }
    }

    /// Counts the cores free whose free-up, kept out of the queue, would
    /// have run before the current event.
    fn retire_frees(&mut self, r: ReplicaId) {
        let current = self.queue.current();
        let cpu = &mut self.nodes[r as usize].cpu;
        if cpu.free_later.is_empty() {
            return;
        }
        let before = cpu.free_later.len();
        cpu.free_later.retain(|k| *k > current);
        let done = (before - cpu.free_later.len()) as u32;
        cpu.busy = cpu.busy.saturating_sub(done);
        self.events += done as u64;
    }

    /// The process `r` dies: the free-ups it kept out of the queue are
    /// dropped, counted as the (ignored) events they would have been.
    pub(crate) fn forget_frees(&mut self, r: ReplicaId) {
        let end = self.end;
        let cpu = &mut self.nodes[r as usize].cpu;
        self.events += cpu.free_later.iter().filter(|(at, _)| *at <= end).count() as u64;
        cpu.free_later.clear();
    }

    fn start_inputs(&mut self, r: ReplicaId) {
        loop {
            let now = self.now;
            let value_size = self.s.workload.value_size;
            let node = &mut self.nodes[r as usize];
            if node.paused || node.replica.is_none() {
                return;
            }
            let (slots, speed) = node.cpu.slots(node.mutator_cores());
            if node.cpu.busy >= slots {
                return;
            }
            let speed = speed * self.host_share(r);
            let node = &mut self.nodes[r as usize];
            let Some(input) = node.cpu.inbox.pop_front() else {
                return;
            };
            let turn_starts = node.cpu.turn_starts();
            let pending = self.s.service.begin(&input, value_size, turn_starts);
            let input_bytes = match (&node.heap, &node.replica) {
                (Some(_), Some(rep)) => {
                    let leader = rep.role() == stutter_core::Role::Leader;
                    self.s.memory.input_bytes(&input, value_size, leader)
                }
                _ => 0,
            };
            let busy = node.cpu.busy_cores(speed);
            if let Some(h) = node.heap.as_mut() {
                h.advance(now, busy);
            }
            node.cpu.busy += 1;
            let inc = node.inc;
            let mut out = std::mem::take(&mut self.out);
            if let Some(rep) = node.replica.as_mut() {
                rep.handle(now, input, &mut out);
                if self.s.memory.coordinated {
                    let h = rep.handing_off();
                    if let Some(was) = self.handing_off.get_mut(r as usize) {
                        if h && !*was {
                            self.gc_log.push(GcStep {
                                at: now,
                                replica: r,
                                mark: GcMark::HandOffStart,
                            });
                        }
                        *was = h;
                    }
                }
            }
            let cost = self.s.service.end(pending, &out, value_size);
            let step_bytes = if self.nodes[r as usize].heap.is_some() {
                input_bytes + self.s.memory.output_bytes(&out)
            } else {
                0
            };
            self.outputs(r, &mut out);
            self.out = out;
            if let Some(rep) = self.nodes[r as usize].replica.as_ref() {
                self.checker.after_step(r, rep);
            }
            let assist = self.heap_after_step(r, step_bytes);
            let node = &mut self.nodes[r as usize];
            let cost = node.cpu.whole(cost);
            let free_at = now + Cpu::duration(cost, assist, speed);
            if node.heap.is_some() {
                self.at(free_at, Ev::CpuFree { r, inc });
                self.collect(r);
            } else {
                let seq = self.queue.reserve();
                node.cpu.free_later.push((free_at, seq));
            }
        }
    }

    /// Stops replica `r` for `duration`. A pause fault on a stopped
    /// replica is ignored; a collector's pause waits for the stop it falls
    /// into to end (the process cannot collect while it is stopped).
    /// Returns whether the replica was stopped.
    pub(crate) fn stop(&mut self, r: ReplicaId, duration: Time, by_collector: bool) -> bool {
        let now = self.now;
        let node = &mut self.nodes[r as usize];
        if node.replica.is_none() {
            return false;
        }
        if node.paused {
            if !by_collector {
                return false;
            }
            node.pause_until = node.pause_until.max(now) + duration;
        } else {
            node.paused = true;
            node.pause_until = now + duration;
        }
        let (inc, until) = (node.inc, node.pause_until);
        self.at(until, Ev::Resume { r, inc });
        true
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
                    let lat = self.s.disk_latency(&mut self.rng);
                    let ballot = !self.armed.is_empty()
                        && records.iter().any(|rec| matches!(rec, Record::Ballot(_)));
                    let pending = if ballot { records.clone() } else { Vec::new() };
                    let node = &mut self.nodes[r as usize];
                    let done = node.disk.append(self.now, lat, token, records);
                    let inc = node.inc;
                    self.at(done, Ev::Disk { r, token, inc });
                    if ballot {
                        self.on_persist(r, &pending, done);
                    }
                }
                Output::Reply { client, seq, reply } => {
                    if let Some(c) = self.clients.index(client) {
                        let d = self.net.delay(&mut self.rng);
                        self.at(
                            self.now + d,
                            Ev::ClientReply {
                                c,
                                client,
                                seq,
                                reply,
                            },
                        );
                    }
                }
                Output::Collect { .. } => self.collect_granted(r),
                Output::Trace(ev) => self.trace(ev),
            }
        }
    }

    fn trace(&mut self, ev: TraceEvent) {
        if self.s.memory.is_on() {
            self.trace_memory(&ev);
        }
        if self.s.memory.coordinated {
            let mark = match ev.action {
                Action::GcDue { .. } => Some(GcMark::Due),
                Action::TransferLeadership { to, .. } | Action::TransferWithPromise { to, .. } => {
                    Some(GcMark::HandOff { to })
                }
                Action::BecomeLeader { .. } => Some(GcMark::Elected),
                Action::Collect { granted } => Some(GcMark::Collect { granted }),
                Action::GcDone => Some(GcMark::Done),
                _ => None,
            };
            if let Some(mark) = mark {
                self.gc_log.push(GcStep {
                    at: ev.time,
                    replica: ev.replica,
                    mark,
                });
            }
        }
        if !self.armed.is_empty() {
            match ev.action {
                Action::BecomeLeader { .. } => self.on_elected(ev.replica),
                Action::StartElection { .. } => self.on_election_started(ev.replica),
                _ => {}
            }
        }
        self.hash.add(&ev);
        if let Some(w) = self.trace_out.as_mut() {
            if let Ok(line) = serde_json::to_vec(&ev) {
                let _ = w.write_all(&line);
                let _ = w.write_all(b"\n");
            }
        }
        // A replica whose state came from elsewhere than its own execution:
        // its session table is judged against the log (at the state after
        // the step, which is consistent with itself).
        let taken = match &ev.action {
            Action::InstallSnapshot { .. } => Some("after installing a snapshot"),
            Action::BecomeLeader {
                snapshot_from: Some(_),
                ..
            } => Some("after installing a promised snapshot"),
            Action::Recover { .. } => Some("after a restart"),
            _ => None,
        };
        if let Some(when) = taken {
            if let Some(rep) = self
                .nodes
                .get(ev.replica as usize)
                .and_then(|n| n.replica.as_ref())
            {
                self.checker
                    .state_taken(ev.replica, when, rep.state_machine());
            }
        }
        if matches!(ev.action, Action::BecomeLeader { .. }) {
            self.elections += 1;
        }
        // Last, so that the executed value moves into the checker.
        if let Action::Execute { slot, value, .. } = ev.action {
            self.checker.executed(ev.replica, slot, value);
        }
    }

    fn send(&mut self, from: ReplicaId, to: ReplicaId, msg: Message) {
        if to as usize >= self.s.n {
            return;
        }
        if let Sent::Delivered {
            arrival,
            epoch,
            duplicate,
        } = self.net.send(&mut self.rng, self.now, from, to)
        {
            if let Some(later) = duplicate {
                self.at(
                    later,
                    Ev::Deliver {
                        to,
                        from,
                        epoch,
                        msg: msg.clone(),
                    },
                );
            }
            self.at(
                arrival,
                Ev::Deliver {
                    to,
                    from,
                    epoch,
                    msg,
                },
            );
        }
    }

    pub(crate) fn restart(&mut self, r: ReplicaId) {
        if self.nodes[r as usize].replica.is_some() {
            return;
        }
        let durable = self.nodes[r as usize].disk.durable();
        let cfg = core_config(&self.s);
        let rep = Replica::recover(r, cfg, durable, self.rng.fork());
        let node = &mut self.nodes[r as usize];
        node.replica = Some(rep);
        node.cpu.inbox.push_back(Input::Start);
        node.disk.restart(self.now);
        self.start_heap(r);
        self.kick(r);
    }

    fn finish(mut self) -> RunOutput {
        for (i, n) in self.nodes.iter().enumerate() {
            if let Some(rep) = n.replica.as_ref() {
                self.checker.state_taken(
                    i as ReplicaId,
                    "at the end of the run",
                    rep.state_machine(),
                );
            }
        }
        let finals: Vec<(ReplicaId, Slot, u64)> = self
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| {
                n.replica
                    .as_ref()
                    .map(|r| (i as ReplicaId, r.last_executed(), r.executed_digest()))
            })
            .collect();
        let states: Vec<_> = self
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| {
                n.replica.as_ref().map(|r| {
                    (
                        i as ReplicaId,
                        r.last_executed(),
                        r.state_machine().kv.clone(),
                    )
                })
            })
            .collect();
        let violations = self.checker.finish(
            &self.clients.history,
            &self.clients.requests,
            &finals,
            &states,
        );
        let _ = self.trace_out.as_mut().map(|w| w.flush());
        let end = self.end;
        let gc = self
            .nodes
            .iter_mut()
            .enumerate()
            .filter_map(|(i, n)| {
                let (_, speed) = n.cpu.slots(n.mutator_cores());
                let busy = n.cpu.busy_cores(speed);
                n.heap
                    .as_mut()
                    .map(|h| (i as ReplicaId, h.finish(end, busy)))
            })
            .collect();
        self.faults.dropped_messages = self.net.dropped;
        self.faults.duplicated_messages = self.net.duplicated;
        RunOutput {
            history: self.clients.history,
            latencies: self.clients.latencies,
            faults: self.faults,
            violations,
            trace_hash: self.hash.value(),
            events: self.events,
            end: self.end,
            final_last_executed: finals.iter().map(|f| f.1).collect(),
            gc,
            elections: self.elections,
            gc_log: self.gc_log,
        }
    }
}

pub fn core_config(s: &Scenario) -> Config {
    Config {
        n: s.n,
        heartbeat_interval: 20 * MS,
        election_timeout: 150 * MS,
        election_jitter: 150 * MS,
        window: s.window,
        max_batch: s.max_batch,
        max_pending: 10_000,
        trim_every: s.trim_every,
        trim_bytes: s.trim_bytes,
        trim_grace: 500 * MS,
        catchup_max: 64,
        trace: true,
        check_invariants: true,
        gc_coordination: s.memory.coordinated,
        gc_grant_timeout: SEC,
        gc_wait_max: 200 * MS,
        gc_transfer_wait: 2 * 20 * MS,
        gc_handoff_grace: s.gc_handoff_grace,
        gc_grant_after_grace: s.gc_grant_after_grace,
        gc_handoff_promise: s.gc_handoff_promise,
        gc_handoff_eager: s.gc_handoff_eager,
        commit_on_accept: s.commit_on_accept,
        pre_vote: s.pre_vote,
        session_limit: s.session_limit,
        session_tombstones: s.session_tombstones,
        // Registering clients (the default) are served as the real
        // replica serves them: registered ids only; legacy clients
        // (`--legacy-clients`) need the legacy rules.
        registered_clients_only: !s.legacy_clients,
        injected_bug: s.bug,
    }
}

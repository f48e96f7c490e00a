//! The discrete-event world: it owns the event queue, the one seeded RNG,
//! and the simulated components — replica processes (`node`: the unchanged
//! protocol core with its processor, disk, heap and timers), the network,
//! the clients and the fault schedule — and moves events between them.
//! The same seed always produces the same run.

use std::io::Write;

use stutter_core::{
    Config, Input, Message, Output, Replica, ReplicaId, Reply, Request, Seq, Time, Timer,
};

use crate::check::Checker;
use crate::clients::{ClientEvent, Clients};
use crate::faults::FaultCounts;
use crate::network::Network;
use crate::node::{timer_index, Node};
use crate::queue::Queue;
use crate::rng::Rng;
use crate::scenario::{Fault, Scenario, MS, SEC};
use crate::trace_hash::TraceHash;
use crate::windows::Armed;

mod collector;
mod host;
mod outputs;
mod process;
mod run_output;

pub use run_output::{GcMark, GcStep, RunOutput};

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
    /// History operation `op`'s request reaches replica `r`.
    ClientArrive {
        r: ReplicaId,
        op: usize,
    },
    /// A client's `Register` under `nonce` reaches replica `r`.
    ClientRegister {
        r: ReplicaId,
        nonce: stutter_core::ClientId,
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
            checker: Checker::new(n, s.session_limit)
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
            Ev::ClientArrive { r, op } => {
                if let Some(req) = self.clients.requests.get(op) {
                    self.enqueue(r, Input::Request(req.clone()));
                }
            }
            Ev::ClientRegister { r, nonce } => {
                self.enqueue(r, Input::Request(Request::register(nonce)))
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
                ClientEvent::Arrive { r, op, at } => self.at(at, Ev::ClientArrive { r, op }),
                ClientEvent::Timeout { c, at } => self.at(at, Ev::ClientTimeout { c, at }),
                ClientEvent::Register { r, nonce, at } => {
                    self.at(at, Ev::ClientRegister { r, nonce })
                }
            }
        }
        self.client_events = evs;
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
        injected_bug: s.bug,
    }
}

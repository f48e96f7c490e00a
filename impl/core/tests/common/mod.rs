//! An in-memory cluster of cores with a fully controlled network, disk and
//! clock, for the handler tests and the property tests. Every choice (which
//! message, which timer, when a persist completes) is made by the test.

#![allow(dead_code)]

use std::collections::BTreeMap;

use rand_xoshiro::rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use stutter_core::*;

pub fn rng(seed: u64) -> Box<dyn rand_core::RngCore + Send> {
    Box::new(Xoshiro256PlusPlus::seed_from_u64(seed))
}

pub fn test_config(n: usize) -> Config {
    Config {
        n,
        heartbeat_interval: 10,
        election_timeout: 100,
        election_jitter: 50,
        window: 4,
        max_batch: 3,
        max_pending: 1000,
        trim_every: 4,
        trim_bytes: 0,
        trim_grace: 1_000,
        catchup_max: 8,
        trace: true,
        check_invariants: true,
        gc_coordination: false,
        gc_grant_timeout: 200,
        gc_wait_max: 100,
        gc_transfer_wait: 20,
        gc_handoff_grace: 20,
        gc_grant_after_grace: false,
        gc_handoff_promise: false,
        gc_handoff_eager: false,
        commit_on_accept: false,
        // The transcripts written before pre-vote keep their elections;
        // prevote.txt and the property tests turn it on.
        pre_vote: false,
        session_limit: usize::MAX,
        injected_bug: None,
    }
}

pub fn put(client: u64, seq: u64, k: &str, v: &str) -> Request {
    Request::new(
        client,
        seq,
        Op::Put {
            key: k.to_owned().into(),
            value: v.to_owned().into(),
        },
    )
}

pub fn get(client: u64, seq: u64, k: &str) -> Request {
    Request::new(
        client,
        seq,
        Op::Get {
            key: k.to_owned().into(),
        },
    )
}

#[derive(Clone, Debug)]
pub struct InFlight {
    pub from: ReplicaId,
    pub to: ReplicaId,
    pub msg: Message,
}

pub struct Node {
    pub replica: Replica,
    pub up: bool,
    /// Records handed to the disk, with their token, not yet synced.
    pub unsynced: Vec<(u64, Vec<Record>)>,
    pub synced: Vec<Record>,
    pub timers: BTreeMap<Timer, Time>,
    pub max_ballot_seen: Ballot,
}

/// The (client, seq, retry) ids of a batch executed in a slot; `None` for a no-op.
pub type ExecutedIds = stutter_core::trace::ValueIds;

/// One input a replica handled and what it produced, kept when the
/// cluster records (the transcript tests print them).
#[derive(Clone, Debug)]
pub struct StepRecord {
    pub id: ReplicaId,
    pub time: Time,
    pub input: Input,
    pub outputs: Vec<Output>,
    /// The reasons the replica counted the input as ignored, if it did.
    pub ignored: Vec<Ignored>,
}

pub struct Cluster {
    pub cfg: Config,
    pub now: Time,
    pub nodes: Vec<Node>,
    pub net: Vec<InFlight>,
    pub replies: Vec<(ReplicaId, u64, u64, Reply)>,
    /// Replicas told to collect (`Output::Collect`), in order.
    pub collections: Vec<ReplicaId>,
    pub trace: Vec<TraceEvent>,
    /// slot ↦ value executed there (as (client, seq) ids), first replica to execute it.
    pub executed: BTreeMap<Slot, (ReplicaId, ExecutedIds)>,
    /// last_executed ↦ digest, first replica to reach it.
    pub digests: BTreeMap<Slot, u64>,
    pub violations: Vec<String>,
    /// Whether every step is kept in `steps`.
    pub record: bool,
    pub steps: Vec<StepRecord>,
    /// Links `(from, to)` that lose every message sent on them (a
    /// partition, possibly one-way or non-transitive).
    pub cut: std::collections::BTreeSet<(ReplicaId, ReplicaId)>,
    seed: u64,
}

impl Cluster {
    pub fn new(cfg: Config, seed: u64) -> Cluster {
        Self::build(cfg, seed, false)
    }

    /// A cluster that keeps every step in `steps`, its start included.
    pub fn recorded(cfg: Config, seed: u64) -> Cluster {
        Self::build(cfg, seed, true)
    }

    fn build(cfg: Config, seed: u64, record: bool) -> Cluster {
        let mut c = Cluster {
            cfg: cfg.clone(),
            now: 0,
            nodes: Vec::new(),
            net: Vec::new(),
            replies: Vec::new(),
            collections: Vec::new(),
            trace: Vec::new(),
            executed: BTreeMap::new(),
            digests: BTreeMap::new(),
            violations: Vec::new(),
            record,
            steps: Vec::new(),
            cut: std::collections::BTreeSet::new(),
            seed,
        };
        for id in 0..cfg.n {
            let replica = Replica::new(id as ReplicaId, cfg.clone(), rng(seed * 1000 + id as u64));
            c.nodes.push(Node {
                replica,
                up: true,
                unsynced: Vec::new(),
                synced: Vec::new(),
                timers: BTreeMap::new(),
                max_ballot_seen: Ballot::ZERO,
            });
        }
        for id in 0..cfg.n {
            c.input(id as ReplicaId, Input::Start);
        }
        c
    }

    pub fn input(&mut self, id: ReplicaId, input: Input) {
        let node = &mut self.nodes[id as usize];
        if !node.up {
            return;
        }
        let mut out = Vec::new();
        if self.record {
            let before = node.replica.ignored().clone();
            node.replica.handle(self.now, input.clone(), &mut out);
            let after = node.replica.ignored();
            let ignored = Ignored::ALL
                .iter()
                .flat_map(|r| std::iter::repeat_n(*r, (after.get(*r) - before.get(*r)) as usize))
                .collect();
            let (time, outputs) = (self.now, out.clone());
            self.steps.push(StepRecord {
                id,
                time,
                input,
                outputs,
                ignored,
            });
        } else {
            node.replica.handle(self.now, input, &mut out);
        }
        self.absorb(id, out);
        self.check_node(id);
    }

    fn absorb(&mut self, id: ReplicaId, out: Vec<Output>) {
        for o in out {
            match o {
                Output::Send { to, msg } => {
                    if !self.cut.contains(&(id, to)) {
                        self.net.push(InFlight { from: id, to, msg })
                    }
                }
                Output::SetTimer { timer, at } => {
                    self.nodes[id as usize].timers.insert(timer, at);
                }
                Output::Persist { token, records } => {
                    self.nodes[id as usize].unsynced.push((token, records))
                }
                Output::Reply { client, seq, reply } => self.replies.push((id, client, seq, reply)),
                // A collection: the test drives `GcDone` itself.
                Output::Collect { .. } => self.collections.push(id),
                Output::Trace(ev) => {
                    if let Action::Execute { slot, value, .. } = &ev.action {
                        match self.executed.get(slot) {
                            None => {
                                self.executed.insert(*slot, (id, value.clone()));
                            }
                            Some((other, v)) if v != value => self.violations.push(format!(
                                "slot {slot}: replica {id} executed {value:?}, replica {other} executed {v:?}"
                            )),
                            _ => {}
                        }
                    }
                    self.trace.push(ev)
                }
            }
        }
    }

    fn check_node(&mut self, id: ReplicaId) {
        let node = &mut self.nodes[id as usize];
        let b = node.replica.ballot();
        if b < node.max_ballot_seen {
            self.violations.push(format!(
                "replica {id} ballot went from {} to {b}",
                node.max_ballot_seen
            ));
        }
        node.max_ballot_seen = node.max_ballot_seen.max(b);
        let le = node.replica.last_executed();
        let d = node.replica.executed_digest();
        match self.digests.get(&le) {
            None => {
                self.digests.insert(le, d);
            }
            Some(d0) if *d0 != d => self.violations.push(format!(
                "replica {id} executed prefix up to {le} differs (digest {d:x} vs {d0:x})"
            )),
            _ => {}
        }
    }

    /// Completes every pending persist of a replica.
    pub fn sync(&mut self, id: ReplicaId) {
        let node = &mut self.nodes[id as usize];
        if !node.up || node.unsynced.is_empty() {
            return;
        }
        let mut top = 0;
        for (t, recs) in node.unsynced.drain(..) {
            top = t;
            node.synced.extend(recs);
        }
        self.input(id, Input::Persisted { token: top });
    }

    pub fn sync_all(&mut self) {
        for id in 0..self.nodes.len() {
            self.sync(id as ReplicaId);
        }
    }

    /// Delivers message `i` of the network (removing it unless `duplicate`).
    pub fn deliver(&mut self, i: usize, duplicate: bool) {
        if self.net.is_empty() {
            return;
        }
        let i = i % self.net.len();
        let m = if duplicate {
            self.net[i].clone()
        } else {
            self.net.remove(i)
        };
        self.input(
            m.to,
            Input::Message {
                from: m.from,
                msg: m.msg,
            },
        );
    }

    pub fn drop_msg(&mut self, i: usize) {
        if !self.net.is_empty() {
            let i = i % self.net.len();
            self.net.remove(i);
        }
    }

    /// The earliest armed timer of a live replica (of `only`, if given), if
    /// it is due by `until`.
    fn next_timer(&self, until: Time, only: Option<ReplicaId>) -> Option<(Time, usize, Timer)> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(id, n)| n.up && only.is_none_or(|o| o as usize == *id))
            .flat_map(|(id, n)| n.timers.iter().map(move |(t, at)| (*at, id, *t)))
            .filter(|(at, _, _)| *at <= until)
            .min()
    }

    fn fire(&mut self, (at, id, t): (Time, usize, Timer)) {
        self.now = self.now.max(at);
        self.nodes[id].timers.remove(&t);
        self.input(id as ReplicaId, Input::Timer(t));
    }

    /// Advances the clock to the earliest timer deadline and fires it.
    pub fn fire_next_timer(&mut self) {
        if let Some(next) = self.next_timer(Time::MAX, None) {
            self.fire(next);
        }
    }

    /// Fires every timer due within `dt`, in deadline order, then moves the
    /// clock to the end of it.
    pub fn advance(&mut self, dt: Time) {
        self.advance_only(None, dt)
    }

    /// As `advance`, firing only the timers of `only` (if given): the
    /// others stay due, as if their replicas were paused.
    pub fn advance_only(&mut self, only: Option<ReplicaId>, dt: Time) {
        let until = self.now + dt;
        while let Some(next) = self.next_timer(until, only) {
            self.fire(next);
        }
        self.now = until;
    }

    /// Crash: unsynced records and in-memory state are lost.
    pub fn crash(&mut self, id: ReplicaId) {
        let node = &mut self.nodes[id as usize];
        node.up = false;
        node.unsynced.clear();
        // What was never durable was never shown to anyone (sends wait for
        // persistence): the ballot may legitimately fall back to the durable one.
        let mut durable = DurableState::default();
        for r in node.synced.iter().cloned() {
            durable.apply(r);
        }
        node.max_ballot_seen = durable.ballot;
        node.timers.clear();
        self.net.retain(|m| m.to != id);
    }

    pub fn restart(&mut self, id: ReplicaId) {
        let node = &mut self.nodes[id as usize];
        if node.up {
            return;
        }
        let mut durable = DurableState::default();
        for r in node.synced.iter().cloned() {
            durable.apply(r);
        }
        node.replica = Replica::recover(
            id,
            self.cfg.clone(),
            durable,
            rng(self.seed * 7919 + self.now),
        );
        node.up = true;
        self.input(id, Input::Start);
    }

    /// Fair scheduling without faults: sync disks, deliver everything, fire
    /// timers, until quiet or `max_time` passes.
    pub fn run_fair(&mut self, max_time: Time) {
        let deadline = self.now + max_time;
        while self.now < deadline {
            self.sync_all();
            if !self.net.is_empty() {
                self.deliver(0, false);
                continue;
            }
            if self.nodes.iter().any(|n| n.up && !n.unsynced.is_empty()) {
                continue;
            }
            self.fire_next_timer();
        }
    }

    pub fn leader(&self) -> Option<ReplicaId> {
        self.nodes
            .iter()
            .filter(|n| n.up && n.replica.role() == Role::Leader)
            .max_by_key(|n| n.replica.ballot())
            .map(|n| n.replica.id())
    }

    /// The id the log assigned to the `Register` of `nonce`, if a reply
    /// told it (the first, if it was resent and executed twice).
    pub fn registered(&self, nonce: u64) -> Option<ClientId> {
        self.replies.iter().find_map(|r| match r {
            (_, n, 0, Reply::Registered { client }) if *n == nonce => Some(*client),
            _ => None,
        })
    }

    /// Registers a client through replica `at`, running the cluster fairly
    /// until the reply arrives (at most 1,000 time units): the id the log
    /// assigned.
    pub fn register(&mut self, at: ReplicaId, nonce: u64) -> Option<ClientId> {
        self.input(at, Input::Request(Request::register(nonce)));
        for _ in 0..100 {
            if let Some(id) = self.registered(nonce) {
                return Some(id);
            }
            self.run_fair(10);
        }
        self.registered(nonce)
    }

    pub fn reply_for(&self, client: u64, seq: u64) -> Option<&Reply> {
        self.replies
            .iter()
            .filter(|r| r.1 == client && r.2 == seq && !r.3.is_definite_rejection())
            .map(|r| &r.3)
            .next()
    }

    pub fn actions_of(&self, id: ReplicaId) -> Vec<&Action> {
        self.trace
            .iter()
            .filter(|e| e.replica == id)
            .map(|e| &e.action)
            .collect()
    }
}

//! One replica's protocol state machine. Every protocol decision of stutter
//! is made here; drivers (the tokio node, the simulator) only move inputs in
//! and outputs out. See `docs/protocol.md` for the rules implemented.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use rand_core::RngCore;

use crate::config::{Bug, Config};
use crate::durable::DurableState;
use crate::io::{Input, Output, Record, Timer};
use crate::log::Log;
use crate::message::Message;
use crate::state_machine::{digest_step, Snapshot};
use crate::trace::{value_ids, Action, SlotSummary, StateSummary, TraceEvent};
use crate::types::{
    ballot_owner, next_ballot, Ballot, ClientId, Instance, InstanceState, Op, ReplicaId, Reply,
    Request, Role, Seq, Slot, Time, Value,
};

/// How far beyond its last executed slot a replica stores instances. A
/// message naming a slot further out is a peer fault: ignored, so that it
/// cannot make the log allocate without bound.
const MAX_SLOTS_AHEAD: Slot = 1 << 22;

/// What a request adds to the log and the state, for `Config::trim_bytes`.
fn request_bytes(req: &Request) -> u64 {
    let payload = match &req.op {
        Op::Get { key } | Op::Del { key } => key.len(),
        Op::Put { key, value } => key.len() + value.len(),
        Op::Cas { key, from, to } => key.len() + from.as_ref().map_or(0, |f| f.len()) + to.len(),
    };
    payload as u64 + 24
}

/// A set of replica ids (ballots reserve 8 bits for an id).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct IdSet([u64; 4]);

impl IdSet {
    fn insert(&mut self, id: ReplicaId) {
        self.0[(id / 64) as usize] |= 1 << (id % 64);
    }
    fn contains(&self, id: ReplicaId) -> bool {
        self.0[(id / 64) as usize] & (1 << (id % 64)) != 0
    }
    fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }
}

/// Acceptances of one slot the leader proposed or replayed.
#[derive(Clone, Copy, Debug)]
struct Votes {
    ids: IdSet,
    /// When `Accept` was last sent for it (to resend what the network lost).
    sent: Time,
}

/// Outputs held until the persist that precedes them is durable.
#[derive(Debug)]
enum Deferred {
    Send { to: ReplicaId, msg: Message },
    /// The leader's own acceptance of a slot it proposed or replayed.
    SelfVote { ballot: Ballot, slot: Slot },
}

/// What a promise carried (the candidate's own promise is its log).
#[derive(Debug, Default)]
struct PromiseData {
    entries: Vec<Instance>,
    snapshot: Option<Arc<Snapshot>>,
}

/// A read waiting at the leader (ReadIndex): answered once the leader has
/// confirmed its leadership by a probe sent after the read arrived and has
/// executed up to `index`.
#[derive(Debug)]
struct PendingRead {
    index: Slot,
    req: Request,
}

/// The probe in flight: its id, who acknowledged it, when it was sent.
#[derive(Clone, Copy, Debug)]
struct Probe {
    id: u64,
    acks: IdSet,
    sent: Time,
}

/// The leader's read queue. Every read is covered by exactly one probe sent
/// after it arrived; at most one probe is in flight, so all reads that
/// arrive during a round share the next one (batching).
#[derive(Debug, Default)]
struct Reads {
    next_probe: u64,
    inflight: Option<Probe>,
    /// Arrived after the probe in flight was sent: wait for the next one.
    unprobed: Vec<PendingRead>,
    /// Covered by the probe in flight.
    probing: Vec<PendingRead>,
    /// Leadership confirmed; waiting for execution up to their index
    /// (indexes never decrease along the queue).
    confirmed: VecDeque<PendingRead>,
}

impl Reads {
    fn len(&self) -> usize {
        self.unprobed.len() + self.probing.len() + self.confirmed.len()
    }
}

/// What the leader knows of a follower.
#[derive(Clone, Copy, Debug)]
struct Progress {
    last_executed: Slot,
    heard: Time,
    snapshot_sent: Option<Time>,
}

pub struct Replica {
    id: ReplicaId,
    cfg: Config,
    rng: Box<dyn RngCore + Send>,
    now: Time,
    recovered: bool,

    // Acceptor state (durable).
    ballot: Ballot,
    log: Log,

    // Executed state.
    sm: Snapshot,

    role: Role,
    leader: Option<ReplicaId>,
    last_heard: Time,
    election_deadline: Time,
    heartbeat_deadline: Time,
    global_last_executed: Slot,
    /// Bytes of the requests executed since the last trim.
    executed_bytes: u64,

    // Persistence barrier.
    next_token: u64,
    persisted_token: u64,
    deferred: VecDeque<(u64, Deferred)>,

    // Candidate.
    promises: BTreeMap<ReplicaId, PromiseData>,

    // Leader.
    votes: BTreeMap<Slot, Votes>,
    pending: VecDeque<Request>,
    /// Requests pending or proposed by this leader and not yet executed.
    queued: BTreeSet<(ClientId, Seq)>,
    progress: BTreeMap<ReplicaId, Progress>,
    /// The highest slot merged and replayed when this replica became
    /// leader: every write acknowledged by an earlier leader is at or below.
    replay_top: Slot,
    reads: Reads,

    /// Requests that arrived here and still await their reply.
    waiting: BTreeSet<(ClientId, Seq)>,
}

impl Replica {
    /// A fresh replica with empty durable state.
    pub fn new(id: ReplicaId, cfg: Config, rng: Box<dyn RngCore + Send>) -> Replica {
        let mut r = Self::recover(id, cfg, DurableState::default(), rng);
        r.recovered = false;
        r
    }

    /// A replica restarted from the durable state its write-ahead log holds.
    pub fn recover(
        id: ReplicaId,
        cfg: Config,
        durable: DurableState,
        rng: Box<dyn RngCore + Send>,
    ) -> Replica {
        let sm = durable.snapshot.as_deref().cloned().unwrap_or_default();
        let mut log = Log::default();
        log.trim(durable.trimmed);
        for (slot, (ballot, value)) in durable.accepted {
            let state = if slot <= sm.last_executed {
                InstanceState::Executed
            } else {
                InstanceState::InProgress
            };
            log.put(Instance { slot, ballot, value, state });
        }
        Replica {
            id,
            cfg,
            rng,
            now: 0,
            // A restart, even from an empty write-ahead log: the trace must
            // show that the volatile state of the previous run is gone.
            recovered: true,
            ballot: durable.ballot,
            log,
            sm,
            role: Role::Follower,
            leader: None,
            last_heard: 0,
            election_deadline: 0,
            heartbeat_deadline: 0,
            global_last_executed: 0,
            executed_bytes: 0,
            next_token: 0,
            persisted_token: 0,
            deferred: VecDeque::new(),
            promises: BTreeMap::new(),
            votes: BTreeMap::new(),
            pending: VecDeque::new(),
            queued: BTreeSet::new(),
            progress: BTreeMap::new(),
            replay_top: 0,
            reads: Reads::default(),
            waiting: BTreeSet::new(),
        }
    }

    // ----- read-only views (status, checkers) -----

    pub fn id(&self) -> ReplicaId {
        self.id
    }
    pub fn config(&self) -> &Config {
        &self.cfg
    }
    pub fn role(&self) -> Role {
        self.role
    }
    pub fn ballot(&self) -> Ballot {
        self.ballot
    }
    /// The leader this replica believes in, if any.
    pub fn leader(&self) -> Option<ReplicaId> {
        self.leader
    }
    pub fn last_executed(&self) -> Slot {
        self.sm.last_executed
    }
    pub fn global_last_executed(&self) -> Slot {
        self.global_last_executed
    }
    pub fn last_index(&self) -> Slot {
        self.log.last_index()
    }
    pub fn trimmed(&self) -> Slot {
        self.log.trimmed()
    }
    /// Running digest of every executed slot (see `state_machine::digest_step`).
    pub fn executed_digest(&self) -> u64 {
        self.sm.digest
    }
    /// The executed key-value state and session table.
    pub fn state_machine(&self) -> &Snapshot {
        &self.sm
    }
    pub fn instance(&self, slot: Slot) -> Option<&Instance> {
        self.log.get(slot)
    }
    /// Number of client requests waiting for a slot (leader only).
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }
    /// Number of reads waiting for a leadership confirmation or for
    /// execution to reach their read index (leader only).
    pub fn pending_reads(&self) -> usize {
        self.reads.len()
    }
    pub fn summary(&self) -> StateSummary {
        StateSummary {
            ballot: self.ballot,
            role: self.role,
            last_index: self.log.last_index(),
            last_executed: self.sm.last_executed,
            global_last_executed: self.global_last_executed,
            trimmed: self.log.trimmed(),
        }
    }

    // ----- the single entry point -----

    pub fn handle(&mut self, now: Time, input: Input, out: &mut Vec<Output>) {
        self.now = now.max(self.now);
        match input {
            Input::Start => self.on_start(out),
            Input::Message { from, msg } => {
                // A message from an unknown id or claiming to be from us is
                // a peer bug or an attack: drop it, never trust it.
                if (from as usize) < self.cfg.n && from != self.id {
                    self.on_message(from, msg, out)
                }
            }
            Input::Request(req) => self.on_request(req, out),
            Input::Timer(t) => self.on_timer(t, out),
            Input::Persisted { token } => self.on_persisted(token, out),
        }
    }

    fn on_start(&mut self, out: &mut Vec<Output>) {
        self.role = Role::Follower;
        self.last_heard = self.now;
        if self.recovered {
            self.emit(Action::Recover, out);
        }
        self.arm_election(self.now, out);
    }

    fn on_message(&mut self, from: ReplicaId, msg: Message, out: &mut Vec<Output>) {
        match msg {
            Message::Prepare { ballot, last_executed } => {
                self.on_prepare(from, ballot, last_executed, out)
            }
            Message::Promise { ballot, ok, entries, snapshot, .. } => {
                self.on_promise(from, ballot, ok, entries, snapshot, out)
            }
            Message::Accept { ballot, slot, value } => self.on_accept(from, ballot, slot, value, out),
            Message::Accepted { ballot, slot, ok } => self.on_accepted(from, ballot, slot, ok, out),
            Message::Heartbeat { ballot, last_executed, global_last_executed } => {
                self.on_heartbeat(from, ballot, last_executed, global_last_executed, out)
            }
            Message::HeartbeatReply { ballot, ok, last_executed, leader_last_executed } => self
                .on_heartbeat_reply(from, ballot, ok, last_executed, leader_last_executed, out),
            Message::CatchUp { ballot, entries } => self.on_catch_up(from, ballot, entries, out),
            Message::InstallSnapshot { ballot, snapshot } => {
                self.on_install_snapshot(from, ballot, snapshot, out)
            }
            Message::ReadProbe { ballot, id } => self.on_read_probe(from, ballot, id, out),
            Message::ReadProbeAck { ballot, id } => self.on_read_probe_ack(from, ballot, id, out),
        }
    }

    // ----- helpers: tracing, persistence, ballots, timers -----

    fn emit(&self, action: Action, out: &mut Vec<Output>) {
        if self.cfg.trace {
            out.push(Output::Trace(TraceEvent {
                replica: self.id,
                time: self.now,
                last_token: self.next_token,
                action,
                state: self.summary(),
            }));
        }
    }

    fn peers(&self) -> impl Iterator<Item = ReplicaId> {
        let me = self.id;
        (0..self.cfg.n as u16).map(|i| i as ReplicaId).filter(move |i| *i != me)
    }

    fn persist(&mut self, records: Vec<Record>, out: &mut Vec<Output>) {
        self.next_token += 1;
        out.push(Output::Persist { token: self.next_token, records });
    }

    /// Holds `d` until everything persisted so far is durable.
    fn after_persist(&mut self, d: Deferred, out: &mut Vec<Output>) {
        let unsafe_early = self.cfg.injected_bug == Some(Bug::ReplyBeforePersist);
        if self.next_token > self.persisted_token && !unsafe_early {
            self.deferred.push_back((self.next_token, d));
        } else {
            self.run_deferred(d, out);
        }
    }

    fn send_durable(&mut self, to: ReplicaId, msg: Message, out: &mut Vec<Output>) {
        self.after_persist(Deferred::Send { to, msg }, out)
    }

    fn on_persisted(&mut self, token: u64, out: &mut Vec<Output>) {
        let token = token.min(self.next_token);
        if token <= self.persisted_token {
            return;
        }
        self.persisted_token = token;
        self.emit(Action::Persisted { token }, out);
        while let Some((t, _)) = self.deferred.front() {
            if *t > self.persisted_token {
                break;
            }
            if let Some((_, d)) = self.deferred.pop_front() {
                self.run_deferred(d, out);
            }
        }
    }

    fn run_deferred(&mut self, d: Deferred, out: &mut Vec<Output>) {
        match d {
            Deferred::Send { to, msg } => out.push(Output::Send { to, msg }),
            Deferred::SelfVote { ballot, slot } => {
                if self.role == Role::Leader && ballot == self.ballot {
                    let committed = self.add_vote(self.id, slot, out);
                    self.emit(
                        Action::HandleAccepted { from: self.id, ballot, slot, ok: true, committed },
                        out,
                    );
                    if committed {
                        self.after_commit(out);
                    }
                }
            }
        }
    }

    /// Raises the ballot if `b` is higher (persisting it) and, if so,
    /// follows `b`'s owner. Returns whether it was raised.
    fn observe_ballot(&mut self, b: Ballot, out: &mut Vec<Output>) -> bool {
        if b <= self.ballot {
            return false;
        }
        self.ballot = b;
        self.persist(vec![Record::Ballot(b)], out);
        if self.role != Role::Follower {
            self.become_follower(out);
        }
        // Traced for followers too: the raise is a step of its own (the
        // spec's StepDown), persisted before the handler's own records.
        self.emit(Action::StepDown { ballot: b }, out);
        self.leader = Some(ballot_owner(b));
        true
    }

    fn become_follower(&mut self, out: &mut Vec<Output>) {
        self.role = Role::Follower;
        self.promises.clear();
        self.votes.clear();
        self.progress.clear();
        self.queued.clear();
        // Requests never proposed: a definite rejection is the truth.
        let leader = Some(ballot_owner(self.ballot)).filter(|l| *l != self.id);
        for req in std::mem::take(&mut self.pending) {
            if self.waiting.remove(&(req.client, req.seq)) {
                out.push(Output::Reply {
                    client: req.client,
                    seq: req.seq,
                    reply: Reply::Redirect { leader },
                });
            }
        }
        // Reads change nothing: redirecting them is always the truth.
        let reads = std::mem::take(&mut self.reads);
        let queued = reads.confirmed.into_iter().chain(reads.probing).chain(reads.unprobed);
        for PendingRead { req, .. } in queued {
            out.push(Output::Reply { client: req.client, seq: req.seq, reply: Reply::Redirect { leader } });
        }
        self.reads.next_probe = reads.next_probe;
        self.last_heard = self.now;
        self.arm_election(self.now, out);
    }

    fn jitter(&mut self) -> Time {
        match self.cfg.election_jitter {
            0 => 0,
            j => self.rng.next_u64() % (j + 1),
        }
    }

    fn arm_election(&mut self, from: Time, out: &mut Vec<Output>) {
        self.election_deadline = from + self.cfg.election_timeout + self.jitter();
        out.push(Output::SetTimer { timer: Timer::Election, at: self.election_deadline });
    }

    fn on_timer(&mut self, timer: Timer, out: &mut Vec<Output>) {
        match timer {
            Timer::Election => {
                if self.now < self.election_deadline {
                    return;
                }
                match self.role {
                    Role::Leader => {}
                    Role::Follower if self.now < self.last_heard + self.cfg.election_timeout => {
                        self.arm_election(self.last_heard, out)
                    }
                    Role::Follower | Role::Candidate => self.start_election(out),
                }
            }
            Timer::Heartbeat => {
                if self.role == Role::Leader && self.now >= self.heartbeat_deadline {
                    if self.lost_quorum() {
                        // Cut off from a majority: stop taking requests that
                        // cannot commit, so clients go elsewhere.
                        self.become_follower(out);
                        self.emit(Action::StepDown { ballot: self.ballot }, out);
                    } else {
                        self.send_heartbeats(out);
                        self.reprobe_if_lost(out);
                    }
                }
            }
        }
    }

    // ----- election -----

    fn start_election(&mut self, out: &mut Vec<Output>) {
        self.role = Role::Candidate;
        self.leader = None;
        self.ballot = next_ballot(self.ballot, self.id);
        self.persist(vec![Record::Ballot(self.ballot)], out);
        self.promises.clear();
        self.promises.insert(self.id, PromiseData::default());
        self.emit(Action::StartElection { ballot: self.ballot }, out);
        let msg = Message::Prepare { ballot: self.ballot, last_executed: self.sm.last_executed };
        for p in self.peers().collect::<Vec<_>>() {
            self.send_durable(p, msg.clone(), out);
        }
        self.arm_election(self.now, out);
        if self.promises.len() >= self.cfg.majority() {
            self.become_leader(out);
        }
    }

    fn on_prepare(&mut self, from: ReplicaId, b: Ballot, cand_le: Slot, out: &mut Vec<Output>) {
        let ok = b > self.ballot || (b == self.ballot && ballot_owner(b) == from);
        if !ok {
            let msg = self.reject_promise();
            out.push(Output::Send { to: from, msg });
            self.emit(Action::HandlePrepare { from, ballot: b, ok }, out);
            return;
        }
        self.observe_ballot(b, out);
        self.last_heard = self.now;
        let (after, snapshot) = if self.log.trimmed() > cand_le {
            (self.sm.last_executed, Some(Arc::new(self.sm.clone())))
        } else {
            (cand_le, None)
        };
        let entries: Vec<Instance> = self.log.iter_from(after).cloned().collect();
        let msg = Message::Promise {
            ballot: b,
            ok: true,
            last_executed: self.sm.last_executed,
            entries,
            snapshot,
        };
        self.send_durable(from, msg, out);
        self.emit(Action::HandlePrepare { from, ballot: b, ok }, out);
    }

    fn reject_promise(&self) -> Message {
        Message::Promise {
            ballot: self.ballot,
            ok: false,
            last_executed: self.sm.last_executed,
            entries: Vec::new(),
            snapshot: None,
        }
    }

    fn on_promise(
        &mut self,
        from: ReplicaId,
        b: Ballot,
        ok: bool,
        entries: Vec<Instance>,
        snapshot: Option<Arc<Snapshot>>,
        out: &mut Vec<Output>,
    ) {
        if !ok {
            self.emit(Action::HandlePromise { from, ballot: b, ok }, out);
            self.observe_ballot(b, out);
            return;
        }
        if self.role != Role::Candidate || b != self.ballot {
            return; // late or duplicate promise for another election
        }
        let limit = self.sm.last_executed + MAX_SLOTS_AHEAD;
        let entries = entries.into_iter().filter(|e| e.slot > 0 && e.slot <= limit).collect();
        self.promises.insert(from, PromiseData { entries, snapshot });
        self.emit(Action::HandlePromise { from, ballot: b, ok }, out);
        if self.promises.len() >= self.cfg.majority() {
            self.become_leader(out);
        }
    }

    fn become_leader(&mut self, out: &mut Vec<Output>) {
        let promises = std::mem::take(&mut self.promises);
        let merged_from: Vec<ReplicaId> = promises.keys().copied().collect();

        // 1. A promiser that trimmed beyond our last executed sent its state.
        let mut snapshot_from = None;
        let mut records = Vec::new();
        let best = promises
            .iter()
            .filter_map(|(id, p)| p.snapshot.as_ref().map(|s| (*id, s)))
            .max_by_key(|(_, s)| s.last_executed);
        if let Some((id, snap)) = best {
            if snap.last_executed > self.sm.last_executed {
                snapshot_from = Some(id);
                let snap = snap.clone();
                records.push(self.install_snapshot(snap, out));
            }
        }

        // 2. Merge: committed wins, else highest ballot; gaps become no-ops.
        let base = self.sm.last_executed;
        let mut merged: BTreeMap<Slot, (Value, bool, Ballot)> = BTreeMap::new();
        let mut consider = |inst: &Instance| {
            if inst.slot <= base {
                return;
            }
            let cand = (inst.value.clone(), inst.state.is_committed(), inst.ballot);
            match merged.get(&inst.slot) {
                Some((_, true, _)) => {}
                Some((_, false, b)) if !cand.1 && cand.2 <= *b => {}
                _ => {
                    merged.insert(inst.slot, cand);
                }
            }
        };
        for inst in self.log.iter_from(base) {
            consider(inst);
        }
        if self.cfg.injected_bug != Some(Bug::SkipMerge) {
            for p in promises.values() {
                for inst in &p.entries {
                    consider(inst);
                }
            }
        }
        let promised_max = promises
            .values()
            .flat_map(|p| p.entries.iter().map(|i| i.slot))
            .max()
            .unwrap_or(0);
        let max_slot = promised_max.max(self.log.last_index()).max(base);

        // 3. Replay every merged slot at the new ballot.
        self.role = Role::Leader;
        self.leader = Some(self.id);
        self.replay_top = max_slot;
        let ballot = self.ballot;
        records.reserve((max_slot - base) as usize);
        let mut replay = Vec::with_capacity((max_slot - base) as usize);
        let mut summaries = Vec::new();
        for slot in base + 1..=max_slot {
            let (value, committed) = match merged.remove(&slot) {
                Some((v, c, _)) => (v, c),
                None if self.cfg.injected_bug == Some(Bug::SkipNoopFill) => continue,
                None => (Value::Noop, false),
            };
            let state = if committed { InstanceState::Committed } else { InstanceState::InProgress };
            if self.cfg.trace {
                summaries.push(SlotSummary { slot, ballot, value: value_ids(&value), committed });
            }
            self.log.put(Instance { slot, ballot, value: value.clone(), state });
            records.push(Record::Accept { slot, ballot, value: value.clone() });
            if !committed {
                self.votes.insert(slot, Votes { ids: IdSet::default(), sent: self.now });
            }
            replay.push((slot, value, committed));
        }
        if !records.is_empty() {
            self.persist(records, out);
        }
        let peers: Vec<ReplicaId> = self.peers().collect();
        for (slot, value, committed) in replay {
            for &p in &peers {
                out.push(Output::Send { to: p, msg: Message::Accept { ballot, slot, value: value.clone() } });
            }
            if !committed {
                self.after_persist(Deferred::SelfVote { ballot, slot }, out);
            }
        }
        for &p in &peers {
            self.progress.insert(p, Progress { last_executed: 0, heard: self.now, snapshot_sent: None });
        }
        self.emit(Action::BecomeLeader { ballot, merged_from, snapshot_from, entries: summaries }, out);
        self.execute_committed(out);
        self.send_heartbeats(out);
        self.try_propose(out);
    }

    // ----- replication -----

    fn on_request(&mut self, req: Request, out: &mut Vec<Output>) {
        let (client, seq) = (req.client, req.seq);
        if self.role != Role::Leader {
            let leader = self.leader.filter(|l| *l != self.id);
            out.push(Output::Reply { client, seq, reply: Reply::Redirect { leader } });
            return;
        }
        if let Some(outcome) = self.sm.lookup(client, seq) {
            out.push(Output::Reply { client, seq, reply: outcome.reply() });
            return;
        }
        if self.queued.contains(&(client, seq)) {
            self.waiting.insert((client, seq));
            return;
        }
        if self.cfg.injected_bug == Some(Bug::LocalReads) {
            if let Op::Get { key } = &req.op {
                let reply = Reply::Value(self.sm.kv.get(key).cloned());
                out.push(Output::Reply { client, seq, reply });
                return;
            }
        }
        if self.pending.len() + self.reads.len() >= self.cfg.max_pending {
            out.push(Output::Reply { client, seq, reply: Reply::Busy });
            return;
        }
        if let Op::Get { .. } = req.op {
            // ReadIndex: every write acknowledged before now is at or below
            // this index (this leader's own are executed; earlier leaders'
            // were merged and replayed up to `replay_top`).
            let index = self.sm.last_executed.max(self.replay_top);
            self.reads.unprobed.push(PendingRead { index, req });
            self.maybe_probe(out);
            return;
        }
        self.queued.insert((client, seq));
        self.waiting.insert((client, seq));
        self.pending.push_back(req);
        self.try_propose(out);
    }

    fn try_propose(&mut self, out: &mut Vec<Output>) {
        while self.role == Role::Leader
            && self.votes.len() < self.cfg.window.max(1)
            && !self.pending.is_empty()
        {
            let k = self.pending.len().min(self.cfg.max_batch.max(1));
            let batch: Vec<Request> = self.pending.drain(..k).collect();
            let value = Value::Batch(Arc::new(batch));
            let slot = self.log.last_index() + 1;
            let ballot = self.ballot;
            self.log.put(Instance { slot, ballot, value: value.clone(), state: InstanceState::InProgress });
            self.persist(vec![Record::Accept { slot, ballot, value: value.clone() }], out);
            self.votes.insert(slot, Votes { ids: IdSet::default(), sent: self.now });
            if self.cfg.trace {
                self.emit(Action::Propose { slot, value: value_ids(&value) }, out);
            }
            for p in self.peers().collect::<Vec<_>>() {
                out.push(Output::Send { to: p, msg: Message::Accept { ballot, slot, value: value.clone() } });
            }
            self.after_persist(Deferred::SelfVote { ballot, slot }, out);
        }
    }

    fn on_accept(&mut self, from: ReplicaId, b: Ballot, slot: Slot, value: Value, out: &mut Vec<Output>) {
        let lower_ok = self.cfg.injected_bug == Some(Bug::AcceptLowerBallot);
        if b < self.ballot && !lower_ok {
            let msg = Message::Accepted { ballot: self.ballot, slot, ok: false };
            out.push(Output::Send { to: from, msg });
            if self.cfg.trace {
                self.emit(Action::HandleAccept { from, ballot: b, slot, ok: false, value: value_ids(&value) }, out);
            }
            return;
        }
        if slot == 0 || slot > self.sm.last_executed + MAX_SLOTS_AHEAD {
            return;
        }
        self.observe_ballot(b, out);
        if self.role != Role::Follower {
            return; // our own ballot: cannot come from a peer
        }
        self.leader = Some(from);
        self.last_heard = self.now;
        let keep = slot <= self.sm.last_executed
            || self.log.get(slot).is_some_and(|i| i.state.is_committed());
        let trace_value = if self.cfg.trace { value_ids(&value) } else { None };
        if !keep {
            self.log.put(Instance { slot, ballot: b, value: value.clone(), state: InstanceState::InProgress });
            self.persist(vec![Record::Accept { slot, ballot: b, value }], out);
        }
        self.send_durable(from, Message::Accepted { ballot: b, slot, ok: true }, out);
        self.emit(Action::HandleAccept { from, ballot: b, slot, ok: true, value: trace_value }, out);
    }

    fn on_accepted(&mut self, from: ReplicaId, b: Ballot, slot: Slot, ok: bool, out: &mut Vec<Output>) {
        if !ok {
            self.emit(Action::HandleAccepted { from, ballot: b, slot, ok, committed: false }, out);
            self.observe_ballot(b, out);
            return;
        }
        if self.role != Role::Leader || b != self.ballot {
            return;
        }
        let committed = self.add_vote(from, slot, out);
        self.emit(Action::HandleAccepted { from, ballot: b, slot, ok, committed }, out);
        if committed {
            self.after_commit(out);
        }
    }

    /// Counts a vote; returns whether it committed the slot.
    fn add_vote(&mut self, id: ReplicaId, slot: Slot, _out: &mut Vec<Output>) -> bool {
        let Some(v) = self.votes.get_mut(&slot) else { return false };
        v.ids.insert(id);
        let enough = v.ids.len() >= self.cfg.majority()
            || (self.cfg.injected_bug == Some(Bug::CommitWithoutMajority) && v.ids.contains(self.id));
        if !enough {
            return false;
        }
        self.votes.remove(&slot);
        if let Some(inst) = self.log.get_mut(slot) {
            if inst.state == InstanceState::InProgress {
                inst.state = InstanceState::Committed;
            }
        }
        true
    }

    fn after_commit(&mut self, out: &mut Vec<Output>) {
        self.execute_committed(out);
        self.try_propose(out);
    }

    fn execute_committed(&mut self, out: &mut Vec<Output>) {
        loop {
            let slot = self.sm.last_executed + 1;
            let value = match self.log.get_mut(slot) {
                Some(inst) if inst.state == InstanceState::Committed => {
                    inst.state = InstanceState::Executed;
                    inst.value.clone()
                }
                _ => break,
            };
            for req in value.requests() {
                self.executed_bytes += request_bytes(req);
                let outcome = self.sm.execute(req);
                let key = (req.client, req.seq);
                self.queued.remove(&key);
                // Older requests of this client that never executed (their
                // slot became a no-op) will not: stop waiting for them.
                while let Some(old) = self.waiting.range((req.client, 0)..key).next().copied() {
                    self.waiting.remove(&old);
                }
                if self.waiting.remove(&key) {
                    out.push(Output::Reply { client: req.client, seq: req.seq, reply: outcome.reply() });
                }
            }
            self.sm.digest = digest_step(self.sm.digest, slot, &value);
            self.sm.last_executed = slot;
            if self.cfg.trace {
                self.emit(Action::Execute { slot, value: value_ids(&value) }, out);
            }
        }
        self.serve_reads(out);
    }

    // ----- reads (ReadIndex): no log write, no fsync -----
    //
    // A read that arrives at the leader records its read index (see
    // `on_request`). The leader then sends a probe at its ballot; an acceptor
    // acknowledges only if its ballot is not above the leader's. A majority
    // of acknowledgments (the leader's own included), all given after the
    // read arrived, shows that no other leader had been elected when the read
    // arrived: a newer leader needs promises from a majority, which overlaps
    // this one, and an acceptor that promised a higher ballot does not
    // acknowledge. So every write acknowledged before the read arrived is at
    // or below the read index, and the read is answered from the state once
    // execution reaches that index. No clock is involved: a paused leader
    // cannot answer from a stale state after it wakes up, since its probe
    // must first be acknowledged by a majority at its ballot.

    fn maybe_probe(&mut self, out: &mut Vec<Output>) {
        if self.role != Role::Leader || self.reads.inflight.is_some() || self.reads.unprobed.is_empty() {
            return;
        }
        if self.cfg.majority() <= 1 {
            let reads = std::mem::take(&mut self.reads.unprobed);
            self.reads.confirmed.extend(reads);
            self.serve_reads(out);
            return;
        }
        self.reads.next_probe += 1;
        let id = self.reads.next_probe;
        self.reads.probing = std::mem::take(&mut self.reads.unprobed);
        self.reads.inflight = Some(Probe { id, acks: IdSet::default(), sent: self.now });
        let ballot = self.ballot;
        for p in self.peers() {
            out.push(Output::Send { to: p, msg: Message::ReadProbe { ballot, id } });
        }
    }

    /// A probe lost with a broken connection would hold its reads forever:
    /// one unanswered for a heartbeat interval is replaced by a new one.
    fn reprobe_if_lost(&mut self, out: &mut Vec<Output>) {
        let Some(p) = self.reads.inflight else { return };
        if p.sent.saturating_add(self.cfg.heartbeat_interval) > self.now {
            return;
        }
        self.reads.inflight = None;
        let mut reads = std::mem::take(&mut self.reads.probing);
        reads.append(&mut self.reads.unprobed);
        self.reads.unprobed = reads;
        self.maybe_probe(out);
    }

    fn on_read_probe(&mut self, from: ReplicaId, b: Ballot, id: u64, out: &mut Vec<Output>) {
        // Not above `b`: this acceptor has promised no higher ballot. Its
        // state is left alone (the heartbeats and accepts of `b` update it).
        if b >= self.ballot {
            out.push(Output::Send { to: from, msg: Message::ReadProbeAck { ballot: b, id } });
        }
    }

    fn on_read_probe_ack(&mut self, from: ReplicaId, b: Ballot, id: u64, out: &mut Vec<Output>) {
        if self.role != Role::Leader || b != self.ballot {
            return;
        }
        let Some(p) = self.reads.inflight.as_mut() else { return };
        if p.id != id {
            return;
        }
        p.acks.insert(from);
        if p.acks.len() + 1 < self.cfg.majority() {
            return;
        }
        self.reads.inflight = None;
        let reads = std::mem::take(&mut self.reads.probing);
        self.reads.confirmed.extend(reads);
        self.serve_reads(out);
        self.maybe_probe(out);
    }

    /// Answers the confirmed reads whose index is executed.
    fn serve_reads(&mut self, out: &mut Vec<Output>) {
        if self.role != Role::Leader {
            return;
        }
        while self.reads.confirmed.front().is_some_and(|r| r.index <= self.sm.last_executed) {
            let Some(PendingRead { req, .. }) = self.reads.confirmed.pop_front() else { break };
            let reply = match &req.op {
                Op::Get { key } => Reply::Value(self.sm.kv.get(key).cloned()),
                // Only reads are queued here.
                _ => continue,
            };
            out.push(Output::Reply { client: req.client, seq: req.seq, reply });
        }
    }

    // ----- heartbeats, follower commit, trimming, catch-up -----

    /// Whether the leader has not heard from a majority (itself included)
    /// for a whole election timeout.
    fn lost_quorum(&self) -> bool {
        let since = self.now.saturating_sub(self.cfg.election_timeout);
        let heard = self.progress.values().filter(|p| p.heard >= since).count();
        heard + 1 < self.cfg.majority()
    }

    fn send_heartbeats(&mut self, out: &mut Vec<Output>) {
        let msg = Message::Heartbeat {
            ballot: self.ballot,
            last_executed: self.sm.last_executed,
            global_last_executed: self.global_last_executed,
        };
        for p in self.peers().collect::<Vec<_>>() {
            out.push(Output::Send { to: p, msg: msg.clone() });
        }
        self.emit(
            Action::SendHeartbeat {
                ballot: self.ballot,
                last_executed: self.sm.last_executed,
                global_last_executed: self.global_last_executed,
            },
            out,
        );
        self.heartbeat_deadline = self.now + self.cfg.heartbeat_interval;
        out.push(Output::SetTimer { timer: Timer::Heartbeat, at: self.heartbeat_deadline });
        self.resend_accepts(out);
    }

    /// The network may lose an `Accept` (a broken connection, a restarted
    /// peer): slots still uncommitted a heartbeat interval after their last
    /// send go again to the peers that have not acknowledged them.
    fn resend_accepts(&mut self, out: &mut Vec<Output>) {
        let (now, ballot, me, n) = (self.now, self.ballot, self.id, self.cfg.n);
        let due = self.cfg.heartbeat_interval;
        for (slot, v) in self.votes.iter_mut().take(self.cfg.catchup_max.max(1)) {
            if v.sent.saturating_add(due) > now {
                continue;
            }
            let Some(inst) = self.log.get(*slot) else { continue };
            v.sent = now;
            for p in (0..n as u16).map(|i| i as ReplicaId).filter(|p| *p != me && !v.ids.contains(*p)) {
                let msg = Message::Accept { ballot, slot: *slot, value: inst.value.clone() };
                out.push(Output::Send { to: p, msg });
            }
        }
    }

    fn on_heartbeat(&mut self, from: ReplicaId, b: Ballot, lle: Slot, gle: Slot, out: &mut Vec<Output>) {
        if b < self.ballot {
            let msg = Message::HeartbeatReply {
                ballot: self.ballot,
                ok: false,
                last_executed: self.sm.last_executed,
                leader_last_executed: lle,
            };
            out.push(Output::Send { to: from, msg });
            let action = Action::HandleHeartbeat {
                from,
                ballot: b,
                leader_last_executed: lle,
                global_last_executed: gle,
                ok: false,
                committed: Vec::new(),
            };
            self.emit(action, out);
            return;
        }
        self.observe_ballot(b, out);
        if self.role != Role::Follower {
            return;
        }
        self.leader = Some(from);
        self.last_heard = self.now;
        let any_ballot = self.cfg.injected_bug == Some(Bug::FollowerCommitAnyBallot);
        let mut committed = Vec::new();
        let mut slot = self.sm.last_executed + 1;
        while slot <= lle {
            match self.log.get_mut(slot) {
                Some(inst) if inst.state.is_committed() => {}
                Some(inst) if inst.ballot == b || any_ballot => {
                    inst.state = InstanceState::Committed;
                    committed.push(slot);
                }
                _ => break,
            }
            slot += 1;
        }
        self.global_last_executed = self.global_last_executed.max(gle);
        // Traced before the executions it enables, which are steps of their own.
        let action = Action::HandleHeartbeat {
            from,
            ballot: b,
            leader_last_executed: lle,
            global_last_executed: gle,
            ok: true,
            committed,
        };
        self.emit(action, out);
        self.execute_committed(out);
        let msg = Message::HeartbeatReply {
            ballot: b,
            ok: true,
            last_executed: self.sm.last_executed,
            leader_last_executed: lle,
        };
        self.send_durable(from, msg, out);
        self.maybe_trim(out);
    }

    fn on_heartbeat_reply(
        &mut self,
        from: ReplicaId,
        b: Ballot,
        ok: bool,
        le: Slot,
        lle: Slot,
        out: &mut Vec<Output>,
    ) {
        if !ok {
            self.emit(Action::HandleHeartbeatReply { from, ballot: b, ok, last_executed: le }, out);
            self.observe_ballot(b, out);
            return;
        }
        if self.role != Role::Leader || b != self.ballot {
            return;
        }
        let now = self.now;
        let Some(p) = self.progress.get_mut(&from) else { return };
        p.last_executed = p.last_executed.max(le);
        p.heard = now;
        let snapshot_sent = p.snapshot_sent;
        let grace = self.cfg.trim_grace;
        let gle = self
            .progress
            .values()
            .filter(|p| p.heard.saturating_add(grace) >= now)
            .map(|p| p.last_executed)
            .fold(self.sm.last_executed, Slot::min);
        self.global_last_executed = self.global_last_executed.max(gle);
        self.emit(Action::HandleHeartbeatReply { from, ballot: b, ok, last_executed: le }, out);

        // A follower that could not commit what the heartbeat allowed is
        // missing instances: send them, or our state if we trimmed them.
        if le < lle || le < self.log.trimmed() {
            if le < self.log.trimmed() {
                let recently =
                    snapshot_sent.is_some_and(|t| t.saturating_add(self.cfg.election_timeout) > now);
                if !recently {
                    let snapshot = Arc::new(self.sm.clone());
                    out.push(Output::Send { to: from, msg: Message::InstallSnapshot { ballot: b, snapshot } });
                    if let Some(p) = self.progress.get_mut(&from) {
                        p.snapshot_sent = Some(now);
                    }
                    self.emit(Action::SendCatchUp { to: from, slots: Vec::new(), snapshot: true }, out);
                }
            } else {
                let top = self.sm.last_executed;
                let entries: Vec<Instance> = self
                    .log
                    .iter_from(le)
                    .take_while(|i| i.slot <= top)
                    .take(self.cfg.catchup_max.max(1))
                    .cloned()
                    .collect();
                if !entries.is_empty() {
                    let slots = if self.cfg.trace { entries.iter().map(|i| i.slot).collect() } else { Vec::new() };
                    out.push(Output::Send { to: from, msg: Message::CatchUp { ballot: b, entries } });
                    self.emit(Action::SendCatchUp { to: from, slots, snapshot: false }, out);
                }
            }
        }
        self.maybe_trim(out);
    }

    fn on_catch_up(&mut self, from: ReplicaId, b: Ballot, entries: Vec<Instance>, out: &mut Vec<Output>) {
        if b < self.ballot {
            return;
        }
        self.observe_ballot(b, out);
        if self.role != Role::Follower {
            return;
        }
        self.leader = Some(from);
        self.last_heard = self.now;
        let mut records = Vec::new();
        let mut slots = Vec::new();
        for e in entries {
            if e.slot > self.sm.last_executed + MAX_SLOTS_AHEAD {
                continue;
            }
            let have = e.slot <= self.sm.last_executed
                || self.log.get(e.slot).is_some_and(|i| i.state.is_committed());
            if have {
                continue;
            }
            slots.push(e.slot);
            records.push(Record::Accept { slot: e.slot, ballot: e.ballot, value: e.value.clone() });
            self.log.put(Instance { state: InstanceState::Committed, ..e });
        }
        if !records.is_empty() {
            self.persist(records, out);
        }
        self.emit(Action::HandleCatchUp { from, ballot: b, slots }, out);
        self.execute_committed(out);
        self.maybe_trim(out);
    }

    fn on_install_snapshot(&mut self, from: ReplicaId, b: Ballot, snap: Arc<Snapshot>, out: &mut Vec<Output>) {
        if b < self.ballot {
            return;
        }
        self.observe_ballot(b, out);
        if self.role != Role::Follower {
            return;
        }
        self.leader = Some(from);
        self.last_heard = self.now;
        if snap.last_executed <= self.sm.last_executed {
            return;
        }
        let le = snap.last_executed;
        let record = self.install_snapshot(snap, out);
        self.persist(vec![record], out);
        self.emit(Action::InstallSnapshot { from, last_executed: le }, out);
        self.execute_committed(out);
    }

    /// Replaces the executed state by a newer snapshot; returns the record
    /// that persists it (the caller persists it with the step's other
    /// records, so that the step is durable as a whole or not at all).
    fn install_snapshot(&mut self, snap: Arc<Snapshot>, out: &mut Vec<Output>) -> Record {
        let le = snap.last_executed;
        self.sm = (*snap).clone();
        self.log.trim(le);
        let record = Record::Snapshot { trimmed: le, snapshot: snap };
        // Requests waiting here that the snapshot covers can be answered.
        let done: Vec<(ClientId, Seq)> = self
            .waiting
            .iter()
            .filter(|(c, s)| self.sm.lookup(*c, *s).is_some())
            .copied()
            .collect();
        for (client, seq) in done {
            self.waiting.remove(&(client, seq));
            self.queued.remove(&(client, seq));
            if let Some(o) = self.sm.lookup(client, seq) {
                out.push(Output::Reply { client, seq, reply: o.reply() });
            }
        }
        record
    }

    fn maybe_trim(&mut self, out: &mut Vec<Output>) {
        let to = self.global_last_executed.min(self.sm.last_executed);
        let by_slots = to >= self.log.trimmed() + self.cfg.trim_every.max(1);
        let by_bytes = self.cfg.trim_bytes > 0 && self.executed_bytes >= self.cfg.trim_bytes && to > self.log.trimmed();
        if !by_slots && !by_bytes {
            return;
        }
        self.executed_bytes = 0;
        let snapshot = Arc::new(self.sm.clone());
        self.persist(vec![Record::Snapshot { trimmed: to, snapshot }], out);
        self.log.trim(to);
        self.emit(Action::Trim { up_to: to }, out);
    }
}

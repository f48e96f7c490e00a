//! One replica's protocol state machine. Every protocol decision of stutter
//! is made here; drivers (the tokio node, the simulator) only move inputs in
//! and outputs out. See `docs/protocol.md` for the rules implemented and
//! `docs/architecture.md` for the map.
//!
//! One file per protocol phase, each adding its handlers to [`Replica`]:
//!
//! | file | phase |
//! |---|---|
//! | `step.rs` | the entry for peer messages: the ballot rule, applied once, then dispatch by role |
//! | `role.rs` | roles as an enum carrying their own state; stepping down |
//! | `election.rs` | election timer, prepare, promise, merge and replay (`BecomeLeader`) |
//! | `replication.rs` | client requests, propose, accept, accepted, resending accepts |
//! | `commit.rs` | execution, heartbeats (commit on followers), check quorum |
//! | `reads.rs` | ReadIndex: reads confirmed by a probe round, no log write |
//! | `durability.rs` | the persist barrier: outputs held until what they depend on is durable |
//! | `catch_up.rs` | trimming, catch-up and snapshot installation |
//! | `pre_vote.rs` | pre-vote and leader stickiness: the election timer asks before it raises the ballot |
//! | `gc.rs` | GC coordination (Blade): a replica's collection, the leader's grants within a budget |
//! | `handoff.rs` | a due leader's hand-off of its leadership before it collects (`TimeoutNow`) |
//! | `ignore.rs` | the named reasons an input is ignored, counted |
//! | `invariants.rs` | `check_invariants`, run after every step in debug builds |
//!
//! Adding a phase (say, GC coordination): a new file with its state (in the
//! role that owns it, `role.rs`), its handlers as `impl Replica` methods,
//! and for each new message a variant in `message.rs`, its class in
//! [`step`](self::step) (a request that carries the sender's ballot, an
//! answer to one of ours, or a probe exempt from the ballot rule) and its
//! arm in the role dispatch there. The ballot rule then needs no new code.

mod catch_up;
mod commit;
mod durability;
mod election;
mod gc;
mod handoff;
mod ignore;
mod invariants;
mod pre_vote;
mod reads;
mod replication;
mod role;
mod step;

use std::collections::BTreeSet;

use rand_core::RngCore;

use crate::config::Config;
use crate::durable::DurableState;
use crate::io::{Input, Output, Timer};
use crate::log::Log;
use crate::quorum::Quorum;
use crate::state_machine::Snapshot;
use crate::trace::{Action, StateSummary, TraceEvent};
use crate::types::{Ballot, ClientId, Instance, InstanceState, ReplicaId, Role, Seq, Slot, Time};

use durability::Barrier;
pub use ignore::{Ignored, IgnoredCounts};
use role::RoleState;

/// Whether an injected bug (`config::Bug`) is switched on. Without the
/// `injected-bugs` feature no bug exists and this is `false`.
macro_rules! injected {
    ($cfg:expr, $bug:ident) => {{
        #[cfg(feature = "injected-bugs")]
        let on = $cfg.injected_bug == Some($crate::config::Bug::$bug);
        #[cfg(not(feature = "injected-bugs"))]
        let on = false;
        on
    }};
}
pub(crate) use injected;

/// How far beyond its last executed slot a replica stores instances. A
/// message naming a slot further out is a peer fault: ignored, so that it
/// cannot make the log allocate without bound.
const MAX_SLOTS_AHEAD: u64 = 1 << 22;

pub struct Replica {
    id: ReplicaId,
    cfg: Config,
    quorum: Quorum,
    rng: Box<dyn RngCore + Send>,
    now: Time,
    recovered: bool,

    // Acceptor state (durable).
    ballot: Ballot,
    log: Log,

    // Executed state.
    sm: Snapshot,

    /// Follower, candidate or leader, each with the state only it has.
    role: RoleState,
    election_deadline: Time,
    global_last_executed: Slot,
    /// Bytes of the requests executed since the last trim.
    executed_bytes: u64,
    /// Updates (put, del, cas) this replica executed (applied, not
    /// duplicates, stale or expired) since it started, snapshots installed
    /// not included: for status reports only.
    applied_updates: u64,

    barrier: Barrier,
    /// The last read probe id used. Kept across leaderships, so that a late
    /// acknowledgment never matches a later probe of this replica.
    last_probe: u64,
    /// Requests that arrived here and still await their reply (in any role:
    /// a request proposed before stepping down is answered when executed).
    waiting: BTreeSet<(ClientId, Seq)>,
    /// This replica's own collection (GC coordination).
    gc: gc::GcState,
    /// The driver's storage alarm ([`Input::StorageAlarm`]): writes are
    /// refused while it is on.
    storage_full: bool,

    ignored: IgnoredCounts,
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
            log.put(Instance {
                slot,
                ballot,
                value,
                state,
            });
        }
        Replica {
            id,
            quorum: Quorum::new(cfg.n),
            cfg,
            rng,
            now: 0,
            // A restart, even from an empty write-ahead log: the trace must
            // show that the volatile state of the previous run is gone.
            recovered: true,
            ballot: durable.ballot,
            log,
            sm,
            role: RoleState::follower(None, 0),
            election_deadline: 0,
            global_last_executed: Slot::ZERO,
            executed_bytes: 0,
            applied_updates: 0,
            barrier: Barrier::default(),
            last_probe: 0,
            waiting: BTreeSet::new(),
            gc: gc::GcState::default(),
            storage_full: false,
            ignored: IgnoredCounts::default(),
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
        self.role.kind()
    }
    pub fn ballot(&self) -> Ballot {
        self.ballot
    }
    /// The leader this replica believes in, if any (itself when leader).
    pub fn leader(&self) -> Option<ReplicaId> {
        match &self.role {
            RoleState::Follower(f) => f.leader,
            RoleState::Candidate(_) => None,
            RoleState::Leader(_) => Some(self.id),
        }
    }
    pub fn last_executed(&self) -> Slot {
        self.sm.last_executed
    }
    pub fn global_last_executed(&self) -> Slot {
        self.global_last_executed
    }
    /// Whether the storage alarm is on (writes refused).
    pub fn storage_full(&self) -> bool {
        self.storage_full
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
    /// Updates this replica executed itself since it started (see the field).
    pub fn applied_updates(&self) -> u64 {
        self.applied_updates
    }
    /// The executed key-value state and session table.
    pub fn state_machine(&self) -> &Snapshot {
        &self.sm
    }
    pub fn instance(&self, slot: Slot) -> Option<&Instance> {
        self.log.get(slot)
    }
    /// Instances above `after`, in slot order (for status and tests).
    pub fn instances_from(&self, after: Slot) -> impl Iterator<Item = &Instance> {
        self.log.iter_from(after)
    }
    /// Number of client requests waiting for a slot (leader only).
    pub fn pending_len(&self) -> usize {
        self.role.as_leader().map_or(0, |l| l.pending.len())
    }
    /// Number of reads waiting for a leadership confirmation or for
    /// execution to reach their read index (leader only).
    pub fn pending_reads(&self) -> usize {
        self.role.as_leader().map_or(0, |l| l.reads.len())
    }
    /// The newest persistence token issued, and the newest reported durable.
    pub fn tokens(&self) -> (u64, u64) {
        (self.barrier.next_token, self.barrier.persisted_token)
    }
    /// How many inputs were ignored, by reason.
    pub fn ignored(&self) -> &IgnoredCounts {
        &self.ignored
    }
    pub fn summary(&self) -> StateSummary {
        StateSummary {
            ballot: self.ballot,
            role: self.role.kind(),
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
            Input::Message { from, msg } => self.step(from, msg, out),
            Input::Request(req) => self.on_request(req, out),
            Input::Timer(Timer::Election) => self.on_election_timer(out),
            Input::Timer(Timer::Heartbeat) => self.on_heartbeat_timer(out),
            Input::Persisted { token } => self.on_persisted(token, out),
            Input::Timer(Timer::Gc) => self.on_gc_timer(out),
            Input::GcDue { headroom } => self.on_gc_due(headroom, out),
            Input::GcDone => self.on_gc_done(out),
            Input::StorageAlarm { full } => self.storage_full = full,
        }
        if cfg!(debug_assertions) || self.cfg.check_invariants {
            self.stop_on_a_broken_invariant();
        }
    }

    /// Stops the process when an invariant is broken: that is a bug of
    /// the core, not input from outside, and stopping at the step that
    /// broke it is what debug builds and the simulator ask for
    /// (`Config::check_invariants`).
    #[allow(clippy::panic)]
    fn stop_on_a_broken_invariant(&self) {
        if let Err(e) = self.check_invariants() {
            panic!(
                "replica {} at {}: invariant violated: {e}",
                self.id, self.now
            );
        }
    }

    fn on_start(&mut self, out: &mut Vec<Output>) {
        if !matches!(self.role, RoleState::Follower(_)) {
            // Start is the first input; a driver that sends it again gets
            // a follower, as after a restart.
            self.become_follower(out);
        }
        if let RoleState::Follower(f) = &mut self.role {
            f.last_heard = self.now;
        }
        if self.recovered {
            self.emit(
                Action::Recover {
                    sessions: self.sm.sessions_summary(self.cfg.session_limit),
                },
                out,
            );
        }
        self.arm_election(self.now, out);
    }

    // ----- helpers shared by the phases -----

    fn emit(&self, action: Action, out: &mut Vec<Output>) {
        if self.cfg.trace {
            out.push(Output::Trace(TraceEvent {
                replica: self.id,
                time: self.now,
                last_token: self.barrier.next_token,
                action,
                state: self.summary(),
            }));
        }
    }

    fn peers(&self) -> impl Iterator<Item = ReplicaId> {
        let me = self.id;
        (0..self.cfg.n as u16)
            .map(|i| i as ReplicaId)
            .filter(move |i| *i != me)
    }

    /// Counts an input that changed nothing, under the reason why.
    fn ignore(&mut self, why: Ignored) {
        self.ignored.record(why);
    }
}

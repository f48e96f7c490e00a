//! Protocol parameters. Times are in microseconds.

use serde::{Deserialize, Serialize};

use crate::types::Time;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Config {
    /// Number of replicas (ids `0..n`).
    pub n: usize,
    pub heartbeat_interval: Time,
    /// A follower starts an election after this much silence plus a jitter.
    pub election_timeout: Time,
    /// Upper bound of the uniform random jitter added to `election_timeout`.
    pub election_jitter: Time,
    /// Maximum slots proposed and not yet committed.
    pub window: usize,
    /// Maximum client requests in one slot.
    pub max_batch: usize,
    /// Requests waiting for the window beyond this are answered `Busy`.
    pub max_pending: usize,
    /// Trim (and snapshot) once this many executed slots can be trimmed.
    pub trim_every: u64,
    /// Also trim once the requests executed since the last trim carry this
    /// many bytes (keys and values; 0 = off). A snapshot costs a copy of the
    /// whole state: by bytes, its cost is a bounded share of the work
    /// whatever the batch size, while the log it retires stays bounded.
    pub trim_bytes: u64,
    /// A follower silent for this long no longer holds back trimming.
    pub trim_grace: Time,
    /// Maximum instances in one `CatchUp` message.
    pub catchup_max: usize,
    /// Emit [`crate::Output::Trace`] events (off on the hot path).
    pub trace: bool,
    /// Coordinate garbage collections in the manner of Blade
    /// (`docs/protocol-gc-coordination.md`): a follower collects only
    /// with the leader's grant, at most `n − majority` at once; a leader
    /// due for a collection first hands leadership to an up-to-date
    /// follower. Off: a collection the driver reports due starts at once.
    pub gc_coordination: bool,
    /// A grant the leader gave is counted until the follower reports the
    /// collection done, or for this long at most.
    pub gc_grant_timeout: Time,
    /// A replica due for a collection that got no grant within this long
    /// collects anyway.
    pub gc_wait_max: Time,
    /// A leader handing off waits at most this long for its in-flight
    /// slots to commit and its chosen follower to catch up.
    pub gc_transfer_wait: Time,
    /// After a hand-off the old leader asks the new one for its grant only
    /// this long later: a grace in which the clients that still address it
    /// are redirected rather than left waiting through its pause. Measured
    /// in the simulator (docs/gc-study-blade.md, "Hand-off grace"): with a grace
    /// shorter than most clients' gap between requests, the ones that sent
    /// nothing during it hit the pause, and the tail is the pause.
    pub gc_handoff_grace: Time,
    /// A leader elected by a hand-off does not queue the old leader for a
    /// grant at once (which would hold the one grant through the old
    /// leader's grace, so that a new leader due meanwhile could not hand
    /// off and would collect while leading): the old leader asks when its
    /// grace ends, and is not chosen as a hand-off target until then. Off:
    /// it is queued (and granted) at the election, as the spec's
    /// `GcElected` models; on, trace validation would need that changed
    /// (docs/gc-study-blade.md, "Where the coordinated tail comes from").
    pub gc_grant_after_grace: bool,
    /// A leader handing off durably promises the target's next ballot
    /// itself (it follows that ballot from then on, exactly as if it had
    /// answered the target's `Prepare`) and sends the promise in
    /// `TimeoutNow`: with 3 replicas the target then needs no `Prepare`
    /// round, only its own ballot write (docs/protocol-gc-coordination.md, "GC
    /// coordination"). Off: the target runs a full election.
    pub gc_handoff_promise: bool,
    /// A leader handing off does not wait for its target to accept the
    /// slots in flight: it sends `TimeoutNow` at once, and redirects the
    /// clients of those slots to the target too (they retry there with
    /// the same `(client, seq)`). Safe only because the promise it then
    /// carries holds those slots, so it is used only with
    /// `gc_handoff_promise` (without it, it changes nothing).
    pub gc_handoff_eager: bool,
    /// Every `Accept` carries the leader's `last_executed`
    /// (`Message::Accept::committed`), so that followers learn commits at
    /// once rather than at the next heartbeat: an old leader that handed
    /// off then answers its in-flight clients as soon as the new leader
    /// commits their slots. Off: only heartbeats carry it.
    pub commit_on_accept: bool,
    /// Pre-vote and leader stickiness (`docs/protocol-pre-vote.md`): a
    /// replica whose election timer fires first asks whether a majority
    /// would promise the ballot it would use, without raising its own; a
    /// replica that heard from a live leader within an election timeout
    /// says no. Only with a majority of pre-votes does it raise its ballot
    /// and send `Prepare`. Off: the timer raises the ballot at once. A
    /// leadership hand-off (`TimeoutNow`) never pre-votes.
    pub pre_vote: bool,
    /// At most this many client sessions (`sessions.rs`): executing a
    /// `Register` beyond it evicts the least recently executed session,
    /// whose client is then expired. Part of the replicated state
    /// machine: it must be the same on every replica of a cluster.
    /// `usize::MAX`: unbounded.
    pub session_limit: usize,
    /// Run [`crate::Replica::check_invariants`] after every step (always
    /// on in debug builds; the simulator turns it on in release builds).
    pub check_invariants: bool,
    /// A deliberately injected protocol bug, for tests that prove the
    /// checkers catch it. Exists only with the `injected-bugs` feature,
    /// which production builds leave off.
    #[cfg(feature = "injected-bugs")]
    pub injected_bug: Option<Bug>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            n: 3,
            heartbeat_interval: 50_000,
            election_timeout: 300_000,
            election_jitter: 300_000,
            window: 16,
            max_batch: 256,
            max_pending: 100_000,
            trim_every: 1 << 20,
            trim_bytes: 16 << 20,
            trim_grace: 2_000_000,
            catchup_max: 512,
            trace: false,
            gc_coordination: false,
            gc_grant_timeout: 1_000_000,
            gc_wait_max: 500_000,
            gc_transfer_wait: 100_000,
            gc_handoff_grace: 250_000,
            gc_grant_after_grace: false,
            gc_handoff_promise: false,
            gc_handoff_eager: false,
            commit_on_accept: false,
            pre_vote: true,
            // Bounded (docs/protocol-sessions.md, "Session expiry"). The simulator
            // sets its own (unbounded unless a scenario bounds it).
            session_limit: 100_000,
            check_invariants: false,
            #[cfg(feature = "injected-bugs")]
            injected_bug: None,
        }
    }
}

impl Config {
    pub fn majority(&self) -> usize {
        crate::quorum::Quorum::new(self.n).majority()
    }
}

/// Known protocol bugs that can be switched on to test the checkers
/// (feature `injected-bugs`).
#[cfg(feature = "injected-bugs")]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Bug {
    /// The new leader ignores the promised logs: it keeps only its own
    /// entries and fills the rest with no-ops.
    SkipMerge,
    /// An acceptor accepts an `Accept` whose ballot is below its own.
    AcceptLowerBallot,
    /// Promises and acceptances are sent before they are durable.
    ReplyBeforePersist,
    /// The leader commits a slot on its own vote alone.
    CommitWithoutMajority,
    /// A follower commits up to the leader's last executed whatever the
    /// ballot of its instances.
    FollowerCommitAnyBallot,
    /// Any replica answers `Get` from its local state, without the log or
    /// a leadership check.
    LocalReads,
    /// A new leader replays the merged slots but leaves the gaps between
    /// them empty instead of filling them with no-ops.
    SkipNoopFill,
    /// A promise leaves at once, before the ballot it promises is durable
    /// (acceptances still wait: narrower than `ReplyBeforePersist`). Unsafe
    /// only if the replica crashes inside that persist window and, back at
    /// its older ballot, accepts for a deposed leader still sending.
    PromiseBeforePersist,
    /// A new leader writes the entries it replays to its write-ahead log
    /// under the ballot they were accepted at, not its own (its memory and
    /// its `Accept`s carry its own). Unsafe only after a restart: it then
    /// reports a value chosen at its ballot as accepted at an older one, and
    /// a later leader may prefer a value of a ballot in between.
    WrongBallotReplay,
    /// `Snapshot::execute`'s duplicate check misses a retry: a request
    /// already executed (the client's last) is executed again.
    ExecuteDuplicate,
    /// Installing a leader's snapshot keeps the replica's own, older
    /// session table instead of the snapshot's.
    StaleSessionsOnInstall,
    /// A `Cas` whose expected value does not match answers `ok: false` but
    /// writes its new value all the same. Every replica executes it alike,
    /// so only a model written apart from `Snapshot::execute` tells.
    FailedCasWrites,
    /// A request of a client whose session was evicted runs as a new
    /// client's instead of being expired: a delayed request of the
    /// client, chosen after the eviction, executes again. Only a bounded
    /// session table shows it.
    RegisteredNoExpiry,
    /// A leader handing off with a promise (`gc_handoff_promise`) sends
    /// the target that promise without adopting the promised ballot: it
    /// keeps leading at its own, and may commit there, with a follower
    /// that has not heard of the new leader yet, slots the new leader
    /// (elected on the promise, with no `Prepare` to this replica) never
    /// saw. The spec's mutant `handoff_promise_not_adopted`. Only runs
    /// that coordinate and hand off with a promise show it.
    HandoffPromiseNotAdopted,
}

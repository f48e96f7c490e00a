//! Structured trace events: one per protocol step, named like the spec's
//! actions. The schema is documented in `docs/trace-format.md`.

use serde::{Deserialize, Serialize};

use crate::types::{Ballot, ReplicaId, RequestId, Role, Slot, Time, Value};

/// A value as traces report it: `None` for a no-op, else the
/// `(client, seq)` of every request of the batch (`RequestId`).
pub type ValueIds = Option<Vec<RequestId>>;

pub fn value_ids(v: &Value) -> ValueIds {
    match v {
        Value::Noop => None,
        Value::Batch(_) => Some(v.ids()),
    }
}

/// A replica's session table as traces report it: how many clients have a
/// session and the sum of their last executed sequence numbers. The trace
/// spec keeps the table itself and recomputes both, so that a session
/// table that drifts from the log (a retry executed twice, a snapshot
/// installed without its sessions) is rejected where it happens.
/// `limit` is the table's bound (`Config::session_limit`), absent when
/// unbounded: the trace spec evicts as the table does only if it knows it.
#[derive(Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionsSummary {
    pub clients: u64,
    pub seq_sum: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
}

/// Printed without `limit` when unbounded, as the JSON form leaves it out
/// (and the core's transcripts, `impl/core/testdata`, print it).
impl std::fmt::Debug for SessionsSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("SessionsSummary");
        d.field("clients", &self.clients)
            .field("seq_sum", &self.seq_sum);
        if let Some(limit) = self.limit {
            d.field("limit", &limit);
        }
        d.finish()
    }
}

/// Without `limit`, a setting rather than a step's outcome, so that run
/// fingerprints (`sim/src/trace_hash.rs`, the pinned `traces/seeds.txt`)
/// do not depend on whether traces report it.
impl std::hash::Hash for SessionsSummary {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.clients.hash(h);
        self.seq_sum.hash(h);
    }
}

/// One slot as a trace reports it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SlotSummary {
    pub slot: Slot,
    pub ballot: Ballot,
    pub value: ValueIds,
    pub committed: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "action")]
pub enum Action {
    /// Election timer expired: new ballot, Prepare sent to all.
    StartElection {
        ballot: Ballot,
    },
    HandlePrepare {
        from: ReplicaId,
        ballot: Ballot,
        ok: bool,
    },
    HandlePromise {
        from: ReplicaId,
        ballot: Ballot,
        ok: bool,
    },
    /// Majority of promises: snapshot installed if one was ahead, logs merged,
    /// gaps filled with no-ops, merged slots replayed at the new ballot.
    BecomeLeader {
        ballot: Ballot,
        merged_from: Vec<ReplicaId>,
        snapshot_from: Option<ReplicaId>,
        entries: Vec<SlotSummary>,
        /// The session table after the promised snapshot (if any) was
        /// installed, before the replayed slots execute.
        sessions: SessionsSummary,
    },
    Propose {
        slot: Slot,
        value: ValueIds,
    },
    HandleAccept {
        from: ReplicaId,
        ballot: Ballot,
        slot: Slot,
        ok: bool,
        value: ValueIds,
    },
    HandleAccepted {
        from: ReplicaId,
        ballot: Ballot,
        slot: Slot,
        ok: bool,
        committed: bool,
    },
    /// `applied`: how many requests of the value were executed (not
    /// answered as duplicates or stale); `sessions`: the table after.
    Execute {
        slot: Slot,
        value: ValueIds,
        applied: u32,
        sessions: SessionsSummary,
    },
    SendHeartbeat {
        ballot: Ballot,
        last_executed: Slot,
        global_last_executed: Slot,
    },
    /// Follower side: `committed` are the slots this heartbeat committed.
    HandleHeartbeat {
        from: ReplicaId,
        ballot: Ballot,
        leader_last_executed: Slot,
        global_last_executed: Slot,
        ok: bool,
        committed: Vec<Slot>,
    },
    HandleHeartbeatReply {
        from: ReplicaId,
        ballot: Ballot,
        ok: bool,
        last_executed: Slot,
    },
    Trim {
        up_to: Slot,
    },
    SendCatchUp {
        to: ReplicaId,
        slots: Vec<Slot>,
        snapshot: bool,
    },
    HandleCatchUp {
        from: ReplicaId,
        ballot: Ballot,
        slots: Vec<Slot>,
    },
    InstallSnapshot {
        from: ReplicaId,
        last_executed: Slot,
        sessions: SessionsSummary,
    },
    /// A higher ballot was seen and adopted (persisted); a leader or
    /// candidate becomes follower. With the replica's own ballot: a leader
    /// that lost contact with a majority stepped down (check quorum).
    StepDown {
        ballot: Ballot,
    },
    /// Everything persisted up to `token` is durable: the messages held
    /// for it are sent now (and the leader's own votes counted).
    Persisted {
        token: u64,
    },
    /// Restarted from durable state; `sessions`: the recovered table.
    Recover {
        sessions: SessionsSummary,
    },
    /// GC coordination (`docs/protocol-gc-coordination.md`). The driver reported a
    /// collection due, with `headroom` bytes left before it must collect.
    GcDue {
        headroom: u64,
    },
    /// A follower due for a collection asked its leader `to` for a grant.
    RequestGc {
        to: ReplicaId,
        ballot: Ballot,
    },
    /// Leader: a follower asked to collect; granted now or queued.
    HandleGcRequest {
        from: ReplicaId,
        ballot: Ballot,
        granted: bool,
    },
    /// Leader: a grant was given to `to` (from the queue, or at once).
    GrantGc {
        to: ReplicaId,
        ballot: Ballot,
    },
    /// A grant of the leader of `ballot` arrived.
    HandleGcGrant {
        from: ReplicaId,
        ballot: Ballot,
    },
    /// The replica starts collecting: under a grant, or not (coordination
    /// off, no grant in time, no headroom left).
    Collect {
        granted: bool,
    },
    /// The collection is over.
    GcDone,
    /// Leader: a follower's collection is over (or its grant expired).
    HandleGcDone {
        from: ReplicaId,
        ballot: Ballot,
        expired: bool,
    },
    /// Leader due for a collection: hands leadership to `to` and steps down.
    TransferLeadership {
        to: ReplicaId,
        ballot: Ballot,
    },
    /// An `Accept` of the leader of `ballot` carried its last executed
    /// (`Config::commit_on_accept`): `committed` as a heartbeat's would.
    /// `slot` is the Accept's.
    LearnCommit {
        from: ReplicaId,
        ballot: Ballot,
        slot: Slot,
        leader_last_executed: Slot,
        committed: Vec<Slot>,
    },
    /// `Config::gc_handoff_promise`: as `TransferLeadership`, and the
    /// leader of `ballot` adopted `promised`, `to`'s next ballot, whose
    /// promise `TimeoutNow` carries (traced after the step: its state is
    /// the follower's at `promised`).
    TransferWithPromise {
        to: ReplicaId,
        ballot: Ballot,
        promised: Ballot,
    },
    /// The leader of `ballot` asked this follower to start an election.
    HandleTimeoutNow {
        from: ReplicaId,
        ballot: Ballot,
    },
    /// Pre-vote (`Config::pre_vote`): the election timer expired; the
    /// replica asks the others about `ballot`, the ballot it would use,
    /// without raising (or persisting) its own. It follows no leader now.
    StartPreVote {
        ballot: Ballot,
    },
    /// A pre-vote for `ballot` was answered: `ok` if `ballot` is above the
    /// replica's own and it has not heard from a live leader within an
    /// election timeout (a leader never grants one).
    HandlePreVote {
        from: ReplicaId,
        ballot: Ballot,
        ok: bool,
    },
    /// A pre-vote for the replica's current round was counted (`ok`), or a
    /// refusal arrived (followed by `StepDown` if it carried a higher
    /// ballot).
    HandlePreVoteReply {
        from: ReplicaId,
        ballot: Ballot,
        ok: bool,
    },
}

/// The replica's state after the step, compared by the trace spec.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StateSummary {
    pub ballot: Ballot,
    pub role: Role,
    pub last_index: Slot,
    pub last_executed: Slot,
    pub global_last_executed: Slot,
    pub trimmed: Slot,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TraceEvent {
    pub replica: ReplicaId,
    pub time: Time,
    /// The newest persistence token issued so far: what this step wrote,
    /// and the messages it held back, are durable / sent once a
    /// `Persisted` with a token at least this high is traced.
    pub last_token: u64,
    #[serde(flatten)]
    pub action: Action,
    pub state: StateSummary,
}

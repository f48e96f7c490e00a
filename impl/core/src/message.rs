//! Messages between replicas.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::state_machine::Snapshot;
use crate::types::{Ballot, Instance, Slot, Value};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Message {
    /// Phase 1a, carrying the candidate's `last_executed` so that promises
    /// only carry what it lacks.
    Prepare { ballot: Ballot, last_executed: Slot },
    /// Phase 1b. When `ok`, `entries` are the promiser's instances above the
    /// candidate's `last_executed` (above its own if it sends a snapshot),
    /// and `snapshot` is its state if it trimmed beyond the candidate's
    /// `last_executed`. When not `ok`, `ballot` is the promiser's own.
    Promise {
        ballot: Ballot,
        ok: bool,
        last_executed: Slot,
        entries: Vec<Instance>,
        snapshot: Option<Arc<Snapshot>>,
    },
    /// Phase 2a for one slot. With `Config::commit_on_accept`, `committed`
    /// is the leader's `last_executed`, which the follower applies as it
    /// does a heartbeat's: it learns commits at the next accept rather
    /// than the next heartbeat. `None` otherwise.
    Accept {
        ballot: Ballot,
        slot: Slot,
        value: Value,
        committed: Option<Slot>,
    },
    /// Phase 2b. When not `ok`, `ballot` is the acceptor's own.
    Accepted {
        ballot: Ballot,
        slot: Slot,
        ok: bool,
    },
    /// The leader's periodic commit message.
    Heartbeat {
        ballot: Ballot,
        last_executed: Slot,
        global_last_executed: Slot,
    },
    /// `leader_last_executed` echoes the heartbeat being answered so the
    /// leader can tell a follower that could not commit. When not `ok`,
    /// `ballot` is the follower's own (higher) ballot.
    HeartbeatReply {
        ballot: Ballot,
        ok: bool,
        last_executed: Slot,
        leader_last_executed: Slot,
    },
    /// Committed instances for a follower that is behind.
    CatchUp {
        ballot: Ballot,
        entries: Vec<Instance>,
    },
    /// The leader's state, for a follower behind the leader's trim point.
    InstallSnapshot {
        ballot: Ballot,
        snapshot: Arc<Snapshot>,
    },
    /// ReadIndex: the leader asks whether the acceptor still holds no
    /// ballot above `ballot`, to confirm it is still the leader before it
    /// answers the reads queued before this probe (`docs/protocol.md`,
    /// "Reads"). Changes no state anywhere: never traced.
    ReadProbe { ballot: Ballot, id: u64 },
    /// Answer to `ReadProbe`, sent only by an acceptor whose ballot is not
    /// above `ballot` when it handles the probe.
    ReadProbeAck { ballot: Ballot, id: u64 },
    /// GC coordination: a follower of `ballot` asks its leader for
    /// permission to collect.
    GcRequest { ballot: Ballot },
    /// The leader of `ballot` grants it.
    GcGrant { ballot: Ballot },
    /// The follower's collection is over: the grant is free again.
    GcDone { ballot: Ballot },
    /// The leader of `ballot`, about to collect, tells the follower it
    /// chose to start an election at once (no randomized wait). With
    /// `Config::gc_handoff_promise`, `promised` is the target's next ballot,
    /// which the old leader has durably promised, and `entries` that
    /// promise's content (its instances above the target's last executed,
    /// as it knows it): the target counts it as a `Promise` of the old
    /// leader for that ballot, so with 3 replicas it leads without a
    /// `Prepare` round. `None` and empty otherwise.
    TimeoutNow {
        ballot: Ballot,
        promised: Option<Ballot>,
        entries: Vec<Instance>,
    },
    /// Pre-vote: would the receiver promise `ballot`, the ballot the sender
    /// would campaign at, were it a `Prepare`, and has it lost its leader?
    /// Changes no state at the receiver, not even its ballot.
    PreVote { ballot: Ballot },
    /// The answer to `PreVote`. When `ok`, `ballot` is the one asked
    /// about; when not, the refuser's own ballot.
    PreVoteReply { ballot: Ballot, ok: bool },
}

impl Message {
    pub fn ballot(&self) -> Ballot {
        match self {
            Message::Prepare { ballot, .. }
            | Message::Promise { ballot, .. }
            | Message::Accept { ballot, .. }
            | Message::Accepted { ballot, .. }
            | Message::Heartbeat { ballot, .. }
            | Message::HeartbeatReply { ballot, .. }
            | Message::CatchUp { ballot, .. }
            | Message::InstallSnapshot { ballot, .. }
            | Message::ReadProbe { ballot, .. }
            | Message::ReadProbeAck { ballot, .. }
            | Message::GcRequest { ballot }
            | Message::GcGrant { ballot }
            | Message::GcDone { ballot }
            | Message::TimeoutNow { ballot, .. }
            | Message::PreVote { ballot }
            | Message::PreVoteReply { ballot, .. } => *ballot,
        }
    }

    /// The message's name, as trace events and metrics spell it.
    pub fn kind(&self) -> &'static str {
        match self {
            Message::Prepare { .. } => "Prepare",
            Message::Promise { .. } => "Promise",
            Message::Accept { .. } => "Accept",
            Message::Accepted { .. } => "Accepted",
            Message::Heartbeat { .. } => "Heartbeat",
            Message::HeartbeatReply { .. } => "HeartbeatReply",
            Message::CatchUp { .. } => "CatchUp",
            Message::InstallSnapshot { .. } => "InstallSnapshot",
            Message::ReadProbe { .. } => "ReadProbe",
            Message::ReadProbeAck { .. } => "ReadProbeAck",
            Message::GcRequest { .. } => "GcRequest",
            Message::GcGrant { .. } => "GcGrant",
            Message::GcDone { .. } => "GcDone",
            Message::TimeoutNow { .. } => "TimeoutNow",
            Message::PreVote { .. } => "PreVote",
            Message::PreVoteReply { .. } => "PreVoteReply",
        }
    }
}

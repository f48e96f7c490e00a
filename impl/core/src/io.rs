//! What drivers feed the core and what the core asks of them.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::message::Message;
use crate::state_machine::Snapshot;
use crate::trace::TraceEvent;
use crate::types::{Ballot, ClientId, ReplicaId, Reply, Request, Seq, Slot, Time, Value};

/// The core's timers. Each kind has at most one deadline: a new
/// [`Output::SetTimer`] replaces the previous one. A timer that fires before
/// the deadline the core last set is ignored, so drivers need not cancel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Timer {
    /// Follower: leader silent too long. Candidate: election took too long.
    Election,
    /// Leader: time to send heartbeats.
    Heartbeat,
    /// A replica due for a collection: time to collect without a grant,
    /// or (leader) to hand off without waiting longer.
    Gc,
}

#[derive(Clone, Debug)]
pub enum Input {
    /// First input after creation or recovery: arms the timers.
    Start,
    Message {
        from: ReplicaId,
        msg: Message,
    },
    /// A client request that arrived at this replica.
    Request(Request),
    Timer(Timer),
    /// Every [`Output::Persist`] with a token `≤ token` is durable.
    Persisted {
        token: u64,
    },
    /// The driver's collector wants to collect; `headroom` is how many
    /// bytes it may still allocate before it must (0: collect now).
    GcDue {
        headroom: u64,
    },
    /// The collection that [`Output::Collect`] started is over.
    GcDone,
    /// The driver's log cannot write (`full`: a full disk, an I/O error it
    /// retries) or can again. While it cannot, the leader refuses writes
    /// with [`crate::Reply::StorageFull`] (nothing proposed) and serves
    /// reads; what was already persisted or proposed is unaffected, and
    /// promises and acceptances wait for `Persisted` as always.
    StorageAlarm {
        full: bool,
    },
}

/// A write-ahead-log record. Replaying a replica's records in order through
/// [`crate::DurableState::apply`] rebuilds its acceptor state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Record {
    /// The replica's ballot was raised to this.
    Ballot(Ballot),
    /// The replica accepted `value` in `slot` at `ballot`.
    Accept {
        slot: Slot,
        ballot: Ballot,
        value: Value,
    },
    /// State at `snapshot.last_executed`; instances up to `trimmed` are gone.
    Snapshot {
        trimmed: Slot,
        snapshot: Arc<Snapshot>,
    },
}

#[derive(Clone, Debug)]
pub enum Output {
    Send {
        to: ReplicaId,
        msg: Message,
    },
    SetTimer {
        timer: Timer,
        at: Time,
    },
    /// Append `records` to the write-ahead log, make them durable, then
    /// report [`Input::Persisted`] with this token (or a later one).
    Persist {
        token: u64,
        records: Vec<Record>,
    },
    /// Answer a client request that arrived at this replica.
    Reply {
        client: ClientId,
        seq: Seq,
        reply: Reply,
    },
    /// Collect now (answering [`Input::GcDue`]); report [`Input::GcDone`]
    /// when the collection is over. `granted`: under a leader's grant;
    /// otherwise uncoordinated (coordination off) or forced (no grant came
    /// in time, or no headroom was left).
    Collect {
        granted: bool,
    },
    Trace(TraceEvent),
}

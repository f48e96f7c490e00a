//! Identifiers, client operations and log instances.

use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// Replica id, `0..n`. A ballot reserves 8 bits for it.
pub type ReplicaId = u8;
/// Virtual or real time in microseconds, always handed in by the driver.
pub type Time = u64;
/// A log index. Slots start at 1; 0 means "none".
pub type Slot = u64;
/// `round * 256 + id`; 0 means "none".
pub type Ballot = u64;
pub type ClientId = u64;
pub type Seq = u64;

/// The replica that owns (is the leader designated by) a ballot.
pub fn ballot_owner(ballot: Ballot) -> ReplicaId {
    (ballot % 256) as ReplicaId
}

/// The smallest ballot owned by `id` that is strictly above `above`.
/// Saturates instead of overflowing on absurd ballots a faulty peer might send.
pub fn next_ballot(above: Ballot, id: ReplicaId) -> Ballot {
    let candidate = (above / 256) * 256 + id as Ballot;
    if candidate > above {
        candidate
    } else {
        (above / 256).saturating_add(1).saturating_mul(256).saturating_add(id as Ballot)
    }
}

/// A key-value operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    Get { key: Bytes },
    Put { key: Bytes, value: Bytes },
    Del { key: Bytes },
    /// Compare-and-set: succeeds if the current value equals `from`
    /// (`None` = absent), then sets `to`.
    Cas { key: Bytes, from: Option<Bytes>, to: Bytes },
}

impl Op {
    pub fn key(&self) -> &Bytes {
        match self {
            Op::Get { key } | Op::Put { key, .. } | Op::Del { key } | Op::Cas { key, .. } => key,
        }
    }
}

/// A client request: executed at most once per `(client, seq)`.
/// A client has at most one request outstanding; `seq` increases.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    pub client: ClientId,
    pub seq: Seq,
    pub op: Op,
}

/// What a replica answers a client.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reply {
    /// Result of a `Get`.
    Value(Option<Bytes>),
    /// A `Put` or `Del` took effect.
    Done,
    /// Result of a `Cas`: whether it applied, and the value it found.
    Cas { ok: bool, current: Option<Bytes> },
    /// Not the leader; try the one named (if known). Nothing was proposed.
    Redirect { leader: Option<ReplicaId> },
    /// The leader's queue is full. Nothing was proposed.
    Busy,
    /// `seq` is older than the client's last executed request.
    Stale,
}

impl Reply {
    /// Whether the request is known not to have been executed, and never will be.
    pub fn is_definite_rejection(&self) -> bool {
        matches!(self, Reply::Redirect { .. } | Reply::Busy | Reply::Stale)
    }
}

/// The value of a slot: a no-op (gap fill) or a batch of requests.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Value {
    Noop,
    Batch(Arc<Vec<Request>>),
}

impl Value {
    pub fn requests(&self) -> &[Request] {
        match self {
            Value::Noop => &[],
            Value::Batch(b) => b,
        }
    }

    /// `(client, seq)` of every request, as the trace reports values.
    pub fn ids(&self) -> Vec<(ClientId, Seq)> {
        self.requests().iter().map(|r| (r.client, r.seq)).collect()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum InstanceState {
    InProgress,
    Committed,
    Executed,
}

impl InstanceState {
    pub fn is_committed(self) -> bool {
        self != InstanceState::InProgress
    }
}

/// One log slot's content.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instance {
    pub slot: Slot,
    pub ballot: Ballot,
    pub value: Value,
    pub state: InstanceState,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Role {
    Follower,
    Candidate,
    Leader,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_ballot_is_owned_and_strictly_higher() {
        for above in [0u64, 1, 2, 255, 256, 257, 300, 511, 512, 1000] {
            for id in [0u8, 1, 2, 7] {
                let b = next_ballot(above, id);
                assert!(b > above, "{b} > {above}");
                assert_eq!(ballot_owner(b), id);
                assert!(b - above <= 256, "smallest such ballot");
            }
        }
        assert_eq!(next_ballot(0, 1), 1);
        assert_eq!(next_ballot(0, 0), 256);
        assert_eq!(next_ballot(258, 1), 513);
        assert_eq!(next_ballot(258, 3), 259);
    }
}

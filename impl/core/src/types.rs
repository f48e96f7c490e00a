//! Identifiers, client operations and log instances.

use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// Replica id, `0..n`. A ballot reserves 8 bits for it.
pub type ReplicaId = u8;
/// Virtual or real time in microseconds, always handed in by the driver.
pub type Time = u64;
pub type ClientId = u64;
pub type Seq = u64;

/// The first client id the log assigns (`Op::Register`). Every client
/// registers and uses the id it is given; ids below it only route the
/// reply of a `Register` (its nonce) and take reads, which need no
/// session (`sessions.rs`).
pub const REGISTERED_BASE: ClientId = 1 << 63;

/// A log index. Slots start at 1; 0 means "none". Serialized as the bare
/// number (trace and wire formats are those of a `u64`).
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Slot(pub u64);

/// `round * 256 + id`; 0 means "none". Serialized as the bare number.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Ballot(pub u64);

impl Slot {
    pub const ZERO: Slot = Slot(0);

    /// Every slot from `first` to `last`, both included.
    pub fn between(first: Slot, last: Slot) -> impl Iterator<Item = Slot> {
        (first.0..=last.0).map(Slot)
    }
}

/// A slot `n` places further.
impl std::ops::Add<u64> for Slot {
    type Output = Slot;
    fn add(self, n: u64) -> Slot {
        Slot(self.0 + n)
    }
}

impl std::ops::AddAssign<u64> for Slot {
    fn add_assign(&mut self, n: u64) {
        self.0 += n;
    }
}

/// How many slots `self` is above `other`.
impl std::ops::Sub<Slot> for Slot {
    type Output = u64;
    fn sub(self, other: Slot) -> u64 {
        self.0 - other.0
    }
}

impl Ballot {
    pub const ZERO: Ballot = Ballot(0);

    /// The replica that owns (is the leader designated by) the ballot.
    pub fn owner(self) -> ReplicaId {
        (self.0 % 256) as ReplicaId
    }

    /// The smallest ballot owned by `id` that is strictly above this one.
    /// Saturates instead of overflowing on absurd ballots a faulty peer
    /// might send.
    pub fn next_owned_by(self, id: ReplicaId) -> Ballot {
        let above = self.0;
        let candidate = (above / 256) * 256 + id as u64;
        if candidate > above {
            Ballot(candidate)
        } else {
            Ballot(
                (above / 256)
                    .saturating_add(1)
                    .saturating_mul(256)
                    .saturating_add(id as u64),
            )
        }
    }
}

// Both print as the bare number: in traces, transcripts and logs a ballot
// or a slot is read as one.
macro_rules! bare_number_format {
    ($t:ty) => {
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Display::fmt(&self.0, f)
            }
        }
        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Display::fmt(&self.0, f)
            }
        }
    };
}
bare_number_format!(Slot);
bare_number_format!(Ballot);

/// The replica that owns (is the leader designated by) a ballot.
pub fn ballot_owner(ballot: Ballot) -> ReplicaId {
    ballot.owner()
}

/// The smallest ballot owned by `id` that is strictly above `above`.
pub fn next_ballot(above: Ballot, id: ReplicaId) -> Ballot {
    above.next_owned_by(id)
}

/// A key-value operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    Get {
        key: Bytes,
    },
    Put {
        key: Bytes,
        value: Bytes,
    },
    Del {
        key: Bytes,
    },
    /// Compare-and-set: succeeds if the current value equals `from`
    /// (`None` = absent), then sets `to`.
    Cas {
        key: Bytes,
        from: Option<Bytes>,
        to: Bytes,
    },
    /// Asks the log for a client id (`Reply::Registered`). Sent as
    /// `Request { client: nonce, seq: 0, .. }`: the nonce (below
    /// `REGISTERED_BASE`) only routes the reply and has no session. Last
    /// variant: the wire indices of the others stay as they were.
    Register,
}

impl Op {
    /// The key the operation reads or writes (empty for `Register`, which
    /// touches none: sizes and costs count it as zero bytes).
    pub fn key(&self) -> &Bytes {
        static NO_KEY: Bytes = Bytes::new();
        match self {
            Op::Get { key } | Op::Put { key, .. } | Op::Del { key } | Op::Cas { key, .. } => key,
            Op::Register => &NO_KEY,
        }
    }
}

/// A client request: executed at most once per `(client, seq)`.
/// A client has at most one request outstanding; `seq` increases, and a
/// resend after an uncertain attempt reuses the same `(client, seq)`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    pub client: ClientId,
    pub seq: Seq,
    pub op: Op,
}

impl Request {
    pub fn new(client: ClientId, seq: Seq, op: Op) -> Request {
        Request { client, seq, op }
    }

    /// How traces name it.
    pub fn id(&self) -> RequestId {
        RequestId {
            client: self.client,
            seq: self.seq,
        }
    }

    /// A registration request under routing id `nonce` (below
    /// `REGISTERED_BASE`).
    pub fn register(nonce: ClientId) -> Request {
        Request {
            client: nonce,
            seq: 0,
            op: Op::Register,
        }
    }

    /// Why the request is malformed, if it is: seq 0 is reserved for
    /// `Register`, whose nonce is below `REGISTERED_BASE`. Such a request
    /// is refused where it enters the core and is a no-op if it is in the
    /// log all the same.
    pub fn malformed(&self) -> Option<&'static str> {
        match (&self.op, self.seq) {
            (Op::Register, 0) if self.client >= REGISTERED_BASE => {
                Some("register nonce not below 2^63")
            }
            (Op::Register, 0) => None,
            (Op::Register, _) => Some("register with seq other than 0"),
            (_, 0) => Some("seq 0 is reserved for register"),
            _ => None,
        }
    }
}

/// A request as traces name it: `(client, seq)`. Serialized as the pair
/// `[client, seq]`, printed `(client, seq)`, hashed as the two words.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId {
    pub client: ClientId,
    pub seq: Seq,
}

impl RequestId {
    /// `(client, seq)`: what at-most-once is about.
    pub fn key(self) -> (ClientId, Seq) {
        (self.client, self.seq)
    }
}

impl std::fmt::Debug for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "({}, {})", self.client, self.seq)
    }
}

impl Serialize for RequestId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (self.client, self.seq).serialize(s)
    }
}

impl<'de> Deserialize<'de> for RequestId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<RequestId, D::Error> {
        let (client, seq) = <(ClientId, Seq)>::deserialize(d)?;
        Ok(RequestId { client, seq })
    }
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
    /// The client's session expired (`sessions.rs`): the request was not
    /// executed now, but an earlier attempt of it may have been, so its
    /// outcome is unknown. The client must continue under a new client id;
    /// retrying the same `(client, seq)` gets this reply again.
    SessionExpired,
    /// `Register` executed: the client id the log assigned.
    Registered { client: ClientId },
    /// The client id was never assigned by the log (below
    /// `REGISTERED_BASE`, or at or above it and not yet assigned): not
    /// executed, and never will be. The client registers first.
    UnknownClient,
    /// The request breaks the rules of seq 0 and `Register`
    /// (`Request::malformed`): not executed, and never will be.
    Malformed,
    /// A write (or `Register`) refused because the leader's log cannot
    /// write (its storage alarm, [`crate::Input::StorageAlarm`]): nothing
    /// was proposed. Reads are still served.
    StorageFull,
}

impl Reply {
    /// Whether the request is known not to have been executed, and never will be.
    pub fn is_definite_rejection(&self) -> bool {
        matches!(
            self,
            Reply::Redirect { .. }
                | Reply::Busy
                | Reply::Stale
                | Reply::UnknownClient
                | Reply::Malformed
                | Reply::StorageFull
        )
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
    pub fn ids(&self) -> Vec<RequestId> {
        self.requests().iter().map(Request::id).collect()
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
        for above in [0u64, 1, 2, 255, 256, 257, 300, 511, 512, 1000].map(Ballot) {
            for id in [0u8, 1, 2, 7] {
                let b = next_ballot(above, id);
                assert!(b > above, "{b} > {above}");
                assert_eq!(ballot_owner(b), id);
                assert!(b.0 - above.0 <= 256, "smallest such ballot");
            }
        }
        assert_eq!(next_ballot(Ballot(0), 1), Ballot(1));
        assert_eq!(next_ballot(Ballot(0), 0), Ballot(256));
        assert_eq!(next_ballot(Ballot(258), 1), Ballot(513));
        assert_eq!(next_ballot(Ballot(258), 3), Ballot(259));
        assert_eq!(next_ballot(Ballot(u64::MAX), 3).owner(), 255, "saturates");
    }

    #[test]
    fn newtypes_serialize_and_print_as_bare_numbers() {
        use std::hash::{Hash, Hasher};
        struct Words(Vec<u64>);
        impl Hasher for Words {
            fn finish(&self) -> u64 {
                0
            }
            fn write(&mut self, _: &[u8]) {
                unreachable!("hashed as one u64")
            }
            fn write_u64(&mut self, i: u64) {
                self.0.push(i)
            }
        }
        let mut h = Words(Vec::new());
        Slot(7).hash(&mut h);
        Ballot(513).hash(&mut h);
        assert_eq!(
            h.0,
            vec![7, 513],
            "the simulator's trace hash sees the same words as for a u64"
        );
        assert_eq!(
            format!("{} {:?} {:?}", Slot(7), Ballot(513), Some(Slot(2))),
            "7 513 Some(2)"
        );
        assert_eq!(
            Slot::between(Slot(3), Slot(5)).collect::<Vec<_>>(),
            vec![Slot(3), Slot(4), Slot(5)]
        );
        assert_eq!(Slot(9) - Slot(4), 5);
        assert_eq!(
            serde_json::to_string(&(Slot(7), Ballot(513))).unwrap(),
            "[7,513]"
        );
        assert_eq!(serde_json::from_str::<Ballot>("513").unwrap(), Ballot(513));
    }
}

//! The replicated key-value state machine, with its session table for
//! at-most-once execution, and its snapshots.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::trace::SessionsSummary;
use crate::types::{ClientId, Op, Reply, Request, Seq, Slot, Value};

/// The last executed request of a client and the reply it produced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    pub seq: Seq,
    pub reply: Reply,
}

/// Everything a replica's execution produced up to `last_executed`.
/// Ordered maps only: snapshots serialize identically on every replica.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub last_executed: Slot,
    pub kv: BTreeMap<Bytes, Bytes>,
    pub sessions: BTreeMap<ClientId, Session>,
    /// Running digest of every executed slot (see [`digest_step`]).
    pub digest: u64,
}

/// Injected bugs of execution (`config::Bug::ExecuteDuplicate`,
/// `Bug::FailedCasWrites`), switched by the replica's configuration.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ExecBugs {
    /// A retry of the client's last executed request runs again.
    pub execute_duplicate: bool,
    /// A cas that does not match writes its new value anyway.
    pub failed_cas_writes: bool,
}

/// What executing one request did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Executed now, with this reply.
    Applied(Reply),
    /// Already executed earlier: this is the recorded reply.
    Duplicate(Reply),
    /// Older than the client's last executed request.
    Stale,
}

impl Outcome {
    pub fn reply(&self) -> Reply {
        match self {
            Outcome::Applied(r) | Outcome::Duplicate(r) => r.clone(),
            Outcome::Stale => Reply::Stale,
        }
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

/// Folds one executed slot into a running digest. Two replicas with the same
/// `last_executed` and the same digest executed the same commands in the
/// same slots (up to hash collisions): the checkers compare it.
pub fn digest_step(prev: u64, slot: Slot, value: &Value) -> u64 {
    let mut h = fnv(if prev == 0 { FNV_OFFSET } else { prev }, &slot.0.to_le_bytes());
    match value {
        Value::Noop => h = fnv(h, b"noop"),
        Value::Batch(reqs) => {
            for r in reqs.iter() {
                h = fnv(h, &r.client.to_le_bytes());
                h = fnv(h, &r.seq.to_le_bytes());
                h = match &r.op {
                    Op::Get { key } => fnv(fnv(h, b"g"), key),
                    Op::Put { key, value } => fnv(fnv(fnv(h, b"p"), key), value),
                    Op::Del { key } => fnv(fnv(h, b"d"), key),
                    Op::Cas { key, from, to } => {
                        let h = fnv(fnv(h, b"c"), key);
                        let h = match from {
                            Some(f) => fnv(fnv(h, b"s"), f),
                            None => fnv(h, b"n"),
                        };
                        fnv(h, to)
                    }
                };
            }
        }
    }
    h
}

impl Snapshot {
    /// Executes one request with at-most-once semantics.
    pub fn execute(&mut self, req: &Request) -> Outcome {
        self.execute_checked(req, ExecBugs::default())
    }

    /// [`Snapshot::execute`] with the injected bugs of execution switched
    /// by `bugs` (all off in [`Snapshot::execute`]).
    pub(crate) fn execute_checked(&mut self, req: &Request, bugs: ExecBugs) -> Outcome {
        if let Some(s) = self.sessions.get(&req.client) {
            if req.seq == s.seq && !bugs.execute_duplicate {
                return Outcome::Duplicate(s.reply.clone());
            }
            if req.seq < s.seq {
                return Outcome::Stale;
            }
        }
        let reply = match &req.op {
            Op::Get { key } => Reply::Value(self.kv.get(key).cloned()),
            Op::Put { key, value } => {
                self.kv.insert(key.clone(), value.clone());
                Reply::Done
            }
            Op::Del { key } => {
                self.kv.remove(key);
                Reply::Done
            }
            Op::Cas { key, from, to } => {
                let current = self.kv.get(key).cloned();
                let ok = current == *from;
                if ok || bugs.failed_cas_writes {
                    self.kv.insert(key.clone(), to.clone());
                }
                Reply::Cas { ok, current }
            }
        };
        self.sessions.insert(req.client, Session { seq: req.seq, reply: reply.clone() });
        Outcome::Applied(reply)
    }

    /// The session table as traces report it (O(clients): built for trace
    /// events only).
    pub fn sessions_summary(&self) -> SessionsSummary {
        SessionsSummary {
            clients: self.sessions.len() as u64,
            seq_sum: self.sessions.values().fold(0u64, |sum, s| sum.wrapping_add(s.seq)),
        }
    }

    /// The recorded outcome of `(client, seq)` if it was executed already
    /// (or is older than what was executed), without executing anything.
    pub fn lookup(&self, client: ClientId, seq: Seq) -> Option<Outcome> {
        let s = self.sessions.get(&client)?;
        if seq == s.seq {
            Some(Outcome::Duplicate(s.reply.clone()))
        } else if seq < s.seq {
            Some(Outcome::Stale)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(client: u64, seq: u64, k: &str, v: &str) -> Request {
        Request {
            client,
            seq,
            op: Op::Put { key: Bytes::from(k.to_owned()), value: Bytes::from(v.to_owned()) },
        }
    }

    #[test]
    fn retried_request_is_executed_once_and_gets_its_original_reply() {
        let mut s = Snapshot::default();
        assert_eq!(s.execute(&put(1, 1, "k", "a")), Outcome::Applied(Reply::Done));
        let cas = Request {
            client: 2,
            seq: 1,
            op: Op::Cas { key: "k".into(), from: Some("a".into()), to: "b".into() },
        };
        assert_eq!(
            s.execute(&cas),
            Outcome::Applied(Reply::Cas { ok: true, current: Some("a".into()) })
        );
        // The same CAS retried must not apply again and must report success.
        assert_eq!(
            s.execute(&cas),
            Outcome::Duplicate(Reply::Cas { ok: true, current: Some("a".into()) })
        );
        assert_eq!(s.kv.get(&Bytes::from("k")), Some(&Bytes::from("b")));
        // A retry of client 1's old put must not overwrite the CAS.
        assert_eq!(s.execute(&put(1, 1, "k", "a")), Outcome::Duplicate(Reply::Done));
        assert_eq!(s.kv.get(&Bytes::from("k")), Some(&Bytes::from("b")));
        assert_eq!(s.execute(&put(1, 0, "k", "z")), Outcome::Stale);
        assert_eq!(s.lookup(1, 1), Some(Outcome::Duplicate(Reply::Done)));
        assert_eq!(s.lookup(1, 2), None);
    }

    #[test]
    fn cas_on_absent_key() {
        let mut s = Snapshot::default();
        let r = Request { client: 1, seq: 1, op: Op::Cas { key: "x".into(), from: None, to: "1".into() } };
        assert_eq!(s.execute(&r), Outcome::Applied(Reply::Cas { ok: true, current: None }));
        let r = Request { client: 1, seq: 2, op: Op::Cas { key: "x".into(), from: None, to: "2".into() } };
        assert_eq!(
            s.execute(&r),
            Outcome::Applied(Reply::Cas { ok: false, current: Some("1".into()) })
        );
    }

    #[test]
    fn digest_depends_on_slot_and_value() {
        let v = Value::Batch(std::sync::Arc::new(vec![put(1, 1, "k", "v")]));
        let a = digest_step(0, Slot(1), &v);
        assert_ne!(a, digest_step(0, Slot(2), &v));
        assert_ne!(a, digest_step(0, Slot(1), &Value::Noop));
        assert_eq!(a, digest_step(0, Slot(1), &v.clone()));
    }
}

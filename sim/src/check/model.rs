//! The checkers' reference key-value store with its own at-most-once
//! table, written from the protocol's rules (docs/protocol.md, `Execute`)
//! and apart from the core's `Snapshot::execute`: a bug in the core's
//! execution would otherwise run identically in the model and in every
//! replica, and every replica would agree with the model.
//!
//! Rules: a client's requests carry increasing sequence numbers; the
//! table keeps, per client, the last one applied and the reply it gave. A
//! request with that number again gets that reply and changes nothing; a
//! lower one changes nothing and is answered `Stale`; a higher one is
//! applied.

use std::collections::BTreeMap;

use bytes::Bytes;
use stutter_core::{ClientId, Op, Reply, Request, Seq};

/// What one request of the executed log did in the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Applied now, with this reply.
    Applied(Reply),
    /// The client's last applied request again: its recorded reply.
    Repeated(Reply),
    /// Older than the client's last applied request.
    Superseded,
}

/// The reference state: the key-value map and, per client, the last
/// applied sequence number with its reply.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Model {
    pub kv: BTreeMap<Bytes, Bytes>,
    pub last_applied: BTreeMap<ClientId, (Seq, Reply)>,
}

impl Model {
    /// Applies one request of the executed log.
    pub fn apply(&mut self, req: &Request) -> Effect {
        match self.last_applied.get(&req.client) {
            Some((last, reply)) if *last == req.seq => return Effect::Repeated(reply.clone()),
            Some((last, _)) if *last > req.seq => return Effect::Superseded,
            _ => {}
        }
        let reply = self.run(&req.op);
        self.last_applied.insert(req.client, (req.seq, reply.clone()));
        Effect::Applied(reply)
    }

    fn run(&mut self, op: &Op) -> Reply {
        match op {
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
                if current.as_ref() != from.as_ref() {
                    return Reply::Cas { ok: false, current };
                }
                self.kv.insert(key.clone(), to.clone());
                Reply::Cas { ok: true, current }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(client: ClientId, seq: Seq, op: Op) -> Request {
        Request { client, seq, op }
    }

    fn put(k: &str, v: &str) -> Op {
        Op::Put { key: Bytes::from(k.to_owned()), value: Bytes::from(v.to_owned()) }
    }

    #[test]
    fn a_retry_is_not_applied_again_and_an_older_request_not_at_all() {
        let mut m = Model::default();
        let cas = Op::Cas { key: "k".into(), from: None, to: "a".into() };
        assert_eq!(m.apply(&req(1, 1, cas.clone())), Effect::Applied(Reply::Cas { ok: true, current: None }));
        // Applied once: the retry gets the first reply, though the key has
        // changed since and the cas would now fail.
        assert_eq!(m.apply(&req(1, 1, cas)), Effect::Repeated(Reply::Cas { ok: true, current: None }));
        assert_eq!(m.apply(&req(2, 4, put("k", "b"))), Effect::Applied(Reply::Done));
        assert_eq!(m.apply(&req(2, 3, put("k", "old"))), Effect::Superseded);
        assert_eq!(m.kv.get(&Bytes::from("k")), Some(&Bytes::from("b")));
        assert_eq!(m.last_applied.get(&2), Some(&(4, Reply::Done)));
        let get = Op::Get { key: "k".into() };
        assert_eq!(m.apply(&req(3, 1, get)), Effect::Applied(Reply::Value(Some("b".into()))));
        let del = Op::Del { key: "k".into() };
        assert_eq!(m.apply(&req(3, 2, del)), Effect::Applied(Reply::Done));
        assert!(m.kv.is_empty());
    }
}

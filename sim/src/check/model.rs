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
//!
//! Registration: a `Register` (seq 0) hands out the next id from
//! `REGISTERED_BASE` up and gives it a session at seq 0. Only such ids
//! are clients: a request of an id never handed out (or below
//! `REGISTERED_BASE`) is refused as unknown. Any other request at seq 0,
//! or a `Register` elsewhere, is refused.
//!
//! Expiry (docs/protocol-sessions.md, "Session expiry"): the table holds at most
//! `limit` clients. A `Register` while it is full first drops the client
//! whose last applied request has the lowest slot (the lowest id among
//! equals). A request of an id handed out but without a session was
//! dropped: it is expired (not applied).

use std::collections::BTreeMap;

use bytes::Bytes;
use stutter_core::{ClientId, Op, Reply, Request, Seq, Slot, REGISTERED_BASE};

/// What one request of the executed log did in the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Applied now, with this reply.
    Applied(Reply),
    /// The client's last applied request again: its recorded reply.
    Repeated(Reply),
    /// Older than the client's last applied request.
    Superseded,
    /// The client's session was dropped: not applied.
    Expired,
    /// An id never handed out: not applied.
    Unknown,
    /// Breaks the rules of seq 0: not applied.
    Refused,
}

/// The reference state: the key-value map and, per client, the last
/// applied sequence number with its reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Model {
    pub kv: BTreeMap<Bytes, Bytes>,
    pub last_applied: BTreeMap<ClientId, (Seq, Reply)>,
    /// The slot of each client's last applied request.
    pub applied_in: BTreeMap<ClientId, Slot>,
    /// The slot being applied (set by the caller).
    pub slot: Slot,
    pub limit: usize,
    /// Ids handed out by `Register` so far.
    pub registered: u64,
    /// Whether a handed-out id without a session is expired (the
    /// protocol's rule). Off only under `Bug::RegisteredNoExpiry`, for
    /// the at-most-once check to catch what that lets through.
    pub registered_expiry: bool,
}

impl Default for Model {
    fn default() -> Model {
        Model::bounded(usize::MAX)
    }
}

impl Model {
    /// A model whose table holds at most `limit` clients.
    pub fn bounded(limit: usize) -> Model {
        Model {
            kv: BTreeMap::new(),
            last_applied: BTreeMap::new(),
            applied_in: BTreeMap::new(),
            slot: Slot::ZERO,
            limit: limit.max(1),
            registered: 0,
            registered_expiry: true,
        }
    }

    /// Applies one request of the executed log, in slot `self.slot`.
    pub fn apply(&mut self, req: &Request) -> Effect {
        let register = req.op == Op::Register;
        if register != (req.seq == 0) || (register && req.client >= REGISTERED_BASE) {
            return Effect::Refused;
        }
        if register {
            let client = REGISTERED_BASE + self.registered;
            self.registered += 1;
            if self.last_applied.len() >= self.limit {
                self.drop_least_recent();
            }
            let reply = Reply::Registered { client };
            self.last_applied.insert(client, (0, reply.clone()));
            self.applied_in.insert(client, self.slot);
            return Effect::Applied(reply);
        }
        match self.last_applied.get(&req.client) {
            Some((last, reply)) if *last == req.seq => return Effect::Repeated(reply.clone()),
            Some((last, _)) if *last > req.seq => return Effect::Superseded,
            Some(_) => {}
            None if req.client < REGISTERED_BASE
                || req.client - REGISTERED_BASE >= self.registered =>
            {
                return Effect::Unknown;
            }
            None if self.registered_expiry => return Effect::Expired,
            None => {
                if self.last_applied.len() >= self.limit {
                    self.drop_least_recent();
                }
            }
        }
        let reply = self.run(&req.op);
        self.last_applied
            .insert(req.client, (req.seq, reply.clone()));
        self.applied_in.insert(req.client, self.slot);
        Effect::Applied(reply)
    }

    fn drop_least_recent(&mut self) {
        // A scan: the model favours plainness over speed (the table is
        // full only in runs with a small limit).
        let Some(victim) = self
            .applied_in
            .iter()
            .min_by_key(|(c, s)| (**s, **c))
            .map(|(c, _)| *c)
        else {
            return;
        };
        self.applied_in.remove(&victim);
        self.last_applied.remove(&victim);
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
            // Applied in `apply` (assigns an id, touches no key).
            Op::Register => Reply::Malformed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(client: ClientId, seq: Seq, op: Op) -> Request {
        Request::new(client, seq, op)
    }

    fn put(k: &str, v: &str) -> Op {
        Op::Put {
            key: Bytes::from(k.to_owned()),
            value: Bytes::from(v.to_owned()),
        }
    }

    /// Registers a client in the next slot: its id.
    fn register(m: &mut Model, nonce: u64) -> ClientId {
        m.slot += 1;
        match m.apply(&Request::register(nonce)) {
            Effect::Applied(Reply::Registered { client }) => client,
            other => panic!("register gave {other:?}"),
        }
    }

    #[test]
    fn a_retry_is_not_applied_again_and_an_older_request_not_at_all() {
        let mut m = Model::default();
        let (a, b) = (register(&mut m, 1), register(&mut m, 2));
        let cas = Op::Cas {
            key: "k".into(),
            from: None,
            to: "a".into(),
        };
        assert_eq!(
            m.apply(&req(a, 1, cas.clone())),
            Effect::Applied(Reply::Cas {
                ok: true,
                current: None
            })
        );
        // Applied once: the retry gets the first reply, though the key has
        // changed since and the cas would now fail.
        assert_eq!(
            m.apply(&req(a, 1, cas)),
            Effect::Repeated(Reply::Cas {
                ok: true,
                current: None
            })
        );
        assert_eq!(
            m.apply(&req(b, 4, put("k", "b"))),
            Effect::Applied(Reply::Done)
        );
        assert_eq!(m.apply(&req(b, 3, put("k", "old"))), Effect::Superseded);
        assert_eq!(m.kv.get(&Bytes::from("k")), Some(&Bytes::from("b")));
        assert_eq!(m.last_applied.get(&b), Some(&(4, Reply::Done)));
        let get = Op::Get { key: "k".into() };
        assert_eq!(
            m.apply(&req(a, 2, get)),
            Effect::Applied(Reply::Value(Some("b".into())))
        );
        let del = Op::Del { key: "k".into() };
        assert_eq!(m.apply(&req(a, 3, del)), Effect::Applied(Reply::Done));
        assert!(m.kv.is_empty());
        // Ids never handed out, and seq 0 outside a register.
        assert_eq!(m.apply(&req(b + 1, 1, put("k", "x"))), Effect::Unknown);
        assert_eq!(m.apply(&req(7, 1, put("k", "x"))), Effect::Unknown);
        assert_eq!(m.apply(&req(a, 0, put("k", "x"))), Effect::Refused);
        assert!(m.kv.is_empty());
    }

    #[test]
    fn a_full_table_drops_the_least_recent_client_whose_requests_then_expire() {
        let mut m = Model::bounded(2);
        let (a, b) = (register(&mut m, 1), register(&mut m, 2)); // slots 1, 2
        m.slot = Slot(3);
        assert!(matches!(
            m.apply(&req(a, 1, put("k", "v"))),
            Effect::Applied(_)
        ));
        // A third client drops b (slot 2), the least recent.
        let c = register(&mut m, 3);
        assert_eq!(
            m.last_applied.keys().copied().collect::<Vec<_>>(),
            vec![a, c]
        );
        m.slot = Slot(5);
        for seq in [1, 2] {
            assert_eq!(m.apply(&req(b, seq, put("k", "x"))), Effect::Expired);
        }
        assert_eq!(m.kv.get(&Bytes::from("k")), Some(&Bytes::from("v")));
        // With expiry off (the injected bug), b runs as a new client.
        m.registered_expiry = false;
        assert!(matches!(
            m.apply(&req(b, 1, put("k", "x"))),
            Effect::Applied(_)
        ));
    }
}

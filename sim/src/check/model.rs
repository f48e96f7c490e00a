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
//! Expiry (docs/protocol.md, "Session expiry"): the table holds at most
//! `limit` clients. Applying a request of a client not in it while it is
//! full first drops the client whose last applied request has the lowest
//! slot (the lowest id among equals); dropped clients are remembered, the
//! last `remember` of them (`4 × limit` if 0). A request of a remembered client is expired
//! (not applied); so is a request of a client not in the table once some
//! dropped client has been forgotten, if it is above seq 1 or flagged a
//! retry (sent again after an attempt of uncertain outcome).
//!
//! Registration: a `Register` (seq 0) hands out the next id from
//! `REGISTERED_BASE` up and gives it a session at seq 0 (dropping the
//! least recent client first if the table is full). A dropped registered
//! id is not remembered: a request of an id handed out but without a
//! session is expired, of an id never handed out refused as unknown.
//! Any other request at seq 0, or a `Register` elsewhere, is refused.

use std::collections::{BTreeMap, VecDeque};

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
    /// A registered id never handed out: not applied.
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
    /// How many dropped clients are remembered.
    pub remember: usize,
    /// Dropped clients still remembered, the earliest dropped first.
    pub dropped: VecDeque<ClientId>,
    /// Whether some dropped client has been forgotten.
    pub forgot: bool,
    /// Whether the retry flag counts (the protocol's rule). Off only to
    /// judge the protocol as it was without the flag
    /// (`Bug::IgnoreRetryFlag`): the at-most-once check must then catch
    /// a resent first request running twice.
    pub retry_flag: bool,
    /// Ids handed out by `Register` so far.
    pub registered: u64,
    /// Whether a registered id without a session is expired (the
    /// protocol's rule). Off only under `Bug::RegisteredNoExpiry`, for
    /// the at-most-once check to catch what that lets through.
    pub registered_expiry: bool,
}

impl Default for Model {
    fn default() -> Model {
        Model::bounded(usize::MAX, usize::MAX)
    }
}

impl Model {
    /// A model whose table holds at most `limit` clients and remembers
    /// `remember` dropped ones (0: four per client of the limit).
    pub fn bounded(limit: usize, remember: usize) -> Model {
        let limit = limit.max(1);
        Model {
            kv: BTreeMap::new(),
            last_applied: BTreeMap::new(),
            applied_in: BTreeMap::new(),
            slot: Slot::ZERO,
            limit,
            remember: if remember == 0 {
                limit.saturating_mul(4)
            } else {
                remember
            },
            dropped: VecDeque::new(),
            forgot: false,
            retry_flag: true,
            registered: 0,
            registered_expiry: true,
        }
    }

    /// Applies one request of the executed log, in slot `self.slot`.
    pub fn apply(&mut self, req: &Request) -> Effect {
        self.apply_attempt(req, req.retry)
    }

    /// [`Model::apply`] of `req` as sent with retry flag `retry`.
    pub fn apply_attempt(&mut self, req: &Request, retry: bool) -> Effect {
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
            None if req.client >= REGISTERED_BASE
                && req.client - REGISTERED_BASE >= self.registered =>
            {
                return Effect::Unknown;
            }
            None if req.client >= REGISTERED_BASE && self.registered_expiry => {
                return Effect::Expired
            }
            None if req.client >= REGISTERED_BASE => {
                if self.last_applied.len() >= self.limit {
                    self.drop_least_recent();
                }
            }
            None => {
                if self.dropped.contains(&req.client)
                    || (self.forgot && (req.seq > 1 || (retry && self.retry_flag)))
                {
                    return Effect::Expired;
                }
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
        if victim >= REGISTERED_BASE {
            return;
        }
        self.dropped.push_back(victim);
        if self.dropped.len() > self.remember {
            self.dropped.pop_front();
            self.forgot = true;
        }
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
            // Applied in `apply_attempt` (assigns an id, touches no key).
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

    #[test]
    fn a_retry_is_not_applied_again_and_an_older_request_not_at_all() {
        let mut m = Model::default();
        let cas = Op::Cas {
            key: "k".into(),
            from: None,
            to: "a".into(),
        };
        assert_eq!(
            m.apply(&req(1, 1, cas.clone())),
            Effect::Applied(Reply::Cas {
                ok: true,
                current: None
            })
        );
        // Applied once: the retry gets the first reply, though the key has
        // changed since and the cas would now fail.
        assert_eq!(
            m.apply(&req(1, 1, cas)),
            Effect::Repeated(Reply::Cas {
                ok: true,
                current: None
            })
        );
        assert_eq!(
            m.apply(&req(2, 4, put("k", "b"))),
            Effect::Applied(Reply::Done)
        );
        assert_eq!(m.apply(&req(2, 3, put("k", "old"))), Effect::Superseded);
        assert_eq!(m.kv.get(&Bytes::from("k")), Some(&Bytes::from("b")));
        assert_eq!(m.last_applied.get(&2), Some(&(4, Reply::Done)));
        let get = Op::Get { key: "k".into() };
        assert_eq!(
            m.apply(&req(3, 1, get)),
            Effect::Applied(Reply::Value(Some("b".into())))
        );
        let del = Op::Del { key: "k".into() };
        assert_eq!(m.apply(&req(3, 2, del)), Effect::Applied(Reply::Done));
        assert!(m.kv.is_empty());
    }

    #[test]
    fn a_full_table_drops_the_least_recent_client_whose_requests_then_expire() {
        let mut m = Model::bounded(2, 0);
        for (slot, client) in [(1, 1), (2, 2), (3, 1)] {
            m.slot = Slot(slot);
            assert!(matches!(
                m.apply(&req(client, slot, put("k", "v"))),
                Effect::Applied(_)
            ));
        }
        m.slot = Slot(4);
        assert_eq!(
            m.apply(&req(3, 1, put("k", "w"))),
            Effect::Applied(Reply::Done)
        );
        assert_eq!(
            m.last_applied.keys().copied().collect::<Vec<_>>(),
            vec![1, 3]
        );
        assert_eq!(m.apply(&req(2, 2, put("k", "x"))), Effect::Expired);
        assert_eq!(m.kv.get(&Bytes::from("k")), Some(&Bytes::from("w")));
        // Eight more drops (4 × limit) forget client 2; then an unknown
        // client above seq 1 is expired, and so is its seq 1 flagged a
        // retry; a first attempt of seq 1 is applied.
        for c in 10..19 {
            m.slot = Slot(c);
            m.apply(&req(c, 1, put("k", "v")));
        }
        assert!(m.forgot && !m.dropped.contains(&2));
        assert_eq!(m.apply(&req(2, 5, put("k", "x"))), Effect::Expired);
        assert_eq!(
            m.apply_attempt(&req(2, 1, put("k", "x")), true),
            Effect::Expired
        );
        assert_eq!(
            m.apply(&Request {
                retry: true,
                ..req(2, 1, put("k", "x"))
            }),
            Effect::Expired
        );
        assert!(matches!(
            m.apply(&req(2, 1, put("k", "x"))),
            Effect::Applied(_)
        ));
    }
}

//! The replicated key-value state machine, with its session table for
//! at-most-once execution, and its snapshots.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::sessions::{is_registered_id, Bounds, Check, Session, SessionTable};
use crate::trace::SessionsSummary;
use crate::types::{ClientId, Op, Reply, Request, Seq, Slot, Value};

/// Everything a replica's execution produced up to `last_executed`.
/// Ordered maps only: snapshots serialize identically on every replica.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub last_executed: Slot,
    pub kv: BTreeMap<Bytes, Bytes>,
    /// At-most-once sessions, bounded (`sessions.rs`).
    pub sessions: SessionTable,
    /// Running digest of every executed slot (see [`digest_step`]).
    pub digest: u64,
}

/// Injected bugs of execution (`config::Bug::ExecuteDuplicate`,
/// `Bug::FailedCasWrites`), switched by the replica's configuration.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ExecBugs {
    /// A retry of the client's last executed request runs again.
    pub execute_duplicate: bool,
    /// The session check ignores the retry flag (the hole it closes).
    pub ignore_retry_flag: bool,
    /// A cas that does not match writes its new value anyway.
    pub failed_cas_writes: bool,
    /// A registered id whose session was evicted runs as a new client
    /// (the expiry rule of registered ids switched off).
    pub registered_no_expiry: bool,
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
    /// The client's session expired (`sessions.rs`): not executed now,
    /// and an earlier attempt may have been.
    Expired,
    /// A registered id never assigned: not executed, and never will be.
    Unknown,
    /// A request that breaks the rules of seq 0 (`Request::malformed`):
    /// a no-op, refused.
    Malformed,
}

impl Outcome {
    pub fn reply(&self) -> Reply {
        match self {
            Outcome::Applied(r) | Outcome::Duplicate(r) => r.clone(),
            Outcome::Stale => Reply::Stale,
            Outcome::Expired => Reply::SessionExpired,
            Outcome::Unknown => Reply::UnknownClient,
            Outcome::Malformed => Reply::Malformed,
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
    let mut h = fnv(
        if prev == 0 { FNV_OFFSET } else { prev },
        &slot.0.to_le_bytes(),
    );
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
                    Op::Register => fnv(h, b"r"),
                };
            }
        }
    }
    h
}

impl Snapshot {
    /// Executes one request, in slot `last_executed + 1`, with
    /// at-most-once semantics within `bounds` (`Config::session_limit`
    /// and `session_tombstones`, the same on every replica).
    pub fn execute(&mut self, req: &Request, bounds: Bounds) -> Outcome {
        self.execute_checked(req, bounds, ExecBugs::default())
    }

    /// [`Snapshot::execute`] with the injected bugs of execution switched
    /// by `bugs` (all off in [`Snapshot::execute`]).
    pub(crate) fn execute_checked(
        &mut self,
        req: &Request,
        bounds: Bounds,
        bugs: ExecBugs,
    ) -> Outcome {
        if req.malformed().is_some() {
            return Outcome::Malformed;
        }
        let slot = self.last_executed + 1;
        if req.op == Op::Register {
            let client = self.sessions.register(slot, bounds);
            return Outcome::Applied(Reply::Registered { client });
        }
        let retry = req.retry && !bugs.ignore_retry_flag;
        match self.sessions.check(req.client, req.seq, retry) {
            Check::Expired if bugs.registered_no_expiry && is_registered_id(req.client) => {}
            Check::Expired => return Outcome::Expired,
            Check::Unknown => return Outcome::Unknown,
            Check::Live(Some(s)) => {
                if req.seq == s.seq && !bugs.execute_duplicate {
                    return Outcome::Duplicate(s.reply.clone());
                }
                if req.seq < s.seq {
                    return Outcome::Stale;
                }
            }
            Check::Live(None) => {}
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
            // Handled above.
            Op::Register => return Outcome::Malformed,
        };
        let session = Session {
            seq: req.seq,
            reply: reply.clone(),
            slot,
        };
        self.sessions.record(req.client, session, bounds);
        Outcome::Applied(reply)
    }

    /// The session table as traces report it, with its bound.
    pub fn sessions_summary(&self, bounds: Bounds) -> SessionsSummary {
        SessionsSummary {
            clients: self.sessions.len() as u64,
            seq_sum: self.sessions.seq_sum(),
            limit: bounds.limit(),
        }
    }

    /// The recorded outcome of `(client, seq)` if it was executed already
    /// (or is older than what was executed, or would be expired, `retry`
    /// being its flag), without executing anything. Never for seq 0 (a
    /// `Register`, whose nonce has no session, executes each time), nor
    /// `Unknown`: an id this replica has not seen assigned may have been
    /// by a slot it has not executed yet, so only execution decides.
    pub fn lookup(&self, client: ClientId, seq: Seq, retry: bool) -> Option<Outcome> {
        if seq == 0 {
            return None;
        }
        let s = match self.sessions.check(client, seq, retry) {
            Check::Expired => return Some(Outcome::Expired),
            Check::Unknown => return None,
            Check::Live(s) => s?,
        };
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
        Request::new(
            client,
            seq,
            Op::Put {
                key: Bytes::from(k.to_owned()),
                value: Bytes::from(v.to_owned()),
            },
        )
    }

    /// `put`, flagged as a resend after an uncertain attempt.
    fn retried(client: u64, seq: u64, k: &str, v: &str) -> Request {
        Request {
            retry: true,
            ..put(client, seq, k, v)
        }
    }

    #[test]
    fn retried_request_is_executed_once_and_gets_its_original_reply() {
        let mut s = Snapshot::default();
        assert_eq!(
            s.execute(&put(1, 1, "k", "a"), Bounds::UNBOUNDED),
            Outcome::Applied(Reply::Done)
        );
        let cas = Request::new(
            2,
            1,
            Op::Cas {
                key: "k".into(),
                from: Some("a".into()),
                to: "b".into(),
            },
        );
        assert_eq!(
            s.execute(&cas, Bounds::UNBOUNDED),
            Outcome::Applied(Reply::Cas {
                ok: true,
                current: Some("a".into())
            })
        );
        // The same CAS retried must not apply again and must report success.
        let cas = Request { retry: true, ..cas };
        assert_eq!(
            s.execute(&cas, Bounds::UNBOUNDED),
            Outcome::Duplicate(Reply::Cas {
                ok: true,
                current: Some("a".into())
            })
        );
        assert_eq!(s.kv.get(&Bytes::from("k")), Some(&Bytes::from("b")));
        // A retry of client 1's old put must not overwrite the CAS.
        assert_eq!(
            s.execute(&put(1, 1, "k", "a"), Bounds::UNBOUNDED),
            Outcome::Duplicate(Reply::Done)
        );
        assert_eq!(s.kv.get(&Bytes::from("k")), Some(&Bytes::from("b")));
        // Seq 0 is reserved for `Register`: a no-op, refused.
        assert_eq!(
            s.execute(&put(1, 0, "k", "z"), Bounds::UNBOUNDED),
            Outcome::Malformed
        );
        assert_eq!(s.kv.get(&Bytes::from("k")), Some(&Bytes::from("b")));
        assert_eq!(s.lookup(1, 1, false), Some(Outcome::Duplicate(Reply::Done)));
        assert_eq!(s.lookup(1, 2, false), None);
        assert_eq!(
            s.execute(&put(1, 2, "j", "x"), Bounds::UNBOUNDED),
            Outcome::Applied(Reply::Done)
        );
        assert_eq!(
            s.execute(&put(1, 1, "j", "y"), Bounds::UNBOUNDED),
            Outcome::Stale
        );
        assert_eq!(s.lookup(1, 1, false), Some(Outcome::Stale));
    }

    #[test]
    fn cas_on_absent_key() {
        let mut s = Snapshot::default();
        let r = Request::new(
            1,
            1,
            Op::Cas {
                key: "x".into(),
                from: None,
                to: "1".into(),
            },
        );
        assert_eq!(
            s.execute(&r, Bounds::UNBOUNDED),
            Outcome::Applied(Reply::Cas {
                ok: true,
                current: None
            })
        );
        let r = Request::new(
            1,
            2,
            Op::Cas {
                key: "x".into(),
                from: None,
                to: "2".into(),
            },
        );
        assert_eq!(
            s.execute(&r, Bounds::UNBOUNDED),
            Outcome::Applied(Reply::Cas {
                ok: false,
                current: Some("1".into())
            })
        );
    }

    /// Executes `req` in the next slot, as `execute_committed` does.
    fn bounded(sessions: usize) -> Bounds {
        Bounds {
            sessions,
            tombstones: 0,
        }
    }

    fn step(s: &mut Snapshot, req: &Request, bounds: Bounds) -> Outcome {
        let o = s.execute(req, bounds);
        s.last_executed += 1;
        o
    }

    #[test]
    fn the_least_recently_executed_session_is_evicted_first() {
        let mut s = Snapshot::default();
        step(&mut s, &put(1, 1, "a", "1"), bounded(3)); // slot 1
        step(&mut s, &put(2, 1, "b", "1"), bounded(3)); // slot 2
        step(&mut s, &put(3, 1, "c", "1"), bounded(3)); // slot 3
        step(&mut s, &put(1, 2, "a", "2"), bounded(3)); // slot 4: client 1 is recent again
                                                        // A fourth client: client 2 (slot 2) is the least recent.
        assert_eq!(
            step(&mut s, &put(4, 1, "d", "1"), bounded(3)),
            Outcome::Applied(Reply::Done)
        );
        let live: Vec<_> = s.sessions.iter().map(|(c, x)| (*c, x.slot.0)).collect();
        assert_eq!(live, vec![(1, 4), (3, 3), (4, 5)]);
        assert_eq!(
            s.sessions.tombstones().copied().collect::<Vec<_>>(),
            vec![2]
        );
        // Within one slot, ties go by client id: 5 and 6 in slot 6 evict
        // client 3 (slot 3) then 1 (slot 4).
        s.execute(&put(6, 1, "f", "1"), bounded(3));
        s.execute(&put(5, 1, "e", "1"), bounded(3));
        s.last_executed += 1;
        assert_eq!(
            s.sessions.iter().map(|(c, _)| *c).collect::<Vec<_>>(),
            vec![4, 5, 6]
        );
        assert_eq!(
            s.sessions.tombstones().copied().collect::<Vec<_>>(),
            vec![2, 3, 1]
        );
        // Ties by id: a seventh client evicts 4 (slot 5), an eighth then
        // evicts 5 before 6 (both slot 6).
        step(&mut s, &put(7, 1, "g", "1"), bounded(3));
        step(&mut s, &put(8, 1, "h", "1"), bounded(3));
        assert_eq!(
            s.sessions.iter().map(|(c, _)| *c).collect::<Vec<_>>(),
            vec![6, 7, 8]
        );
        assert!(s.sessions.is_consistent());
    }

    #[test]
    fn an_evicted_client_is_answered_expired_and_not_executed() {
        let mut s = Snapshot::default();
        step(&mut s, &put(1, 1, "k", "a"), bounded(1));
        step(&mut s, &put(2, 1, "x", "1"), bounded(1)); // evicts client 1
                                                        // A retry of client 1's executed request, and a new one: neither runs.
        assert_eq!(
            step(&mut s, &put(1, 1, "k", "a"), bounded(1)),
            Outcome::Expired
        );
        assert_eq!(
            step(&mut s, &put(1, 2, "k", "b"), bounded(1)),
            Outcome::Expired
        );
        assert_eq!(s.kv.get(&Bytes::from("k")), Some(&Bytes::from("a")));
        assert_eq!(s.lookup(1, 2, false), Some(Outcome::Expired));
        assert_eq!(Outcome::Expired.reply(), Reply::SessionExpired);
        assert!(!Reply::SessionExpired.is_definite_rejection());
        // An expired request does not take a session nor evict one.
        assert_eq!(
            s.sessions.iter().map(|(c, _)| *c).collect::<Vec<_>>(),
            vec![2]
        );
    }

    #[test]
    fn tombstones_rotate_and_then_unknown_clients_past_seq_1_are_expired() {
        let limit = 1;
        let capacity = limit * crate::sessions::TOMBSTONES_PER_SESSION;
        let mut s = Snapshot::default();
        // Before any tombstone rotated out, a client never seen is new
        // whatever its seq (its seq 1 may have been a read).
        assert_eq!(
            step(&mut s, &put(100, 2, "k", "v"), bounded(limit)),
            Outcome::Applied(Reply::Done)
        );
        // Clients 1..=capacity+1 evict 100 and then each other.
        for c in 1..=capacity as u64 + 1 {
            step(&mut s, &put(c, 1, "k", "v"), bounded(limit));
        }
        // capacity + 1 evictions: 100 rotated out; the rest are tombstones.
        assert_eq!(s.sessions.forgotten(), 1);
        assert_eq!(s.sessions.tombstones().count(), capacity);
        assert!(!s.sessions.tombstones().any(|c| *c == 100));
        assert_eq!(
            step(&mut s, &put(100, 3, "k", "z"), bounded(limit)),
            Outcome::Expired
        );
        assert_eq!(
            step(&mut s, &put(999, 2, "k", "z"), bounded(limit)),
            Outcome::Expired
        );
        // A first attempt of seq 1 of a client never seen runs.
        assert_eq!(
            step(&mut s, &put(999, 1, "k", "w"), bounded(limit)),
            Outcome::Applied(Reply::Done)
        );
        assert!(s.sessions.is_consistent());
    }

    #[test]
    fn a_retried_first_request_whose_tombstone_was_forgotten_is_expired_not_run_again() {
        let limit = 1;
        let capacity = limit * crate::sessions::TOMBSTONES_PER_SESSION;
        let mut s = Snapshot::default();
        // Before any tombstone is forgotten, an unknown client never ran
        // anything: its flagged seq 1 (the first attempt was lost) runs.
        assert_eq!(
            step(&mut s, &retried(50, 1, "k", "0"), bounded(limit)),
            Outcome::Applied(Reply::Done)
        );
        // Client 7's seq 1 executes; the client never hears of it.
        assert_eq!(
            step(&mut s, &put(7, 1, "k", "a"), bounded(limit)),
            Outcome::Applied(Reply::Done)
        );
        // capacity + 1 new clients evict 7 and then push its tombstone out.
        for c in 100..=100 + capacity as u64 {
            step(&mut s, &put(c, 1, "x", "1"), bounded(limit));
        }
        assert!(s.sessions.get(&7).is_none() && !s.sessions.tombstones().any(|c| *c == 7));
        assert!(s.sessions.forgotten() > 0);
        let before = s.clone();
        // The client's resend is flagged: expired (its first attempt may
        // have run, as here), and nothing changes but the slot.
        assert_eq!(
            step(&mut s, &retried(7, 1, "k", "b"), bounded(limit)),
            Outcome::Expired
        );
        assert_eq!(s.kv, before.kv);
        assert_eq!(s.sessions, before.sessions);
        assert_eq!(s.lookup(7, 1, true), Some(Outcome::Expired));
        // The same resend with the flag ignored (the injected bug) is the
        // hole: it runs a second time.
        let mut holed = before.clone();
        let bugs = ExecBugs {
            ignore_retry_flag: true,
            ..ExecBugs::default()
        };
        assert_eq!(
            holed.execute_checked(&retried(7, 1, "k", "b"), bounded(limit), bugs),
            Outcome::Applied(Reply::Done)
        );
        assert_eq!(holed.kv.get(&Bytes::from("k")), Some(&Bytes::from("b")));
        // A first attempt of another new client still runs.
        assert_eq!(
            step(&mut s, &put(8, 1, "k", "c"), bounded(limit)),
            Outcome::Applied(Reply::Done)
        );
        assert!(s.sessions.is_consistent());
    }

    #[test]
    fn replicas_executing_the_same_requests_hold_equal_snapshots_that_round_trip() {
        let reqs: Vec<Request> = (0..200u64)
            .map(|i| put(i % 37 + (i / 50) * 100, i / 37 + 1, "k", &i.to_string()))
            .collect();
        let run = || {
            let mut s = Snapshot::default();
            for (i, r) in reqs.iter().enumerate() {
                s.execute(r, bounded(5));
                if i % 3 == 2 {
                    s.last_executed += 1; // three requests a slot
                }
            }
            s
        };
        let (a, b) = (run(), run());
        assert_eq!(a, b);
        assert!(a.sessions.len() <= 5 && a.sessions.forgotten() > 0);
        // The session table round trips (the kv map's byte keys are not
        // JSON keys; the replica's bincode round trip is its own test).
        let bytes = serde_json::to_vec(&a.sessions).expect("serialize");
        assert_eq!(bytes, serde_json::to_vec(&b.sessions).expect("serialize"));
        let back = Snapshot {
            sessions: serde_json::from_slice(&bytes).expect("deserialize"),
            ..a.clone()
        };
        assert_eq!(back, a);
        assert!(back.sessions.is_consistent());
        // Both continue alike after the round trip.
        let (mut a, mut back) = (a, back);
        assert_eq!(
            step(&mut a, &put(5000, 1, "q", "1"), bounded(5)),
            step(&mut back, &put(5000, 1, "q", "1"), bounded(5))
        );
        assert_eq!(a, back);
    }

    #[test]
    fn a_table_with_a_client_both_live_and_buried_does_not_deserialize() {
        let bad = r#"{"sessions":{"1":{"seq":1,"reply":"Done","slot":1}},"tombstones":[1],"forgotten":0}"#;
        assert!(serde_json::from_str::<crate::sessions::SessionTable>(bad).is_err());
        let twice = r#"{"sessions":{},"tombstones":[2,2],"forgotten":0}"#;
        assert!(serde_json::from_str::<crate::sessions::SessionTable>(twice).is_err());
    }

    proptest::proptest! {
        /// Any sequence of requests of a few clients, executed in slots of
        /// up to three with small bounds. Each client behaves as clients
        /// do: it resends its current seq (flagged a retry) or moves on to
        /// a higher one (skipping some, as reads served outside the log
        /// do), and flags some first sends too (a client may be
        /// conservative). The table never exceeds its bound, its index
        /// stays consistent, a request of an evicted client never executes,
        /// no `(client, seq)` ever executes twice, and the table
        /// round-trips through serialization unchanged.
        #[test]
        fn bounded_tables_stay_bounded_consistent_and_at_most_once(
            reqs in proptest::collection::vec((0u64..12, 0u64..3, 0usize..3, proptest::bool::weighted(0.1)), 1..200),
            limit in 1usize..5,
            tombstones in 0usize..6,
        ) {
            let bounds = Bounds { sessions: limit, tombstones };
            let mut s = Snapshot::default();
            let mut current = std::collections::BTreeMap::<u64, u64>::new();
            let mut executed = std::collections::BTreeSet::new();
            for (client, advance, gap, flag_anyway) in reqs {
                let buried_before = s.sessions.tombstones().any(|c| *c == client);
                let seq = current.entry(client).or_insert(0);
                let resend = advance == 0 && *seq > 0;
                *seq += if resend { 0 } else { advance.max(1) };
                let seq = *seq;
                let retry = resend || flag_anyway;
                let out = s.execute(&Request { retry, ..put(client, seq, "k", "v") }, bounds);
                if buried_before {
                    proptest::prop_assert_eq!(&out, &Outcome::Expired);
                }
                if matches!(out, Outcome::Applied(_)) {
                    proptest::prop_assert!(executed.insert((client, seq)), "({}, {}) ran twice", client, seq);
                }
                proptest::prop_assert!(s.sessions.len() <= limit);
                s.last_executed += gap as u64;
            }
            proptest::prop_assert!(s.sessions.is_consistent());
            let bytes = serde_json::to_vec(&s.sessions).expect("serialize");
            let back: SessionTable = serde_json::from_slice(&bytes).expect("deserialize");
            proptest::prop_assert_eq!(back, s.sessions);
        }
    }

    const BASE: u64 = crate::types::REGISTERED_BASE;

    /// Executes a `Register` of `nonce` in the next slot; the id assigned.
    fn register(s: &mut Snapshot, nonce: u64, bounds: Bounds) -> u64 {
        match step(s, &Request::register(nonce, false), bounds) {
            Outcome::Applied(Reply::Registered { client }) => client,
            other => panic!("register gave {other:?}"),
        }
    }

    #[test]
    fn register_assigns_ids_in_order_with_a_session_at_seq_0() {
        let mut s = Snapshot::default();
        assert_eq!(register(&mut s, 77, bounded(4)), BASE);
        assert_eq!(
            register(&mut s, 77, bounded(4)),
            BASE + 1,
            "a resent register wastes an id"
        );
        assert_eq!(s.sessions.registered(), 2);
        assert_eq!(
            s.sessions.get(&BASE),
            Some(&Session {
                seq: 0,
                reply: Reply::Registered { client: BASE },
                slot: Slot(1)
            })
        );
        assert!(s.sessions.get(&77).is_none(), "the nonce takes no session");
        // The first request of the assigned id runs under its session.
        assert_eq!(
            step(&mut s, &put(BASE, 1, "k", "a"), bounded(4)),
            Outcome::Applied(Reply::Done)
        );
        assert_eq!(
            step(&mut s, &put(BASE, 1, "k", "b"), bounded(4)),
            Outcome::Duplicate(Reply::Done)
        );
        assert_eq!(
            s.sessions_summary(bounded(4)),
            SessionsSummary {
                clients: 2,
                seq_sum: 1,
                limit: Some(4)
            }
        );
        assert_eq!(
            s.sessions_summary(Bounds::UNBOUNDED).limit,
            None,
            "no bound, no limit in traces"
        );
        // A register is never answered from the table.
        assert_eq!(s.lookup(77, 0, false), None);
        assert_eq!(s.lookup(77, 0, true), None);
    }

    #[test]
    fn a_delayed_unflagged_original_of_an_evicted_registered_client_is_expired() {
        let mut s = Snapshot::default();
        let id = register(&mut s, 5, bounded(1));
        // The client's flagged resend of seq 1 executes first.
        assert_eq!(
            step(
                &mut s,
                &Request {
                    retry: true,
                    ..put(id, 1, "k", "a")
                },
                bounded(1)
            ),
            Outcome::Applied(Reply::Done)
        );
        // Other clients evict it; registered ids leave no tombstone, and
        // however many are evicted, nothing is forgotten.
        for nonce in 100..120 {
            register(&mut s, nonce, bounded(1));
        }
        assert!(s.sessions.get(&id).is_none());
        assert_eq!(s.sessions.tombstones().count(), 0);
        assert_eq!(s.sessions.forgotten(), 0);
        let before = s.clone();
        // The delayed unflagged original is chosen now: expired, not run.
        assert_eq!(
            step(&mut s, &put(id, 1, "k", "b"), bounded(1)),
            Outcome::Expired
        );
        assert_eq!(s.kv, before.kv);
        assert_eq!(s.sessions, before.sessions);
        assert_eq!(s.lookup(id, 1, false), Some(Outcome::Expired));
        assert_eq!(s.lookup(id, 7, false), Some(Outcome::Expired));
        // With the expiry of registered ids switched off (the injected
        // bug), the original runs a second time.
        let mut holed = before.clone();
        let bugs = ExecBugs {
            registered_no_expiry: true,
            ..ExecBugs::default()
        };
        assert_eq!(
            holed.execute_checked(&put(id, 1, "k", "b"), bounded(1), bugs),
            Outcome::Applied(Reply::Done)
        );
        assert!(s.sessions.is_consistent());
    }

    #[test]
    fn an_id_never_assigned_is_unknown_and_only_execution_says_so() {
        let mut s = Snapshot::default();
        let id = register(&mut s, 5, bounded(4));
        let before = s.clone();
        assert_eq!(
            step(&mut s, &put(id + 1, 1, "k", "a"), bounded(4)),
            Outcome::Unknown
        );
        assert_eq!(
            step(
                &mut s,
                &Request {
                    retry: true,
                    ..put(u64::MAX, 9, "k", "a")
                },
                bounded(4)
            ),
            Outcome::Unknown
        );
        assert_eq!(Outcome::Unknown.reply(), Reply::UnknownClient);
        assert!(Reply::UnknownClient.is_definite_rejection());
        assert_eq!(
            (s.kv.clone(), s.sessions.clone()),
            (before.kv, before.sessions)
        );
        // The leader does not answer it early: the register that assigns
        // it may be in a slot it has not executed yet.
        assert_eq!(s.lookup(id + 1, 1, false), None);
        assert!(
            s.sessions.first_request_takes_session(id + 1),
            "a read of it goes through the log"
        );
        // Once assigned, it is a client like any other.
        assert_eq!(register(&mut s, 6, bounded(4)), id + 1);
        assert_eq!(
            step(&mut s, &put(id + 1, 1, "k", "a"), bounded(4)),
            Outcome::Applied(Reply::Done)
        );
    }

    #[test]
    fn malformed_registers_and_seq_0_requests_are_no_ops_with_a_definite_reply() {
        let mut s = Snapshot::default();
        let bad = [
            Request {
                client: 3,
                seq: 1,
                op: Op::Register,
                retry: false,
            },
            Request::register(BASE, false),
            Request::register(u64::MAX, true),
            put(3, 0, "k", "a"),
            Request::new(3, 0, Op::Get { key: "k".into() }),
        ];
        for r in &bad {
            assert!(r.malformed().is_some(), "{r:?}");
            assert_eq!(step(&mut s, r, bounded(2)), Outcome::Malformed, "{r:?}");
        }
        assert_eq!(
            s,
            Snapshot {
                last_executed: Slot(bad.len() as u64),
                ..Snapshot::default()
            }
        );
        assert!(Reply::Malformed.is_definite_rejection());
        assert_eq!(Request::register(BASE - 1, true).malformed(), None);
        assert_eq!(put(3, 1, "k", "a").malformed(), None);
    }

    #[test]
    fn the_register_counter_survives_a_snapshot_round_trip() {
        let mut s = Snapshot::default();
        for nonce in 0..5 {
            register(&mut s, nonce, bounded(2));
        }
        step(&mut s, &put(7, 1, "k", "a"), bounded(2));
        assert_eq!(s.sessions.registered(), 5);
        // The kv map's byte keys are not JSON keys: the table round-trips
        // on its own (the replica's bincode round trip is its own test).
        let bytes = serde_json::to_vec(&s.sessions).expect("serialize");
        let mut back = Snapshot {
            sessions: serde_json::from_slice(&bytes).expect("deserialize"),
            ..s.clone()
        };
        assert_eq!(back, s);
        assert_eq!(back.sessions.registered(), 5);
        // The restored table goes on assigning after the last id, and
        // still expires the evicted ones.
        assert_eq!(register(&mut back, 9, bounded(2)), BASE + 5);
        assert_eq!(
            step(&mut back, &put(BASE, 1, "k", "b"), bounded(2)),
            Outcome::Expired
        );
        // A table that claims a session for an id beyond its counter does
        // not deserialize.
        let bad = format!(
            r#"{{"sessions":{{"{}":{{"seq":0,"reply":"Done","slot":1}}}},"tombstones":[],"forgotten":0,"registered":0}}"#,
            BASE
        );
        assert!(serde_json::from_str::<SessionTable>(&bad).is_err());
        let buried = format!(
            r#"{{"sessions":{{}},"tombstones":[{}],"forgotten":0,"registered":1}}"#,
            BASE
        );
        assert!(serde_json::from_str::<SessionTable>(&buried).is_err());
    }

    /// One step of the registered clients' schedule: what a client does,
    /// or a request sent before chosen again.
    #[derive(Clone, Debug)]
    enum Act {
        /// Client `c` registers (flagged a retry or not).
        Register(usize, bool),
        /// Client `c` sends its next request, or resends its current one
        /// flagged.
        Send(usize, bool),
        /// The `i`-th request ever sent (mod their number) is chosen again.
        Replay(usize),
        /// The slot advances by this much.
        Gap(u64),
    }

    fn act() -> impl proptest::strategy::Strategy<Value = Act> {
        use proptest::prelude::*;
        prop_oneof![
            2 => (0usize..5, proptest::bool::weighted(0.3)).prop_map(|(c, r)| Act::Register(c, r)),
            4 => (0usize..5, proptest::bool::weighted(0.3)).prop_map(|(c, r)| Act::Send(c, r)),
            3 => (0usize..1000).prop_map(Act::Replay),
            1 => (0u64..3).prop_map(Act::Gap),
        ]
    }

    /// Runs a schedule of registered clients; `Err` names a `(client,
    /// seq)` of a registered client that executed twice.
    fn run_registered(acts: &[Act], bounds: Bounds, bugs: ExecBugs) -> Result<Snapshot, String> {
        let mut s = Snapshot::default();
        // Per client: the id it uses (from the first `Registered` it got
        // since it last lost one) and its current seq.
        let mut ids: Vec<Option<(u64, u64)>> = vec![None; 5];
        let mut sent: Vec<Request> = Vec::new();
        let mut executed = std::collections::BTreeSet::new();
        for a in acts {
            let req = match *a {
                Act::Register(c, retry) => Request::register(c as u64 + 1, retry),
                Act::Send(c, resend) => match &mut ids[c] {
                    None => continue,
                    Some((id, seq)) => {
                        if !resend || *seq == 0 {
                            *seq += 1;
                        }
                        Request {
                            retry: resend,
                            ..put(*id, *seq, "k", &format!("{id}/{seq}"))
                        }
                    }
                },
                Act::Replay(i) if !sent.is_empty() => sent[i % sent.len()].clone(),
                Act::Replay(_) => continue,
                Act::Gap(g) => {
                    s.last_executed += g;
                    continue;
                }
            };
            sent.push(req.clone());
            let out = s.execute_checked(&req, bounds, bugs);
            match (&req.op, &out) {
                (Op::Register, Outcome::Applied(Reply::Registered { client })) => {
                    let c = (req.client - 1) as usize;
                    if ids[c].is_none() {
                        ids[c] = Some((*client, 0));
                    }
                }
                (_, Outcome::Applied(_))
                    if req.client >= BASE && !executed.insert((req.client, req.seq)) =>
                {
                    return Err(format!("({}, {}) ran twice", req.client, req.seq));
                }
                (_, Outcome::Expired) => {
                    // The client whose id this is continues under a new one.
                    for slot in ids.iter_mut() {
                        if slot.is_some_and(|(id, _)| id == req.client) {
                            *slot = None;
                        }
                    }
                }
                (_, Outcome::Unknown | Outcome::Malformed) => {
                    return Err(format!("{req:?} refused: {out:?}"))
                }
                _ => {}
            }
            if s.sessions.len() > bounds.sessions.max(1) || !s.sessions.is_consistent() {
                return Err(format!("table out of bounds or inconsistent after {req:?}"));
            }
        }
        Ok(s)
    }

    #[test]
    fn the_registered_schedule_check_catches_registered_ids_without_expiry() {
        // Client 0 registers, sends seq 1; client 1's registers evict it;
        // seq 1 is chosen again.
        let acts = [
            Act::Register(0, false),
            Act::Send(0, false),
            Act::Register(1, false),
            Act::Register(1, false),
            Act::Replay(1),
        ];
        assert!(run_registered(&acts, bounded(1), ExecBugs::default()).is_ok());
        let bugs = ExecBugs {
            registered_no_expiry: true,
            ..ExecBugs::default()
        };
        assert!(run_registered(&acts, bounded(1), bugs).is_err());
    }

    proptest::proptest! {
        /// Registered clients with a small table: any request ever sent
        /// (registers, delayed originals, flagged resends) may be chosen
        /// again at any later slot. No `(client, seq)` of a registered
        /// client executes twice, no honest request is refused as unknown,
        /// the table stays bounded and consistent, and it round-trips.
        #[test]
        fn registered_clients_execute_each_request_at_most_once(
            acts in proptest::collection::vec(act(), 1..200),
            limit in 1usize..4,
        ) {
            let bounds = Bounds { sessions: limit, tombstones: 0 };
            let s = run_registered(&acts, bounds, ExecBugs::default());
            proptest::prop_assert!(s.is_ok(), "{}", s.err().unwrap_or_default());
            let s = s.unwrap_or_default();
            proptest::prop_assert_eq!(s.sessions.tombstones().count(), 0);
            let back: SessionTable = serde_json::from_slice(&serde_json::to_vec(&s.sessions).expect("serialize")).expect("deserialize");
            proptest::prop_assert_eq!(back, s.sessions);
        }
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

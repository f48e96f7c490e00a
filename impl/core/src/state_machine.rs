//! The replicated key-value state machine, with its session table for
//! at-most-once execution, and its snapshots.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::sessions::{is_registered_id, reported_limit, Check, Session, SessionTable};
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
    /// An id the log never assigned: not executed, and never will be.
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
    /// at-most-once semantics within `limit` sessions
    /// (`Config::session_limit`, the same on every replica).
    pub fn execute(&mut self, req: &Request, limit: usize) -> Outcome {
        self.execute_checked(req, limit, ExecBugs::default())
    }

    /// [`Snapshot::execute`] with the injected bugs of execution switched
    /// by `bugs` (all off in [`Snapshot::execute`]).
    pub(crate) fn execute_checked(
        &mut self,
        req: &Request,
        limit: usize,
        bugs: ExecBugs,
    ) -> Outcome {
        if req.malformed().is_some() {
            return Outcome::Malformed;
        }
        let slot = self.last_executed + 1;
        if req.op == Op::Register {
            let client = self.sessions.register(slot, limit);
            return Outcome::Applied(Reply::Registered { client });
        }
        match self.sessions.check(req.client) {
            Check::Expired if bugs.registered_no_expiry && is_registered_id(req.client) => {}
            Check::Expired => return Outcome::Expired,
            Check::Unknown => return Outcome::Unknown,
            Check::Live(s) => {
                if req.seq == s.seq && !bugs.execute_duplicate {
                    return Outcome::Duplicate(s.reply.clone());
                }
                if req.seq < s.seq {
                    return Outcome::Stale;
                }
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
            // Handled above.
            Op::Register => return Outcome::Malformed,
        };
        let session = Session {
            seq: req.seq,
            reply: reply.clone(),
            slot,
        };
        self.sessions.record(req.client, session, limit);
        Outcome::Applied(reply)
    }

    /// The session table as traces report it, with its bound.
    pub fn sessions_summary(&self, limit: usize) -> SessionsSummary {
        SessionsSummary {
            clients: self.sessions.len() as u64,
            seq_sum: self.sessions.seq_sum(),
            limit: reported_limit(limit),
        }
    }

    /// The recorded outcome of `(client, seq)` if it was executed already
    /// (or is older than what was executed, or would be expired), without
    /// executing anything. Never for seq 0 (a `Register`, whose nonce has
    /// no session, executes each time), nor `Unknown`: an id this replica
    /// has not seen assigned may have been by a slot it has not executed
    /// yet, so only execution decides.
    pub fn lookup(&self, client: ClientId, seq: Seq) -> Option<Outcome> {
        if seq == 0 {
            return None;
        }
        let s = match self.sessions.check(client) {
            Check::Expired => return Some(Outcome::Expired),
            Check::Unknown => return None,
            Check::Live(s) => s,
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
    use crate::sessions::UNBOUNDED;

    const BASE: u64 = crate::types::REGISTERED_BASE;

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

    fn cas(client: u64, seq: u64, k: &str, from: Option<&str>, to: &str) -> Request {
        Request::new(
            client,
            seq,
            Op::Cas {
                key: Bytes::from(k.to_owned()),
                from: from.map(|f| Bytes::from(f.to_owned())),
                to: Bytes::from(to.to_owned()),
            },
        )
    }

    /// Executes `req` in the next slot, as `execute_committed` does.
    fn step(s: &mut Snapshot, req: &Request, limit: usize) -> Outcome {
        let o = s.execute(req, limit);
        s.last_executed += 1;
        o
    }

    /// Executes a `Register` of `nonce` in the next slot; the id assigned.
    fn register(s: &mut Snapshot, nonce: u64, limit: usize) -> u64 {
        match step(s, &Request::register(nonce), limit) {
            Outcome::Applied(Reply::Registered { client }) => client,
            other => panic!("register gave {other:?}"),
        }
    }

    #[test]
    fn a_retried_request_is_executed_once_and_gets_its_original_reply() {
        let mut s = Snapshot::default();
        let (a, b) = (
            register(&mut s, 1, UNBOUNDED),
            register(&mut s, 2, UNBOUNDED),
        );
        assert_eq!(
            step(&mut s, &put(a, 1, "k", "a"), UNBOUNDED),
            Outcome::Applied(Reply::Done)
        );
        let swap = cas(b, 1, "k", Some("a"), "b");
        let swapped = Reply::Cas {
            ok: true,
            current: Some("a".into()),
        };
        assert_eq!(
            step(&mut s, &swap, UNBOUNDED),
            Outcome::Applied(swapped.clone())
        );
        // The same cas resent must not apply again and must report success.
        assert_eq!(step(&mut s, &swap, UNBOUNDED), Outcome::Duplicate(swapped));
        assert_eq!(s.kv.get(&Bytes::from("k")), Some(&Bytes::from("b")));
        // A resend of a's old put must not overwrite the cas.
        assert_eq!(
            step(&mut s, &put(a, 1, "k", "a"), UNBOUNDED),
            Outcome::Duplicate(Reply::Done)
        );
        assert_eq!(s.kv.get(&Bytes::from("k")), Some(&Bytes::from("b")));
        // Seq 0 is reserved for `Register`: a no-op, refused.
        assert_eq!(
            step(&mut s, &put(a, 0, "k", "z"), UNBOUNDED),
            Outcome::Malformed
        );
        assert_eq!(s.kv.get(&Bytes::from("k")), Some(&Bytes::from("b")));
        assert_eq!(s.lookup(a, 1), Some(Outcome::Duplicate(Reply::Done)));
        assert_eq!(s.lookup(a, 2), None);
        assert_eq!(
            step(&mut s, &put(a, 2, "j", "x"), UNBOUNDED),
            Outcome::Applied(Reply::Done)
        );
        assert_eq!(
            step(&mut s, &put(a, 1, "j", "y"), UNBOUNDED),
            Outcome::Stale
        );
        assert_eq!(s.lookup(a, 1), Some(Outcome::Stale));
    }

    #[test]
    fn cas_on_absent_key() {
        let mut s = Snapshot::default();
        let id = register(&mut s, 1, UNBOUNDED);
        assert_eq!(
            step(&mut s, &cas(id, 1, "x", None, "1"), UNBOUNDED),
            Outcome::Applied(Reply::Cas {
                ok: true,
                current: None
            })
        );
        assert_eq!(
            step(&mut s, &cas(id, 2, "x", None, "2"), UNBOUNDED),
            Outcome::Applied(Reply::Cas {
                ok: false,
                current: Some("1".into())
            })
        );
    }

    #[test]
    fn the_least_recently_executed_session_is_evicted_first() {
        let mut s = Snapshot::default();
        let ids: Vec<u64> = (1..=3).map(|n| register(&mut s, n, 3)).collect(); // slots 1-3
        step(&mut s, &put(ids[0], 1, "a", "1"), 3); // slot 4: the first is recent again
                                                    // A fourth client: the second (slot 2) is the least recent.
        let d = register(&mut s, 4, 3); // slot 5
        let live: Vec<_> = s
            .sessions
            .iter()
            .map(|(c, x)| (*c - BASE, x.slot.0))
            .collect();
        assert_eq!(live, vec![(0, 4), (2, 3), (3, 5)]);
        // Within one slot, ties go by client id: two registers in slot 6
        // evict the third (slot 3), then the first (slot 4).
        s.execute(&Request::register(5), 3);
        s.execute(&Request::register(6), 3);
        s.last_executed += 1;
        assert_eq!(
            s.sessions.iter().map(|(c, _)| *c).collect::<Vec<_>>(),
            vec![d, BASE + 4, BASE + 5]
        );
        // Ties by id: a seventh client evicts d (slot 5), an eighth then
        // evicts BASE + 4 before BASE + 5 (both slot 6).
        register(&mut s, 7, 3);
        register(&mut s, 8, 3);
        assert_eq!(
            s.sessions
                .iter()
                .map(|(c, _)| *c - BASE)
                .collect::<Vec<_>>(),
            vec![5, 6, 7]
        );
        assert!(s.sessions.is_consistent());
    }

    #[test]
    fn an_evicted_client_is_expired_whatever_its_seq_and_nothing_is_remembered_of_it() {
        let mut s = Snapshot::default();
        let id = register(&mut s, 5, 1);
        assert_eq!(
            step(&mut s, &put(id, 1, "k", "a"), 1),
            Outcome::Applied(Reply::Done)
        );
        // Other clients evict it; however many are evicted, the table
        // holds one session and the counter.
        for nonce in 100..120 {
            register(&mut s, nonce, 1);
        }
        assert!(s.sessions.get(&id).is_none());
        assert_eq!(s.sessions.len(), 1);
        let before = s.clone();
        // A delayed resend of seq 1, and a new request: neither runs.
        for seq in [1, 2, 7] {
            assert_eq!(step(&mut s, &put(id, seq, "k", "b"), 1), Outcome::Expired);
            assert_eq!(s.lookup(id, seq), Some(Outcome::Expired));
        }
        assert_eq!(s.kv, before.kv);
        assert_eq!(s.sessions, before.sessions);
        assert_eq!(Outcome::Expired.reply(), Reply::SessionExpired);
        assert!(!Reply::SessionExpired.is_definite_rejection());
        // With the expiry of registered ids switched off (the injected
        // bug), the resend runs a second time.
        let mut holed = before.clone();
        let bugs = ExecBugs {
            registered_no_expiry: true,
            ..ExecBugs::default()
        };
        assert_eq!(
            holed.execute_checked(&put(id, 1, "k", "b"), 1, bugs),
            Outcome::Applied(Reply::Done)
        );
        assert!(s.sessions.is_consistent());
    }

    #[test]
    fn an_id_the_log_never_assigned_is_unknown_and_only_execution_says_so() {
        let mut s = Snapshot::default();
        let id = register(&mut s, 5, 4);
        let before = s.clone();
        // Not yet assigned, or below 2^63 (a nonce, never a client id).
        for req in [
            put(id + 1, 1, "k", "a"),
            put(u64::MAX, 9, "k", "a"),
            put(5, 1, "k", "a"),
        ] {
            assert_eq!(step(&mut s, &req, 4), Outcome::Unknown, "{req:?}");
        }
        assert_eq!(
            step(&mut s, &Request::new(5, 1, Op::Get { key: "k".into() }), 4),
            Outcome::Unknown,
            "a read of an unregistered id is never in the log; if it were, it would not run"
        );
        assert_eq!(Outcome::Unknown.reply(), Reply::UnknownClient);
        assert!(Reply::UnknownClient.is_definite_rejection());
        assert_eq!(
            (s.kv.clone(), s.sessions.clone()),
            (before.kv, before.sessions)
        );
        // The leader does not answer it early: the register that assigns
        // it may be in a slot it has not executed yet.
        assert_eq!(s.lookup(id + 1, 1), None);
        // Once assigned, it is a client like any other.
        assert_eq!(register(&mut s, 6, 4), id + 1);
        assert_eq!(
            step(&mut s, &put(id + 1, 1, "k", "a"), 4),
            Outcome::Applied(Reply::Done)
        );
    }

    #[test]
    fn register_assigns_ids_in_order_with_a_session_at_seq_0() {
        let mut s = Snapshot::default();
        assert_eq!(register(&mut s, 77, 4), BASE);
        assert_eq!(
            register(&mut s, 77, 4),
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
            step(&mut s, &put(BASE, 1, "k", "a"), 4),
            Outcome::Applied(Reply::Done)
        );
        assert_eq!(
            step(&mut s, &put(BASE, 1, "k", "b"), 4),
            Outcome::Duplicate(Reply::Done)
        );
        assert_eq!(
            s.sessions_summary(4),
            SessionsSummary {
                clients: 2,
                seq_sum: 1,
                limit: Some(4)
            }
        );
        assert_eq!(
            s.sessions_summary(UNBOUNDED).limit,
            None,
            "no bound, no limit in traces"
        );
        // A register is never answered from the table.
        assert_eq!(s.lookup(77, 0), None);
    }

    #[test]
    fn malformed_registers_and_seq_0_requests_are_no_ops_with_a_definite_reply() {
        let mut s = Snapshot::default();
        let bad = [
            Request {
                client: 3,
                seq: 1,
                op: Op::Register,
            },
            Request::register(BASE),
            Request::register(u64::MAX),
            put(BASE, 0, "k", "a"),
            Request::new(3, 0, Op::Get { key: "k".into() }),
        ];
        for r in &bad {
            assert!(r.malformed().is_some(), "{r:?}");
            assert_eq!(step(&mut s, r, 2), Outcome::Malformed, "{r:?}");
        }
        assert_eq!(
            s,
            Snapshot {
                last_executed: Slot(bad.len() as u64),
                ..Snapshot::default()
            }
        );
        assert!(Reply::Malformed.is_definite_rejection());
        assert_eq!(Request::register(BASE - 1).malformed(), None);
        assert_eq!(put(3, 1, "k", "a").malformed(), None);
    }

    #[test]
    fn the_register_counter_survives_a_snapshot_round_trip() {
        let mut s = Snapshot::default();
        for nonce in 0..5 {
            register(&mut s, nonce, 2);
        }
        step(&mut s, &put(BASE + 4, 1, "k", "a"), 2);
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
        assert_eq!(register(&mut back, 9, 2), BASE + 5);
        assert_eq!(
            step(&mut back, &put(BASE, 1, "k", "b"), 2),
            Outcome::Expired
        );
        // A table that claims a session for an id beyond its counter, or
        // below 2^63, does not deserialize.
        for client in [BASE, 7] {
            let bad = format!(
                r#"{{"sessions":{{"{client}":{{"seq":0,"reply":"Done","slot":1}}}},"registered":0}}"#
            );
            assert!(serde_json::from_str::<SessionTable>(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn replicas_executing_the_same_requests_hold_equal_snapshots_that_round_trip() {
        // Registers and writes interleaved: 37 clients, a bound of 5.
        let reqs: Vec<Request> = (0..200u64)
            .map(|i| match i % 4 {
                0 => Request::register(i),
                _ => put(BASE + i % 37, i / 37 + 1, "k", &i.to_string()),
            })
            .collect();
        let run = || {
            let mut s = Snapshot::default();
            for (i, r) in reqs.iter().enumerate() {
                s.execute(r, 5);
                if i % 3 == 2 {
                    s.last_executed += 1; // three requests a slot
                }
            }
            s
        };
        let (a, b) = (run(), run());
        assert_eq!(a, b);
        assert!(a.sessions.len() == 5 && a.sessions.registered() == 50);
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
        for r in [
            Request::register(1),
            put(BASE + 49, 9, "q", "1"),
            put(BASE, 9, "q", "2"),
        ] {
            assert_eq!(step(&mut a, &r, 5), step(&mut back, &r, 5));
        }
        assert_eq!(a, back);
    }

    /// One step of the clients' schedule: what a client does, or a
    /// request sent before chosen again.
    #[derive(Clone, Debug)]
    enum Act {
        /// Client `c` registers.
        Register(usize),
        /// Client `c` sends its next request, or resends its current one.
        Send(usize, bool),
        /// The `i`-th request ever sent (mod their number) is chosen again.
        Replay(usize),
        /// The slot advances by this much.
        Gap(u64),
    }

    fn act() -> impl proptest::strategy::Strategy<Value = Act> {
        use proptest::prelude::*;
        prop_oneof![
            2 => (0usize..5).prop_map(Act::Register),
            4 => (0usize..5, proptest::bool::weighted(0.3)).prop_map(|(c, r)| Act::Send(c, r)),
            3 => (0usize..1000).prop_map(Act::Replay),
            1 => (0u64..3).prop_map(Act::Gap),
        ]
    }

    /// Runs a schedule of clients; `Err` names a `(client, seq)` that
    /// executed twice, or an honest request refused.
    fn run_schedule(acts: &[Act], limit: usize, bugs: ExecBugs) -> Result<Snapshot, String> {
        let mut s = Snapshot::default();
        // Per client: the id it uses (from the first `Registered` it got
        // since it last lost one) and its current seq.
        let mut ids: Vec<Option<(u64, u64)>> = vec![None; 5];
        let mut sent: Vec<Request> = Vec::new();
        let mut executed = std::collections::BTreeSet::new();
        for a in acts {
            let req = match *a {
                Act::Register(c) => Request::register(c as u64 + 1),
                Act::Send(c, resend) => match &mut ids[c] {
                    None => continue,
                    Some((id, seq)) => {
                        if !resend || *seq == 0 {
                            *seq += 1;
                        }
                        put(*id, *seq, "k", &format!("{id}/{seq}"))
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
            let out = s.execute_checked(&req, limit, bugs);
            match (&req.op, &out) {
                (Op::Register, Outcome::Applied(Reply::Registered { client })) => {
                    let c = (req.client - 1) as usize;
                    if ids[c].is_none() {
                        ids[c] = Some((*client, 0));
                    }
                }
                (_, Outcome::Applied(_)) if !executed.insert((req.client, req.seq)) => {
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
            if s.sessions.len() > limit.max(1) || !s.sessions.is_consistent() {
                return Err(format!("table out of bounds or inconsistent after {req:?}"));
            }
        }
        Ok(s)
    }

    #[test]
    fn the_schedule_check_catches_registered_ids_without_expiry() {
        // Client 0 registers, sends seq 1; client 1's registers evict it;
        // seq 1 is chosen again.
        let acts = [
            Act::Register(0),
            Act::Send(0, false),
            Act::Register(1),
            Act::Register(1),
            Act::Replay(1),
        ];
        assert!(run_schedule(&acts, 1, ExecBugs::default()).is_ok());
        let bugs = ExecBugs {
            registered_no_expiry: true,
            ..ExecBugs::default()
        };
        assert!(run_schedule(&acts, 1, bugs).is_err());
    }

    proptest::proptest! {
        /// Clients with a small table: any request ever sent (registers,
        /// delayed originals, resends) may be chosen again at any later
        /// slot. No `(client, seq)` executes twice, no honest request is
        /// refused as unknown, the table stays bounded and consistent, and
        /// it round-trips.
        #[test]
        fn clients_execute_each_request_at_most_once(
            acts in proptest::collection::vec(act(), 1..200),
            limit in 1usize..4,
        ) {
            let s = run_schedule(&acts, limit, ExecBugs::default());
            proptest::prop_assert!(s.is_ok(), "{}", s.err().unwrap_or_default());
            let s = s.unwrap_or_default();
            let back: SessionTable = serde_json::from_slice(&serde_json::to_vec(&s.sessions).expect("serialize")).expect("deserialize");
            proptest::prop_assert_eq!(back, s.sessions);
        }
    }

    #[test]
    fn digest_depends_on_slot_and_value() {
        let v = Value::Batch(std::sync::Arc::new(vec![put(BASE, 1, "k", "v")]));
        let a = digest_step(0, Slot(1), &v);
        assert_ne!(a, digest_step(0, Slot(2), &v));
        assert_ne!(a, digest_step(0, Slot(1), &Value::Noop));
        assert_eq!(a, digest_step(0, Slot(1), &v.clone()));
    }
}

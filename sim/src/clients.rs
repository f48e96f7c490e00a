//! The clients: open loop, as the seed paper's method requires. Each client
//! draws intended start times (Poisson, its share of the offered rate) and
//! has one operation outstanding; an operation due while another is in
//! flight waits and is charged the wait (latency counts from the intended
//! start, so there is no coordinated omission). Operations are YCSB-like
//! mixes of get, put and cas over keys drawn from a zipfian distribution,
//! with unique written values; a request is retried with the same
//! `(client, seq)` after a redirect (to the named leader), a busy answer or
//! a timeout (to the next replica). Once an attempt timed out (its outcome
//! is uncertain), every later attempt of that `(client, seq)` is flagged a
//! retry (`Request::retry`); a redirect or a busy answer says nothing was
//! proposed and leaves the flag as it is. A client whose session expired (the
//! table is bounded, `Config::session_limit`) records the operation as of
//! unknown outcome and continues under a new client id, numbering from 1.
//!
//! By default a client registers, as the real client library does: the log
//! assigns its id. Before its first operation, and again after its session
//! expired, it sends `Op::Register` under a nonce (the id it would
//! otherwise have used), resent as any request is, and takes the id of the
//! first `Registered` answer it gets (a resend that also executed wastes an
//! id). Legacy clients (`Scenario::legacy_clients`, `sim run/swarm
//! --legacy-clients`) use those ids below 2^63 directly.

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;
use stutter_core::{ClientId, Op, ReplicaId, Reply, Request, Seq, Time, REGISTERED_BASE};
use stutter_zipf::Zipf;

use crate::history::{HistOp, Outcome, F};
use crate::rng::Rng;
use crate::scenario::{Scenario, Workload, MS};

/// Keys up to this many have their name built once.
const KEY_NAMES: u64 = 4096;

fn key_name(k: u64) -> String {
    format!("k{k}")
}

/// What the clients ask the world to schedule.
pub enum ClientEvent {
    /// The next intended start of client `c`.
    Tick { c: usize, at: Time },
    /// The request of history operation `op` (`Clients::requests`)
    /// reaches replica `r` at `at`, flagged a retry or not. (The request
    /// itself is copied when it arrives: an index keeps the world's events
    /// small.)
    Arrive {
        r: ReplicaId,
        op: usize,
        retry: bool,
        at: Time,
    },
    /// Client `c`'s timeout entry (one per client, moved to the latest).
    Timeout { c: usize, at: Time },
    /// A `Register` under `nonce` reaches replica `r` at `at`.
    Register {
        r: ReplicaId,
        nonce: ClientId,
        retry: bool,
        at: Time,
    },
}

struct Client {
    id: ClientId,
    target: ReplicaId,
    seq: Seq,
    /// Index in the history of the operation in flight.
    current: Option<usize>,
    attempt: u32,
    /// The latest attempt was sent and has had no answer saying nothing
    /// was proposed: it may execute.
    in_doubt: bool,
    /// Some earlier attempt of the operation in flight was in doubt when
    /// the next was sent: every later one is flagged a retry.
    retry: bool,
    /// Intended start times of operations not yet started (open loop).
    due: VecDeque<Time>,
    /// Intended start of the operation in flight.
    intended: Time,
    /// The pending timeout `(deadline, seq, attempt)` (the latest one set
    /// replaces the previous), and the time of its one queue entry.
    timeout: Option<(Time, Seq, u32)>,
    timeout_queued: Option<Time>,
    /// History index of each operation issued, in order.
    ops: Vec<usize>,
    /// Where each id's operations start in `ops`: id number `g` of client
    /// `c` is `c + 1 + g × clients` (with registration: the nonce of the
    /// `Register` that got it).
    generations: Vec<usize>,
    /// With registration: a `Register` is in flight (under `id`, the nonce).
    registering: bool,
    /// With registration: `id` is the one the log assigned.
    registered: bool,
}

pub struct Clients {
    n: usize,
    w: Workload,
    delay_min: Time,
    delay_mean_extra: f64,
    client_timeout: Time,
    clients: Vec<Client>,
    pub history: Vec<HistOp>,
    /// The request of each history operation (same index), built once:
    /// every attempt sends a copy.
    pub requests: Vec<Request>,
    /// Latency of every ok operation from its intended start (µs).
    pub latencies: Vec<Time>,
    /// Key names (`k0`, `k1`, ...) shared by every request of a key.
    key_names: Vec<Bytes>,
    next_value: u64,
    /// Values written per key, to make cas expectations plausible.
    written: BTreeMap<u64, Vec<u64>>,
    zipf: Zipf,
    stop_issuing: Time,
    /// Clients register before their first operation (unless
    /// `Scenario::legacy_clients`).
    register: bool,
    /// Assigned id ↦ (client index, id number).
    assigned: BTreeMap<ClientId, (usize, usize)>,
}

impl Clients {
    pub fn new(s: &Scenario) -> Clients {
        // Room for the operations the offered load will issue (a little
        // more), so the history does not grow by copying; capped, as it is
        // only a hint.
        let expected_ops =
            (s.workload.rate * s.duration as f64 / 1e6 * 1.1).clamp(0.0, 1e7) as usize;
        let clients = (0..s.workload.clients)
            .map(|c| Client {
                id: c as ClientId + 1,
                target: (c % s.n) as ReplicaId,
                seq: 0,
                current: None,
                attempt: 0,
                in_doubt: false,
                retry: false,
                due: VecDeque::new(),
                intended: 0,
                timeout: None,
                timeout_queued: None,
                ops: Vec::new(),
                generations: vec![0],
                registering: false,
                registered: false,
            })
            .collect();
        Clients {
            n: s.n,
            w: s.workload.clone(),
            delay_min: s.net_delay_min,
            delay_mean_extra: s.net_delay_mean_extra,
            client_timeout: s.client_timeout,
            clients,
            history: Vec::with_capacity(expected_ops),
            requests: Vec::with_capacity(expected_ops),
            latencies: Vec::with_capacity(expected_ops),
            key_names: (0..s.workload.keys.min(KEY_NAMES))
                .map(|k| Bytes::from(key_name(k)))
                .collect(),
            next_value: 1,
            written: BTreeMap::new(),
            zipf: Zipf::new(s.workload.keys, s.workload.zipf_theta),
            stop_issuing: s.duration,
            register: !s.legacy_clients,
            assigned: BTreeMap::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.clients.len()
    }

    pub fn is_empty(&self) -> bool {
        self.clients.is_empty()
    }

    /// The client index and id number of a client id, if it is one of ours.
    fn owner(&self, id: ClientId) -> Option<(usize, usize)> {
        if id >= REGISTERED_BASE {
            return self.assigned.get(&id).copied();
        }
        let n = self.clients.len() as u64;
        let x = id.checked_sub(1)?;
        let (c, g) = ((x % n.max(1)) as usize, (x / n.max(1)) as usize);
        (c < self.clients.len() && g < self.clients[c].generations.len()).then_some((c, g))
    }

    /// The client index of a client id, if it is one of ours.
    pub fn index(&self, id: ClientId) -> Option<usize> {
        self.owner(id).map(|(c, _)| c)
    }

    /// A one-way delay between a client and a replica.
    fn delay(&self, rng: &mut Rng) -> Time {
        self.delay_min + rng.exp(self.delay_mean_extra)
    }

    pub fn interarrival(&self, rng: &mut Rng) -> Time {
        let per_client = self.w.rate / self.clients.len().max(1) as f64;
        rng.exp(1e6 / per_client.max(1e-3)).max(1)
    }

    /// Each client's first intended start, once an election has had time.
    pub fn start(&self, rng: &mut Rng, out: &mut Vec<ClientEvent>) {
        for c in 0..self.clients.len() {
            let at = 500 * MS + self.interarrival(rng);
            out.push(ClientEvent::Tick { c, at });
        }
    }

    /// An intended start of client `c`.
    pub fn tick(&mut self, c: usize, now: Time, rng: &mut Rng, out: &mut Vec<ClientEvent>) {
        if now >= self.stop_issuing {
            return;
        }
        self.clients[c].due.push_back(now);
        let at = now + self.interarrival(rng);
        out.push(ClientEvent::Tick { c, at });
        if self.clients[c].current.is_none() {
            self.start_op(c, now, rng, out);
        }
    }

    fn start_op(&mut self, c: usize, now: Time, rng: &mut Rng, out: &mut Vec<ClientEvent>) {
        if now >= self.stop_issuing {
            // Operations not started by then are never issued, so that every
            // issued one has the liveness bound to complete after healing.
            self.clients[c].due.clear();
            return;
        }
        if self.register && !self.clients[c].registered {
            // The operation waits (and is charged the wait) for an id.
            if !self.clients[c].registering && !self.clients[c].due.is_empty() {
                let cl = &mut self.clients[c];
                cl.registering = true;
                cl.seq = 0;
                cl.attempt = 0;
                cl.in_doubt = false;
                cl.retry = false;
                self.send_current(c, now, rng, out);
            }
            return;
        }
        let Some(intended) = self.clients[c].due.pop_front() else {
            return;
        };
        let key = self.zipf.rank(rng.f64());
        let x = rng.f64();
        let (f, value, from) = if x < self.w.read_fraction {
            (F::Read, 0, 0)
        } else if x < self.w.read_fraction + self.w.cas_fraction {
            let seen = self.written.get(&key).map_or(&[][..], |v| &v[..]);
            let from = if seen.is_empty() || rng.chance(0.2) {
                0
            } else {
                seen[seen.len() - 1 - (rng.u64() % seen.len().min(3) as u64) as usize]
            };
            let v = self.next_value;
            self.next_value += 1;
            (F::Cas, v, from)
        } else {
            let v = self.next_value;
            self.next_value += 1;
            // Only a cas reads what was written (no random draw depends
            // on it): without cas, a map that grows with every key
            // written (millions at the paper's scale) is not kept.
            if self.w.cas_fraction > 0.0 {
                self.written.entry(key).or_default().push(v);
            }
            (F::Write, v, 0)
        };
        let cl = &mut self.clients[c];
        cl.seq += 1;
        cl.attempt = 0;
        cl.in_doubt = false;
        cl.retry = false;
        cl.intended = intended;
        let idx = self.history.len();
        cl.current = Some(idx);
        cl.ops.push(idx);
        let op = HistOp {
            client: cl.id,
            seq: cl.seq,
            f,
            key,
            value,
            from,
            intended,
            invoke: now,
            complete: None,
            outcome: Outcome::Pending,
        };
        self.requests.push(self.request_of(&op));
        self.history.push(op);
        self.send_current(c, now, rng, out);
    }

    /// The request a history operation stands for.
    fn request_of(&self, op: &HistOp) -> Request {
        let k = self
            .key_names
            .get(op.key as usize)
            .cloned()
            .unwrap_or_else(|| Bytes::from(key_name(op.key)));
        let v = |x: u64| Bytes::from(x.to_string());
        let op_ = match op.f {
            F::Read => Op::Get { key: k },
            F::Write => Op::Put {
                key: k,
                value: v(op.value),
            },
            F::Cas => Op::Cas {
                key: k,
                from: (op.from != 0).then(|| v(op.from)),
                to: v(op.value),
            },
        };
        Request::new(op.client, op.seq, op_)
    }

    /// Whether `(client, seq)` is a write or a cas (it changes state).
    pub fn is_update(&self, client: ClientId, seq: Seq) -> bool {
        self.op_of(client, seq).is_some_and(|op| op.f != F::Read)
    }

    /// The operation a client's request `seq` carries.
    pub fn op_of(&self, client: ClientId, seq: Seq) -> Option<&HistOp> {
        let (c, g) = self.owner(client)?;
        let cl = &self.clients[c];
        let i = seq
            .checked_sub(1)
            .and_then(|s| cl.ops.get(cl.generations.get(g)? + s as usize))?;
        self.history.get(*i)
    }

    fn send_current(&mut self, c: usize, now: Time, rng: &mut Rng, out: &mut Vec<ClientEvent>) {
        let cl = &self.clients[c];
        let op = cl.current;
        if op.is_none() && !cl.registering {
            return;
        }
        let cl = &mut self.clients[c];
        cl.attempt += 1;
        cl.retry |= cl.in_doubt;
        cl.in_doubt = true;
        let (r, seq, attempt, retry, nonce) = (cl.target, cl.seq, cl.attempt, cl.retry, cl.id);
        let at = now + self.delay(rng);
        out.push(match op {
            Some(op) => ClientEvent::Arrive { r, op, retry, at },
            None => ClientEvent::Register {
                r,
                nonce,
                retry,
                at,
            },
        });
        self.set_timeout(c, now + self.client_timeout, seq, attempt, out);
    }

    /// One queue entry per client stands for its latest timeout (thousands
    /// of superseded timeouts would otherwise sit in the event heap).
    fn set_timeout(
        &mut self,
        c: usize,
        deadline: Time,
        seq: Seq,
        attempt: u32,
        out: &mut Vec<ClientEvent>,
    ) {
        let cl = &mut self.clients[c];
        cl.timeout = Some((deadline, seq, attempt));
        if cl.timeout_queued.is_none_or(|q| q > deadline) {
            cl.timeout_queued = Some(deadline);
            out.push(ClientEvent::Timeout { c, at: deadline });
        }
    }

    /// Client `c`'s timeout entry for `at` fired.
    pub fn timeout(
        &mut self,
        c: usize,
        at: Time,
        now: Time,
        rng: &mut Rng,
        out: &mut Vec<ClientEvent>,
    ) {
        let cl = &mut self.clients[c];
        if cl.timeout_queued != Some(at) {
            return;
        }
        cl.timeout_queued = None;
        let Some((deadline, seq, attempt)) = cl.timeout else {
            return;
        };
        if deadline > now {
            cl.timeout_queued = Some(deadline);
            out.push(ClientEvent::Timeout { c, at: deadline });
            return;
        }
        cl.timeout = None;
        if (cl.current.is_some() || cl.registering) && cl.seq == seq && cl.attempt == attempt {
            cl.target = ((cl.target as usize + 1) % self.n) as ReplicaId;
            self.send_current(c, now, rng, out);
        }
    }

    /// A reply to `(client, seq)` reached client `c`.
    pub fn reply(
        &mut self,
        c: usize,
        (client, seq): (ClientId, Seq),
        reply: Reply,
        now: Time,
        rng: &mut Rng,
        out: &mut Vec<ClientEvent>,
    ) {
        let cl = &self.clients[c];
        if cl.registering {
            if seq == 0 && cl.id == client {
                self.register_reply(c, reply, now, rng, out);
            }
            return;
        }
        let Some(idx) = cl.current else { return };
        if cl.seq != seq || cl.id != client {
            return;
        }
        if reply.is_definite_rejection() {
            // Nothing was proposed for the attempt it answers (the latest:
            // had an earlier one been in doubt, the flag is set already).
            self.clients[c].in_doubt = false;
        }
        match reply {
            Reply::Redirect { leader: Some(l) } if (l as usize) < self.n => {
                self.clients[c].target = l;
                self.send_current(c, now, rng, out);
            }
            Reply::Redirect { .. } | Reply::Busy => {
                // No leader known: try another replica a little later.
                let t = rng.range(0, self.n as u64 - 1) as ReplicaId;
                self.clients[c].target = t;
                let attempt = self.clients[c].attempt;
                self.set_timeout(c, now + 20 * MS, seq, attempt, out);
            }
            Reply::Stale => self.complete(c, idx, Outcome::Fail("stale".into()), now, rng, out),
            // Never for a request of ours: a definite rejection.
            Reply::UnknownClient => {
                self.next_id(c);
                self.complete(
                    c,
                    idx,
                    Outcome::Fail("unknown client".into()),
                    now,
                    rng,
                    out,
                )
            }
            Reply::Malformed => {
                self.complete(c, idx, Outcome::Fail("malformed".into()), now, rng, out)
            }
            // The simulator's disk never fills: never sent, definite if it were.
            Reply::StorageFull => {
                self.complete(c, idx, Outcome::Fail("disk full".into()), now, rng, out)
            }
            Reply::Registered { .. } => {}
            Reply::SessionExpired => {
                // An earlier attempt may have executed: unknown, as a
                // timeout would be. The old id is never used again (with
                // registration, the next operation registers first).
                self.next_id(c);
                self.complete(
                    c,
                    idx,
                    Outcome::Unknown("session expired".into()),
                    now,
                    rng,
                    out,
                );
            }
            Reply::Value(v) => {
                let value = v
                    .and_then(|b| std::str::from_utf8(&b).ok().and_then(|s| s.parse().ok()))
                    .unwrap_or(0);
                self.complete(
                    c,
                    idx,
                    Outcome::Ok {
                        value,
                        cas_ok: false,
                    },
                    now,
                    rng,
                    out,
                );
            }
            Reply::Done => {
                let value = self.history[idx].value;
                self.complete(
                    c,
                    idx,
                    Outcome::Ok {
                        value,
                        cas_ok: false,
                    },
                    now,
                    rng,
                    out,
                );
            }
            Reply::Cas { ok, .. } => {
                if ok {
                    let (key, v) = (self.history[idx].key, self.history[idx].value);
                    self.written.entry(key).or_default().push(v);
                }
                self.complete(
                    c,
                    idx,
                    Outcome::Ok {
                        value: 0,
                        cas_ok: ok,
                    },
                    now,
                    rng,
                    out,
                );
            }
        }
    }

    /// Client `c` leaves its id for the next: with registration, the
    /// nonce of the `Register` its next operation sends first.
    fn next_id(&mut self, c: usize) {
        let n = self.clients.len() as ClientId;
        let cl = &mut self.clients[c];
        cl.generations.push(cl.ops.len());
        cl.id = c as ClientId + 1 + (cl.generations.len() as ClientId - 1) * n;
        cl.seq = 0;
        cl.registered = false;
    }

    /// The answer to client `c`'s `Register` in flight.
    fn register_reply(
        &mut self,
        c: usize,
        reply: Reply,
        now: Time,
        rng: &mut Rng,
        out: &mut Vec<ClientEvent>,
    ) {
        if reply.is_definite_rejection() {
            self.clients[c].in_doubt = false;
        }
        match reply {
            Reply::Registered { client } => {
                let cl = &mut self.clients[c];
                let g = cl.generations.len() - 1;
                cl.id = client;
                cl.seq = 0;
                cl.registering = false;
                cl.registered = true;
                cl.timeout = None;
                self.assigned.insert(client, (c, g));
                self.start_op(c, now, rng, out);
            }
            Reply::Redirect { leader: Some(l) } if (l as usize) < self.n => {
                self.clients[c].target = l;
                self.send_current(c, now, rng, out);
            }
            // No leader known, or an answer no register gets: try another
            // replica a little later.
            _ => {
                let t = rng.range(0, self.n as u64 - 1) as ReplicaId;
                self.clients[c].target = t;
                let attempt = self.clients[c].attempt;
                self.set_timeout(c, now + 20 * MS, 0, attempt, out);
            }
        }
    }

    fn complete(
        &mut self,
        c: usize,
        idx: usize,
        outcome: Outcome,
        now: Time,
        rng: &mut Rng,
        out: &mut Vec<ClientEvent>,
    ) {
        let op = &mut self.history[idx];
        op.complete = Some(now);
        op.outcome = outcome;
        if op.is_ok() {
            self.latencies.push(now - self.clients[c].intended);
        }
        self.clients[c].current = None;
        if !self.clients[c].due.is_empty() {
            self.start_op(c, now, rng, out);
        }
    }
}

//! The bounded session table of at-most-once execution, and its expiry.
//!
//! Expiry is decided in execution (as in the Raft thesis, §6.3): every
//! replica executing the same log with the same `Config::session_limit`
//! evicts the same sessions at the same slot, with no clock involved. When
//! a request of a client without a session is executed while the table
//! holds `limit` sessions, the least recently executed one (smallest slot,
//! ties by client id) is evicted and its client id becomes a tombstone.
//! Tombstones are a FIFO of `TOMBSTONES_PER_SESSION × limit` ids (8 bytes
//! each, against a session that holds its last reply).
//!
//! A request of a client whose session expired is not executed: it gets
//! `Reply::SessionExpired`, whose outcome for the client is unknown (an
//! earlier attempt may have executed). A client is taken to have expired
//! when its id is a tombstone, or — once some tombstone has rotated out of
//! the FIFO — when it has no session and the request is either above seq 1
//! (clients number their requests from 1) or flagged a retry
//! (`Request::retry`: the client sent it before and does not know whether
//! that attempt executed). Before any tombstone rotated out, a client
//! without a session and without a tombstone never had one, whatever its
//! seq (its first requests may have been reads served outside the log, or
//! requests that became no-ops), so it is executed. From then on the
//! leader sends a read of a client without a session through the log
//! rather than ReadIndex, so that a client's first request takes a
//! session; a client whose first request never executed (it gave up on
//! it) is expired at its next one and continues under a new id.
//!
//! The retry flag closes what the seq rule leaves open: a client's seq-1
//! request executed, its session evicted and its tombstone forgotten, and
//! only then the client's own resend of it executed again. That resend is
//! flagged, so it is expired. What it costs: a seq-1 request resent after
//! an uncertain attempt is expired once tombstones have been forgotten
//! even if no attempt of it ever ran (docs/protocol.md, "Session expiry",
//! argues every interleaving).
//!
//! Registered clients close the last case the flag leaves open: a flagged
//! retry executed first and took the session, the session and its
//! tombstone were forgotten, and only then the client's unflagged original
//! was chosen. A client that registers (`Op::Register`) gets its id from
//! the log: ids from `REGISTERED_BASE` up, counted by `registered` (kept
//! in snapshots). Only a `Register` creates a session for such an id, so
//! an assigned id without a session has been evicted, whatever the
//! request's seq or flag: it is expired, with no tombstone needed (evicting
//! a registered id buries nothing). An id at or above
//! `REGISTERED_BASE + registered` was never assigned: `Check::Unknown`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use crate::types::{ClientId, Reply, Seq, Slot, REGISTERED_BASE};

/// Tombstones kept per session of the bound, unless
/// `Config::session_tombstones` says otherwise.
pub const TOMBSTONES_PER_SESSION: usize = 4;

/// The bounds of a table: at most `sessions` sessions and `tombstones`
/// tombstones (0: `TOMBSTONES_PER_SESSION × sessions`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    pub sessions: usize,
    pub tombstones: usize,
}

impl Bounds {
    pub const UNBOUNDED: Bounds = Bounds {
        sessions: usize::MAX,
        tombstones: usize::MAX,
    };

    fn sessions(&self) -> usize {
        self.sessions.max(1)
    }

    /// The bound on sessions as traces report it: `None` when unbounded.
    pub fn limit(&self) -> Option<u64> {
        (self.sessions != usize::MAX).then(|| self.sessions() as u64)
    }

    fn tombstones(&self) -> usize {
        if self.tombstones == 0 {
            self.sessions().saturating_mul(TOMBSTONES_PER_SESSION)
        } else {
            self.tombstones
        }
    }
}

/// The last executed request of a client, the reply it produced, and the
/// slot that executed it (the eviction order).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    pub seq: Seq,
    pub reply: Reply,
    pub slot: Slot,
}

/// What the table says about a request before it is executed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Check<'a> {
    /// The client's session, if it has one: execute unless `seq` is not
    /// above the session's.
    Live(Option<&'a Session>),
    /// The client's session expired: do not execute.
    Expired,
    /// A registered id that was never assigned: do not execute.
    Unknown,
}

/// Sessions by client, with their eviction index and tombstones. Ordered
/// containers only: two replicas that executed the same log hold equal
/// tables and serialize them to the same bytes. Only `sessions`,
/// `tombstones`, `forgotten` and `registered` are serialized and compared;
/// the index, the tombstone set and the sum of sequence numbers are
/// derived from them.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(into = "Wire", try_from = "Wire")]
pub struct SessionTable {
    sessions: BTreeMap<ClientId, Session>,
    /// `(slot, client)` of every session, the least recent first: the
    /// eviction order. Built when a bounded `record` first needs it and
    /// dropped by an unbounded one, which never evicts (an unbounded table
    /// saves two ordered-set updates per executed request; the order is a
    /// function of `sessions`, so building it late changes nothing).
    by_slot: Option<BTreeSet<(Slot, ClientId)>>,
    /// The wrapping sum of every session's `seq` (trace summaries report
    /// it on every executed slot; kept here so that costs O(1), not
    /// O(clients)).
    seq_sum: u64,
    /// Evicted clients, the oldest eviction first.
    tombstones: VecDeque<ClientId>,
    tombstone_set: BTreeSet<ClientId>,
    /// Tombstones dropped from the FIFO so far.
    forgotten: u64,
    /// Client ids assigned so far: `REGISTERED_BASE..REGISTERED_BASE + registered`.
    registered: u64,
}

#[derive(Serialize, Deserialize)]
struct Wire {
    sessions: BTreeMap<ClientId, Session>,
    tombstones: VecDeque<ClientId>,
    forgotten: u64,
    registered: u64,
}

impl From<SessionTable> for Wire {
    fn from(t: SessionTable) -> Wire {
        Wire {
            sessions: t.sessions,
            tombstones: t.tombstones,
            forgotten: t.forgotten,
            registered: t.registered,
        }
    }
}

/// Whether `client` is in the range of ids the log assigns.
pub fn is_registered_id(client: ClientId) -> bool {
    client >= REGISTERED_BASE
}

impl PartialEq for SessionTable {
    fn eq(&self, other: &Self) -> bool {
        self.sessions == other.sessions
            && self.tombstones == other.tombstones
            && self.forgotten == other.forgotten
            && self.registered == other.registered
    }
}

impl Eq for SessionTable {}

fn slot_index(sessions: &BTreeMap<ClientId, Session>) -> BTreeSet<(Slot, ClientId)> {
    sessions.iter().map(|(c, s)| (s.slot, *c)).collect()
}

impl TryFrom<Wire> for SessionTable {
    type Error = String;

    fn try_from(w: Wire) -> Result<SessionTable, String> {
        let tombstone_set: BTreeSet<ClientId> = w.tombstones.iter().copied().collect();
        if tombstone_set.len() != w.tombstones.len() {
            return Err("a client is a tombstone twice".into());
        }
        if w.sessions.keys().any(|c| tombstone_set.contains(c)) {
            return Err("a client has a session and a tombstone".into());
        }
        if tombstone_set.iter().any(|c| is_registered_id(*c)) {
            return Err("a registered client has a tombstone".into());
        }
        let assigned = |c: &ClientId| !is_registered_id(*c) || c - REGISTERED_BASE < w.registered;
        if !w.sessions.keys().all(assigned) {
            return Err("a session of a client id never assigned".into());
        }
        let seq_sum = w
            .sessions
            .values()
            .fold(0u64, |sum, s| sum.wrapping_add(s.seq));
        Ok(SessionTable {
            sessions: w.sessions,
            by_slot: None,
            seq_sum,
            tombstones: w.tombstones,
            tombstone_set,
            forgotten: w.forgotten,
            registered: w.registered,
        })
    }
}

impl SessionTable {
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// The wrapping sum of the sessions' sequence numbers.
    pub fn seq_sum(&self) -> u64 {
        self.seq_sum
    }

    pub fn get(&self, client: &ClientId) -> Option<&Session> {
        self.sessions.get(client)
    }

    /// Sessions by client id.
    pub fn iter(&self) -> impl Iterator<Item = (&ClientId, &Session)> {
        self.sessions.iter()
    }

    /// Evicted clients whose tombstone is still kept, oldest first.
    pub fn tombstones(&self) -> impl Iterator<Item = &ClientId> {
        self.tombstones.iter()
    }

    /// Tombstones dropped from the FIFO so far.
    pub fn forgotten(&self) -> u64 {
        self.forgotten
    }

    /// Client ids assigned so far (by executed `Register`s).
    pub fn registered(&self) -> u64 {
        self.registered
    }

    /// Whether `client` is a registered id that the log assigned already.
    pub fn is_assigned(&self, client: ClientId) -> bool {
        is_registered_id(client) && client - REGISTERED_BASE < self.registered
    }

    /// Whether a request of `client` must execute through the log even if
    /// it is a read: once a tombstone has been forgotten, a client without
    /// a session takes one with its first request, or its later ones
    /// (seq above 1) would be expired. A registered id without a session
    /// is expired or unknown, which only execution may decide for an id
    /// this replica has not seen assigned.
    pub fn first_request_takes_session(&self, client: ClientId) -> bool {
        (self.forgotten > 0 || is_registered_id(client)) && !self.sessions.contains_key(&client)
    }

    /// What the table says about request `seq` of `client`, flagged a
    /// retry or not (see the module's rules). Not for `Register`, whose
    /// nonce has no session.
    pub fn check(&self, client: ClientId, seq: Seq, retry: bool) -> Check<'_> {
        match self.sessions.get(&client) {
            Some(s) => Check::Live(Some(s)),
            None if self.is_assigned(client) => Check::Expired,
            None if is_registered_id(client) => Check::Unknown,
            None if self.tombstone_set.contains(&client) => Check::Expired,
            None if self.forgotten > 0 && (seq > 1 || retry) => Check::Expired,
            None => Check::Live(None),
        }
    }

    /// Records that `client`'s request `seq` executed in `slot` with
    /// `reply`, evicting the least recent session first if the client is
    /// new and the table holds `bounds.sessions` sessions.
    pub fn record(&mut self, client: ClientId, session: Session, bounds: Bounds) {
        if bounds.limit().is_none() {
            // Never evicts: no index to keep.
            self.by_slot = None;
            self.seq_sum = self.seq_sum.wrapping_add(session.seq);
            if let Some(old) = self.sessions.insert(client, session) {
                self.seq_sum = self.seq_sum.wrapping_sub(old.seq);
            } else if self.tombstone_set.remove(&client) {
                self.tombstones.retain(|c| *c != client);
            }
            return;
        }
        let mut by_slot = match self.by_slot.take() {
            Some(index) => index,
            None => slot_index(&self.sessions),
        };
        if let Some(old) = self.sessions.get(&client) {
            by_slot.remove(&(old.slot, client));
        } else {
            while self.sessions.len() >= bounds.sessions() {
                let Some((slot, evicted)) = by_slot.pop_first() else {
                    break;
                };
                debug_assert!(slot <= session.slot);
                if let Some(gone) = self.sessions.remove(&evicted) {
                    self.seq_sum = self.seq_sum.wrapping_sub(gone.seq);
                }
                self.bury(evicted, bounds);
            }
            // Not reached through `check` (a tombstoned client is not
            // executed); keeps the table consistent for any caller.
            if self.tombstone_set.remove(&client) {
                self.tombstones.retain(|c| *c != client);
            }
        }
        by_slot.insert((session.slot, client));
        self.by_slot = Some(by_slot);
        self.seq_sum = self.seq_sum.wrapping_add(session.seq);
        if let Some(old) = self.sessions.insert(client, session) {
            self.seq_sum = self.seq_sum.wrapping_sub(old.seq);
        }
    }

    /// Assigns the next client id to a `Register` executed in `slot`, and
    /// records its session (seq 0, reply `Registered`).
    pub fn register(&mut self, slot: Slot, bounds: Bounds) -> ClientId {
        let client = REGISTERED_BASE.saturating_add(self.registered);
        self.registered = self.registered.saturating_add(1);
        let session = Session {
            seq: 0,
            reply: Reply::Registered { client },
            slot,
        };
        self.record(client, session, bounds);
        client
    }

    fn bury(&mut self, client: ClientId, bounds: Bounds) {
        // A registered id needs no tombstone: without a session it is
        // expired as long as it is below the counter, which only grows.
        if is_registered_id(client) {
            return;
        }
        self.tombstones.push_back(client);
        self.tombstone_set.insert(client);
        let capacity = bounds.tombstones();
        while self.tombstones.len() > capacity {
            if let Some(old) = self.tombstones.pop_front() {
                self.tombstone_set.remove(&old);
                self.forgotten += 1;
            }
        }
    }

    /// Inserts a session as is, without eviction (tests and tools that
    /// build a table by hand).
    pub fn insert(&mut self, client: ClientId, session: Session) {
        let slot = session.slot;
        self.seq_sum = self.seq_sum.wrapping_add(session.seq);
        if let Some(old) = self.sessions.insert(client, session) {
            self.seq_sum = self.seq_sum.wrapping_sub(old.seq);
            if let Some(by_slot) = self.by_slot.as_mut() {
                by_slot.remove(&(old.slot, client));
            }
        }
        if let Some(by_slot) = self.by_slot.as_mut() {
            by_slot.insert((slot, client));
        }
    }

    /// Whether the index and the tombstone set agree with what they index.
    pub fn is_consistent(&self) -> bool {
        self.by_slot
            .as_ref()
            .is_none_or(|by_slot| *by_slot == slot_index(&self.sessions))
            && self.seq_sum
                == self
                    .sessions
                    .values()
                    .fold(0u64, |sum, s| sum.wrapping_add(s.seq))
            && self.tombstone_set.len() == self.tombstones.len()
            && self
                .tombstones
                .iter()
                .all(|c| self.tombstone_set.contains(c) && !self.sessions.contains_key(c))
            && self.tombstones.iter().all(|c| !is_registered_id(*c))
            && self
                .sessions
                .keys()
                .all(|c| !is_registered_id(*c) || self.is_assigned(*c))
    }
}

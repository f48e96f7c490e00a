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

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use crate::types::{ClientId, Reply, Seq, Slot};

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
    pub const UNBOUNDED: Bounds = Bounds { sessions: usize::MAX, tombstones: usize::MAX };

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
}

/// Sessions by client, with their eviction index and tombstones. Ordered
/// containers only: two replicas that executed the same log hold equal
/// tables and serialize them to the same bytes. Only `sessions`,
/// `tombstones` and `forgotten` are serialized; the index and the
/// tombstone set are rebuilt from them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "Wire", try_from = "Wire")]
pub struct SessionTable {
    sessions: BTreeMap<ClientId, Session>,
    /// `(slot, client)` of every session: the least recent first.
    by_slot: BTreeSet<(Slot, ClientId)>,
    /// Evicted clients, the oldest eviction first.
    tombstones: VecDeque<ClientId>,
    tombstone_set: BTreeSet<ClientId>,
    /// Tombstones dropped from the FIFO so far.
    forgotten: u64,
}

#[derive(Serialize, Deserialize)]
struct Wire {
    sessions: BTreeMap<ClientId, Session>,
    tombstones: VecDeque<ClientId>,
    forgotten: u64,
}

impl From<SessionTable> for Wire {
    fn from(t: SessionTable) -> Wire {
        Wire { sessions: t.sessions, tombstones: t.tombstones, forgotten: t.forgotten }
    }
}

impl TryFrom<Wire> for SessionTable {
    type Error = String;

    fn try_from(w: Wire) -> Result<SessionTable, String> {
        let by_slot = w.sessions.iter().map(|(c, s)| (s.slot, *c)).collect();
        let tombstone_set: BTreeSet<ClientId> = w.tombstones.iter().copied().collect();
        if tombstone_set.len() != w.tombstones.len() {
            return Err("a client is a tombstone twice".into());
        }
        if w.sessions.keys().any(|c| tombstone_set.contains(c)) {
            return Err("a client has a session and a tombstone".into());
        }
        Ok(SessionTable { sessions: w.sessions, by_slot, tombstones: w.tombstones, tombstone_set, forgotten: w.forgotten })
    }
}

impl SessionTable {
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
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

    /// Whether a request of `client` must execute through the log even if
    /// it is a read: once a tombstone has been forgotten, a client without
    /// a session takes one with its first request, or its later ones
    /// (seq above 1) would be expired.
    pub fn first_request_takes_session(&self, client: ClientId) -> bool {
        self.forgotten > 0 && !self.sessions.contains_key(&client)
    }

    /// What the table says about request `seq` of `client`, flagged a
    /// retry or not (see the module's rules).
    pub fn check(&self, client: ClientId, seq: Seq, retry: bool) -> Check<'_> {
        match self.sessions.get(&client) {
            Some(s) => Check::Live(Some(s)),
            None if self.tombstone_set.contains(&client) => Check::Expired,
            None if self.forgotten > 0 && (seq > 1 || retry) => Check::Expired,
            None => Check::Live(None),
        }
    }

    /// Records that `client`'s request `seq` executed in `slot` with
    /// `reply`, evicting the least recent session first if the client is
    /// new and the table holds `bounds.sessions` sessions.
    pub fn record(&mut self, client: ClientId, session: Session, bounds: Bounds) {
        if let Some(old) = self.sessions.get(&client) {
            self.by_slot.remove(&(old.slot, client));
        } else {
            while self.sessions.len() >= bounds.sessions() {
                let Some((slot, evicted)) = self.by_slot.pop_first() else { break };
                debug_assert!(slot <= session.slot);
                self.sessions.remove(&evicted);
                self.bury(evicted, bounds);
            }
            // Not reached through `check` (a tombstoned client is not
            // executed); keeps the table consistent for any caller.
            if self.tombstone_set.remove(&client) {
                self.tombstones.retain(|c| *c != client);
            }
        }
        self.by_slot.insert((session.slot, client));
        self.sessions.insert(client, session);
    }

    fn bury(&mut self, client: ClientId, bounds: Bounds) {
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
        if let Some(old) = self.sessions.insert(client, session.clone()) {
            self.by_slot.remove(&(old.slot, client));
        }
        self.by_slot.insert((session.slot, client));
    }

    /// Whether the index and the tombstone set agree with what they index.
    pub fn is_consistent(&self) -> bool {
        self.by_slot.len() == self.sessions.len()
            && self.by_slot.iter().all(|(slot, c)| self.sessions.get(c).is_some_and(|s| s.slot == *slot))
            && self.tombstone_set.len() == self.tombstones.len()
            && self.tombstones.iter().all(|c| self.tombstone_set.contains(c) && !self.sessions.contains_key(c))
    }
}

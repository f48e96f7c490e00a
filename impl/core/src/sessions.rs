//! The bounded session table of at-most-once execution, and its expiry.
//!
//! Clients register (`Op::Register`) and use the id the log assigns:
//! ids from `REGISTERED_BASE` up, counted by `registered` (kept in
//! snapshots). Only a `Register` creates a session for such an id.
//!
//! Expiry is decided in execution (as in the Raft thesis, §6.3): every
//! replica executing the same log with the same `Config::session_limit`
//! evicts the same sessions at the same slot, with no clock involved. When
//! a `Register` executes while the table holds `limit` sessions, the least
//! recently executed one (smallest slot, ties by client id) is evicted.
//! An assigned id without a session has therefore been evicted, whatever
//! the request's seq: it is expired (`Reply::SessionExpired`, outcome
//! unknown, since an earlier attempt may have executed), and nothing needs
//! to be remembered of it (the counter only grows). An id the log never
//! assigned, at or above `REGISTERED_BASE + registered` or below
//! `REGISTERED_BASE`, is unknown (`Reply::UnknownClient`): not executed.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::types::{ClientId, Reply, Seq, Slot, REGISTERED_BASE};

/// A session limit that never evicts (`Config::session_limit`).
pub const UNBOUNDED: usize = usize::MAX;

/// The bound on sessions as traces report it: `None` when unbounded.
pub fn reported_limit(limit: usize) -> Option<u64> {
    (limit != UNBOUNDED).then(|| limit.max(1) as u64)
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
    /// The client's session: execute unless `seq` is not above its seq.
    Live(&'a Session),
    /// The client's session expired: do not execute.
    Expired,
    /// An id the log never assigned: do not execute.
    Unknown,
}

/// Sessions by client, with their eviction index. Ordered containers
/// only: two replicas that executed the same log hold equal tables and
/// serialize them to the same bytes. Only `sessions` and `registered` are
/// serialized and compared; the index and the sum of sequence numbers are
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
    /// Client ids assigned so far: `REGISTERED_BASE..REGISTERED_BASE + registered`.
    registered: u64,
}

#[derive(Serialize, Deserialize)]
struct Wire {
    sessions: BTreeMap<ClientId, Session>,
    registered: u64,
}

impl From<SessionTable> for Wire {
    fn from(t: SessionTable) -> Wire {
        Wire {
            sessions: t.sessions,
            registered: t.registered,
        }
    }
}

/// Whether `client` is in the range of ids the log assigns.
pub fn is_registered_id(client: ClientId) -> bool {
    client >= REGISTERED_BASE
}

fn assigned(client: ClientId, registered: u64) -> bool {
    is_registered_id(client) && client - REGISTERED_BASE < registered
}

impl PartialEq for SessionTable {
    fn eq(&self, other: &Self) -> bool {
        self.sessions == other.sessions && self.registered == other.registered
    }
}

impl Eq for SessionTable {}

fn slot_index(sessions: &BTreeMap<ClientId, Session>) -> BTreeSet<(Slot, ClientId)> {
    sessions.iter().map(|(c, s)| (s.slot, *c)).collect()
}

fn sum_of_seqs(sessions: &BTreeMap<ClientId, Session>) -> u64 {
    sessions
        .values()
        .fold(0u64, |sum, s| sum.wrapping_add(s.seq))
}

impl TryFrom<Wire> for SessionTable {
    type Error = String;

    fn try_from(w: Wire) -> Result<SessionTable, String> {
        if !w.sessions.keys().all(|c| assigned(*c, w.registered)) {
            return Err("a session of a client id never assigned".into());
        }
        let seq_sum = sum_of_seqs(&w.sessions);
        Ok(SessionTable {
            sessions: w.sessions,
            by_slot: None,
            seq_sum,
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

    /// Client ids assigned so far (by executed `Register`s).
    pub fn registered(&self) -> u64 {
        self.registered
    }

    /// Whether `client` is an id the log assigned already.
    pub fn is_assigned(&self, client: ClientId) -> bool {
        assigned(client, self.registered)
    }

    /// What the table says about a request of `client` (see the module's
    /// rules). Not for `Register`, whose nonce has no session.
    pub fn check(&self, client: ClientId) -> Check<'_> {
        match self.sessions.get(&client) {
            Some(s) => Check::Live(s),
            None if self.is_assigned(client) => Check::Expired,
            None => Check::Unknown,
        }
    }

    /// Records that `client`'s request executed with `session` (its seq,
    /// reply and slot), evicting the least recent session first if the
    /// client is new and the table holds `limit` sessions.
    pub fn record(&mut self, client: ClientId, session: Session, limit: usize) {
        if limit == UNBOUNDED {
            // Never evicts: no index to keep.
            self.by_slot = None;
            self.seq_sum = self.seq_sum.wrapping_add(session.seq);
            if let Some(old) = self.sessions.insert(client, session) {
                self.seq_sum = self.seq_sum.wrapping_sub(old.seq);
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
            while self.sessions.len() >= limit.max(1) {
                let Some((slot, evicted)) = by_slot.pop_first() else {
                    break;
                };
                debug_assert!(slot <= session.slot);
                if let Some(gone) = self.sessions.remove(&evicted) {
                    self.seq_sum = self.seq_sum.wrapping_sub(gone.seq);
                }
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
    pub fn register(&mut self, slot: Slot, limit: usize) -> ClientId {
        let client = REGISTERED_BASE.saturating_add(self.registered);
        self.registered = self.registered.saturating_add(1);
        let session = Session {
            seq: 0,
            reply: Reply::Registered { client },
            slot,
        };
        self.record(client, session, limit);
        client
    }

    /// Whether the index and the sum agree with what they are derived
    /// from, and every session is of an assigned id.
    pub fn is_consistent(&self) -> bool {
        self.by_slot
            .as_ref()
            .is_none_or(|by_slot| *by_slot == slot_index(&self.sessions))
            && self.seq_sum == sum_of_seqs(&self.sessions)
            && self.sessions.keys().all(|c| self.is_assigned(*c))
    }
}

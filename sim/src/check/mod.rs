//! The judges of every simulated run, one file per property:
//! - `agreement`: per-slot agreement and identical executed prefixes;
//! - `ballots`: a replica's ballot never decreases (across restarts, as
//!   far as it was durable);
//! - `linearizability`: the client history against the executed log
//!   (white-box), including reads served outside the log, and no lost
//!   acknowledged write;
//! - `sessions`: every replica's at-most-once table is the one the log
//!   gives, after each snapshot it installs, each restart, and at the end;
//! - `liveness`: everything issued completes after the faults heal, and
//!   the replicas converge to the state the log gives.
//!
//! The log is replayed on `model`, a reference key-value store with its
//! own session table, written apart from the core's execution. `slots` is
//! their slot-indexed map. Per protocol step the checkers do
//! only what cannot wait (a ballot compare, a digest lookup when a replica
//! executed something); the history is judged once, at the end.

pub mod agreement;
pub mod ballots;
pub mod linearizability;
pub mod liveness;
pub mod model;
pub mod sessions;
pub mod slots;

use std::collections::BTreeMap;

use bytes::Bytes;
use stutter_core::{Ballot, Replica, ReplicaId, Request, Slot, Snapshot};

use crate::history::HistOp;
use crate::trace_value::Ids;

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Violation {
    pub check: &'static str,
    pub detail: String,
}

/// Violations found so far, at most `MAX` of them: a broken run would
/// otherwise produce megabytes of messages.
#[derive(Default)]
pub struct Violations(Vec<Violation>);

impl Violations {
    const MAX: usize = 20;

    pub fn add(&mut self, check: &'static str, detail: String) {
        if self.0.len() < Self::MAX {
            self.0.push(Violation { check, detail });
        }
    }

    pub fn into_vec(self) -> Vec<Violation> {
        self.0
    }
}

/// Final state of a running replica: `(id, last executed, digest)` and
/// `(id, last executed, key-value state)`.
pub type Final = (ReplicaId, Slot, u64);
pub type FinalState = (ReplicaId, Slot, BTreeMap<Bytes, Bytes>);

pub struct Checker {
    agreement: agreement::Agreement,
    ballots: ballots::Ballots,
    sessions: sessions::Sessions,
    session_limit: usize,
    /// Whether a registered id without a session is expired (off only
    /// under `Bug::RegisteredNoExpiry`, so that the reference model judges
    /// the protocol the replicas run and only the at-most-once check can
    /// tell).
    registered_expiry: bool,
    violations: Violations,
}

impl Checker {
    /// A checker of `n` replicas whose session tables hold at most
    /// `session_limit` sessions (`Config::session_limit`).
    pub fn new(n: usize, session_limit: usize) -> Checker {
        Checker {
            agreement: agreement::Agreement::default(),
            ballots: ballots::Ballots::new(n),
            sessions: sessions::Sessions::default(),
            session_limit,
            registered_expiry: true,
            violations: Violations::default(),
        }
    }

    /// The checker with the model's expiry of registered ids switched
    /// (off only to judge `Bug::RegisteredNoExpiry` by at-most-once alone).
    pub fn registered_expiry(mut self, on: bool) -> Checker {
        self.registered_expiry = on;
        self
    }

    /// Replica `r`'s executed state at a moment named by `when` ("after
    /// installing a snapshot", ...): its session table is judged at the end.
    pub fn state_taken(&mut self, r: ReplicaId, when: &'static str, sm: &Snapshot) {
        self.sessions.sample(r, when, sm);
    }

    /// After every protocol step of replica `r`.
    pub fn after_step(&mut self, r: ReplicaId, rep: &Replica) {
        self.ballots.observe(r, rep.ballot(), &mut self.violations);
        self.agreement.executed_prefix(
            r,
            rep.last_executed(),
            rep.executed_digest(),
            &mut self.violations,
        );
    }

    /// Replica `r` crashed; `durable` is the ballot its log kept.
    pub fn crashed(&mut self, r: ReplicaId, durable: Ballot) {
        self.ballots.crashed(r, durable);
    }

    /// Replica `r` executed `value` in `slot`.
    pub fn executed(&mut self, r: ReplicaId, slot: Slot, value: Ids) {
        self.agreement.slot(r, slot, value, &mut self.violations);
    }

    /// Judges the run: `requests[i]` is the request of `history[i]`.
    pub fn finish(
        mut self,
        history: &[HistOp],
        requests: &[Request],
        finals: &[Final],
        states: &[FinalState],
    ) -> Vec<Violation> {
        let slots = self.agreement.into_slots();
        let log = linearizability::check(
            history,
            requests,
            &slots,
            &mut self.sessions,
            self.session_limit,
            self.registered_expiry,
            &mut self.violations,
        );
        liveness::check(
            history,
            finals,
            states,
            &log,
            slots.len(),
            &mut self.violations,
        );
        self.violations.into_vec()
    }
}

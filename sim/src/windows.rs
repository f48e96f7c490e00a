//! Faults aimed at windows (`Fault::PauseLeader` and the others after it in
//! `scenario.rs`): the world arms them at their time and fires each when it
//! sees its window open — a replica elected, an election started, a ballot
//! record issued to disk. Faults drawn uniformly in time hit such windows
//! by chance alone: a persist is pending for about a millisecond, a leader
//! is new for a few, and three leaders in a row within an election timeout
//! almost never happen on their own.

use stutter_core::{ballot_owner, Record, ReplicaId, Role, Time};

use crate::scenario::Fault;
use crate::world::{Ev, World};

/// A fault waiting for its window.
#[derive(Debug)]
pub(crate) struct Armed {
    fault: Fault,
    /// Elections still to see before a fault aimed at a leader fires on the
    /// one elected (0: it fires on another trigger).
    elections: u8,
}

impl World {
    /// Arms a fault aimed at a window (called when it is due).
    pub(crate) fn arm(&mut self, fault: Fault) {
        if self.now >= self.s.fault_end {
            return;
        }
        let elections = match fault {
            Fault::PauseLeader { nth, .. }
            | Fault::CrashLeader { nth, .. }
            | Fault::IsolateLeader { nth, .. }
                if nth > 0 =>
            {
                nth
            }
            Fault::PauseLeader { .. }
            | Fault::CrashLeader { .. }
            | Fault::IsolateLeader { .. }
            | Fault::CutLeader { .. }
            | Fault::SlowLeaderLink { .. } => match self.leader() {
                Some(l) => return self.fire_on_leader(l, fault),
                None => 1,
            },
            _ => 0,
        };
        self.armed.push(Armed { fault, elections });
    }

    /// The replica leading at the highest ballot, if any (a stopped leader
    /// still leads as far as it knows).
    fn leader(&self) -> Option<ReplicaId> {
        let leaders = self
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.replica.as_ref().map(|r| (i, r)));
        leaders
            .filter(|(_, r)| r.role() == Role::Leader)
            .max_by_key(|(_, r)| r.ballot())
            .map(|(i, _)| i as ReplicaId)
    }

    /// Armed faults expire with the fault window.
    fn windows_open(&mut self) -> bool {
        if self.now >= self.s.fault_end {
            self.armed.clear();
        }
        !self.armed.is_empty()
    }

    /// Replica `r` was elected (its `BecomeLeader` step).
    pub(crate) fn on_elected(&mut self, r: ReplicaId) {
        if !self.windows_open() {
            return;
        }
        let mut due = Vec::new();
        self.armed.retain_mut(|a| {
            if a.elections == 0 {
                return true;
            }
            a.elections -= 1;
            if a.elections > 0 {
                return true;
            }
            due.push(a.fault.clone());
            false
        });
        for f in due {
            self.fire_on_leader(r, f);
        }
    }

    /// Replica `r` started an election (its `StartElection` step).
    pub(crate) fn on_election_started(&mut self, r: ReplicaId) {
        if !self.windows_open() {
            return;
        }
        if let Some(i) = self
            .armed
            .iter()
            .position(|a| matches!(a.fault, Fault::PauseCandidate { .. }))
        {
            let a = self.armed.remove(i);
            self.faults.windows += 1;
            self.at(
                self.now,
                Ev::Fault(Fault::Pause {
                    replica: r,
                    duration: a.fault.length(),
                }),
            );
        }
    }

    /// Replica `r` issued `records` to disk, durable at `done`: if it adopted
    /// another replica's ballot, an armed crash falls inside the window
    /// (in its second half, so that what the step sent may have arrived).
    pub(crate) fn on_persist(&mut self, r: ReplicaId, records: &[Record], done: Time) {
        if !self.windows_open() {
            return;
        }
        let adopted = records
            .iter()
            .any(|rec| matches!(rec, Record::Ballot(b) if ballot_owner(*b) != r));
        let Some(i) = self
            .armed
            .iter()
            .position(|a| matches!(a.fault, Fault::CrashInBallotPersist { .. }))
        else {
            return;
        };
        if !adopted || done < self.now + 2 {
            return;
        }
        let a = self.armed.remove(i);
        let window = done - self.now;
        let at = self.rng.range(self.now + window / 2, done - 1);
        self.faults.windows += 1;
        self.at(
            at,
            Ev::Fault(Fault::Crash {
                replica: r,
                down_for: a.fault.length(),
            }),
        );
    }

    /// Fires a fault aimed at leader `l` (through the event queue: this may
    /// run in the middle of `l`'s step).
    fn fire_on_leader(&mut self, l: ReplicaId, fault: Fault) {
        self.faults.windows += 1;
        let n = self.s.n as u64;
        let follower = |w: &mut World| ((l as u64 + w.rng.range(1, n - 1)) % n) as ReplicaId;
        match fault {
            Fault::PauseLeader { duration, .. } => self.at(
                self.now,
                Ev::Fault(Fault::Pause {
                    replica: l,
                    duration,
                }),
            ),
            Fault::CrashLeader {
                after, down_for, ..
            } => self.at(
                self.now + after.max(1),
                Ev::Fault(Fault::Crash {
                    replica: l,
                    down_for,
                }),
            ),
            Fault::IsolateLeader {
                one_way, duration, ..
            } => self.at(
                self.now,
                Ev::Fault(Fault::Isolate {
                    replica: l,
                    one_way,
                    duration,
                }),
            ),
            Fault::CutLeader { duration } => {
                let b = follower(self);
                self.at(self.now, Ev::Fault(Fault::CutLink { a: l, b, duration }));
            }
            Fault::SlowLeaderLink { extra, duration } => {
                let to = follower(self);
                self.net.slow(l, to, extra);
                self.at(self.now + duration, Ev::Unslow { from: l, to, extra });
            }
            _ => {}
        }
    }
}

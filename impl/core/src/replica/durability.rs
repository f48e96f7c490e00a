//! The persist barrier. Acceptor state (ballot, accepted instances,
//! snapshots) goes to the driver as `Persist { token, records }`; every
//! output that depends on it (a promise, an acceptance, the leader's own
//! vote) is held until the driver reports `Persisted` with that token or a
//! later one. Tokens increase, so one report covers a group commit.

use std::collections::VecDeque;

use crate::io::{Output, Record};
use crate::message::Message;
use crate::trace::Action;
use crate::types::{Ballot, ReplicaId, Slot};

use super::{injected, Ignored, Replica};

/// Outputs held until the persist that precedes them is durable.
#[derive(Debug)]
pub(super) enum Deferred {
    Send {
        to: ReplicaId,
        msg: Message,
    },
    /// The leader's own acceptance of a slot it proposed or replayed.
    SelfVote {
        ballot: Ballot,
        slot: Slot,
    },
}

#[derive(Debug, Default)]
pub(super) struct Barrier {
    /// The newest token issued.
    pub next_token: u64,
    /// The newest token the driver reported durable.
    pub persisted_token: u64,
    /// Held outputs with the token they wait for, in issue order (so the
    /// tokens never decrease along the queue).
    pub deferred: VecDeque<(u64, Deferred)>,
}

impl Barrier {
    fn persist(&mut self, records: Vec<Record>, out: &mut Vec<Output>) {
        self.next_token += 1;
        out.push(Output::Persist {
            token: self.next_token,
            records,
        });
    }

    /// Whether something issued is not durable yet.
    fn holds(&self) -> bool {
        self.next_token > self.persisted_token
    }
}

impl Replica {
    pub(super) fn persist(&mut self, records: Vec<Record>, out: &mut Vec<Output>) {
        self.barrier.persist(records, out);
    }

    /// Holds `d` until everything persisted so far is durable.
    pub(super) fn after_persist(&mut self, d: Deferred, out: &mut Vec<Output>) {
        if self.barrier.holds() && !injected!(self.cfg, ReplyBeforePersist) {
            let token = self.barrier.next_token;
            self.barrier.deferred.push_back((token, d));
        } else {
            self.run_deferred(d, out);
        }
    }

    pub(super) fn send_durable(&mut self, to: ReplicaId, msg: Message, out: &mut Vec<Output>) {
        self.after_persist(Deferred::Send { to, msg }, out)
    }

    pub(super) fn on_persisted(&mut self, token: u64, out: &mut Vec<Output>) {
        // A token never issued is a driver bug: acting on it would send
        // what is not durable.
        assert!(
            token <= self.barrier.next_token,
            "Persisted {{ token: {token} }} but the newest token issued is {}",
            self.barrier.next_token
        );
        if token <= self.barrier.persisted_token {
            return self.ignore(Ignored::AlreadyDurable);
        }
        self.barrier.persisted_token = token;
        self.emit(Action::Persisted { token }, out);
        while self
            .barrier
            .deferred
            .front()
            .is_some_and(|(t, _)| *t <= token)
        {
            if let Some((_, d)) = self.barrier.deferred.pop_front() {
                self.run_deferred(d, out);
            }
        }
    }

    fn run_deferred(&mut self, d: Deferred, out: &mut Vec<Output>) {
        match d {
            Deferred::Send { to, msg } => out.push(Output::Send { to, msg }),
            Deferred::SelfVote { ballot, slot } => {
                // A vote for a leadership this replica has since lost
                // counts nowhere.
                if self.role.as_leader().is_some() && ballot == self.ballot {
                    let committed = self.add_vote(self.id, slot);
                    self.emit(
                        Action::HandleAccepted {
                            from: self.id,
                            ballot,
                            slot,
                            ok: true,
                            committed,
                        },
                        out,
                    );
                    if committed {
                        self.after_commit(out);
                    }
                }
            }
        }
    }
}

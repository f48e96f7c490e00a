//! GC coordination in the manner of Blade (Terei and Levy): a collection is
//! a short, scheduled unavailability the cluster plans around.
//!
//! - The driver's collector reports a collection due (`Input::GcDue`, with
//!   the bytes it may still allocate); the core answers `Output::Collect`
//!   once it is safe, and the driver reports `Input::GcDone` after.
//! - A follower asks its leader (`GcRequest`). The leader grants
//!   (`GcGrant`) while fewer than `n − majority` replicas collect under
//!   its grants (1 of 3, 2 of 5): a majority stays live. Others wait in a
//!   FIFO queue. A grant is counted until `GcDone`, or `gc_grant_timeout`.
//! - A leader due for a collection counts itself in that budget. When its
//!   turn comes it stops proposing, lets its in-flight slots commit and
//!   its most up-to-date live follower accept them (at most
//!   `gc_transfer_wait`), tells that follower to campaign at once
//!   (`TimeoutNow`), answers its queued requests with a redirect to it
//!   (clients retry with the same `(client, seq)`: at most once still
//!   holds), steps down, and then asks the new leader like any follower
//!   (`handoff.rs`). So no replica collects under a grant while it leads.
//! - A new leader does not know who collects under its predecessor's
//!   grants: it counts every peer that did not promise as collecting until
//!   it hears from it or the grant timeout passes.
//! - Past `gc_wait_max`, or with no headroom left, a replica collects
//!   anyway (`granted: false`); with coordination off it collects at once.
//!
//! Safety never depends on this phase: a collecting replica is only a
//! paused one, which Paxos tolerates. What it buys is latency.

use std::collections::{BTreeMap, VecDeque};

use crate::io::{Output, Timer};
use crate::message::Message;
use crate::trace::Action;
use crate::types::{Ballot, ReplicaId, Time};

use super::role::RoleState;
use super::{Ignored, Replica};

/// This replica's own collection.
#[derive(Debug, Default)]
pub(super) struct GcState {
    /// A collection is due (since when; whom we asked, at which ballot).
    pub due: Option<Due>,
    /// Collecting now: under the grant of `(leader, ballot)`, or forced.
    pub collecting: Option<Option<(ReplicaId, Ballot)>>,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Due {
    pub since: Time,
    pub asked: Option<(ReplicaId, Ballot)>,
    /// Not before this time: an old leader first lets its clients learn
    /// of the new one (their requests to it are redirected while it is
    /// up, instead of waiting for its collection to end).
    pub not_before: Time,
    /// A grant that came before `not_before`, used then.
    pub granted: Option<(ReplicaId, Ballot)>,
}

/// Whom the leader counts as collecting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Held {
    /// Granted at this time.
    Granted(Time),
    /// Did not promise this leader: may be collecting under an earlier
    /// leader's grant, counted until heard from or the grant timeout.
    Assumed(Time),
}

impl Held {
    fn since(self) -> Time {
        match self {
            Held::Granted(t) | Held::Assumed(t) => t,
        }
    }
}

/// The leader's side: the grants it holds, its queue, its own hand-off.
#[derive(Debug, Default)]
pub(super) struct Coordinator {
    pub collecting: BTreeMap<ReplicaId, Held>,
    pub queue: VecDeque<ReplicaId>,
    /// Handing leadership to this follower, since this time.
    pub transfer: Option<(ReplicaId, Time)>,
    /// The old leader that handed off to this one (at this time), in its
    /// grace and not yet asking for its grant (`Config::
    /// gc_grant_after_grace`): not a hand-off target until it asks, or
    /// until its grace and wait are surely over (it may have restarted).
    pub in_grace: Option<(ReplicaId, Time)>,
}

impl Coordinator {
    /// Peers that did not promise a new leader count as collecting.
    pub fn after_election(
        peers: impl Iterator<Item = ReplicaId>,
        promised: impl Fn(ReplicaId) -> bool,
        now: Time,
    ) -> Coordinator {
        let collecting = peers
            .filter(|p| !promised(*p))
            .map(|p| (p, Held::Assumed(now)))
            .collect();
        Coordinator {
            collecting,
            queue: VecDeque::new(),
            transfer: None,
            in_grace: None,
        }
    }

    /// Replicas counted as collecting, the leader's own hand-off included.
    pub fn used(&self) -> usize {
        self.collecting.len() + usize::from(self.transfer.is_some())
    }
}

impl Replica {
    /// How many replicas may collect under grants at once.
    pub(super) fn gc_budget(&self) -> usize {
        self.cfg.n.saturating_sub(self.quorum.majority())
    }

    /// Whether this replica collects (under a grant or forced).
    pub fn gc_collecting(&self) -> bool {
        self.gc.collecting.is_some()
    }

    /// Whether a collection is due and not yet started.
    pub fn gc_due(&self) -> bool {
        self.gc.due.is_some()
    }

    /// Leader: the replicas it counts as collecting under its grants.
    pub fn gc_granted(&self) -> Vec<ReplicaId> {
        self.role
            .as_leader()
            .map_or_else(Vec::new, |l| l.gc.collecting.keys().copied().collect())
    }

    pub(super) fn on_gc_due(&mut self, headroom: u64, out: &mut Vec<Output>) {
        if self.gc.collecting.is_some() || self.gc.due.is_some() {
            return self.ignore(Ignored::GcAlreadyDue);
        }
        if !self.cfg.gc_coordination || headroom == 0 || self.gc_budget() == 0 {
            self.emit(Action::GcDue { headroom }, out);
            return self.collect(None, out);
        }
        self.gc.due = Some(Due {
            since: self.now,
            asked: None,
            not_before: self.now,
            granted: None,
        });
        out.push(Output::SetTimer {
            timer: Timer::Gc,
            at: self.now + self.cfg.gc_wait_max,
        });
        self.emit(Action::GcDue { headroom }, out);
        self.ask_for_gc(out);
        if matches!(self.role, RoleState::Leader(_)) {
            self.leader_due(out);
        }
    }

    /// A follower due for a collection asks its leader, once per leader
    /// and ballot (a follower that does not know its leader yet asks when
    /// it hears from one: `gc_leader_known`).
    fn ask_for_gc(&mut self, out: &mut Vec<Output>) {
        let RoleState::Follower(f) = &self.role else {
            return;
        };
        let Some(to) = f.leader.filter(|l| *l != self.id) else {
            return;
        };
        let ballot = self.ballot;
        let now = self.now;
        let Some(due) = self.gc.due.as_mut() else {
            return;
        };
        if due.asked == Some((to, ballot)) || now < due.not_before || due.granted.is_some() {
            return;
        }
        due.asked = Some((to, ballot));
        self.emit(Action::RequestGc { to, ballot }, out);
        out.push(Output::Send {
            to,
            msg: Message::GcRequest { ballot },
        });
    }

    /// A follower heard from its leader: if due and not yet asked this
    /// leader at this ballot, it asks now.
    pub(super) fn gc_leader_known(&mut self, out: &mut Vec<Output>) {
        if self.gc.due.is_some() {
            self.ask_for_gc(out);
        }
    }

    fn collect(&mut self, grant: Option<(ReplicaId, Ballot)>, out: &mut Vec<Output>) {
        self.gc.due = None;
        // A leader that waited in its own queue and collects forced is no
        // longer waiting: left there, it would queue every later request
        // behind itself and hand off, when its turn came, for a collection
        // already made (testdata/gc_forced_leader.txt).
        let me = self.id;
        if let Some(l) = self.role.as_leader_mut() {
            l.gc.queue.retain(|p| *p != me);
        }
        self.gc.collecting = Some(grant);
        let granted = grant.is_some();
        self.emit(Action::Collect { granted }, out);
        out.push(Output::Collect { granted });
    }

    pub(super) fn on_gc_done(&mut self, out: &mut Vec<Output>) {
        let Some(grant) = self.gc.collecting.take() else {
            return self.ignore(Ignored::GcNotCollecting);
        };
        self.emit(Action::GcDone, out);
        if let Some((leader, ballot)) = grant {
            out.push(Output::Send {
                to: leader,
                msg: Message::GcDone { ballot },
            });
        }
    }

    /// The leader of `ballot` granted our request.
    pub(super) fn on_gc_grant(&mut self, from: ReplicaId, ballot: Ballot, out: &mut Vec<Output>) {
        self.emit(Action::HandleGcGrant { from, ballot }, out);
        let now = self.now;
        if let Some(due) = self.gc.due.as_mut().filter(|d| now < d.not_before) {
            // An old leader lets its clients be redirected first.
            due.granted = Some((from, ballot));
            let at = due.not_before;
            out.push(Output::SetTimer {
                timer: Timer::Gc,
                at,
            });
        } else if self.gc.due.is_some() && self.gc.collecting.is_none() {
            self.collect(Some((from, ballot)), out);
        } else {
            // Collected already (forced), or a duplicate: free the grant.
            out.push(Output::Send {
                to: from,
                msg: Message::GcDone { ballot },
            });
        }
    }

    /// The collection timer: a due replica that got no grant in time
    /// collects anyway (a leader hands off first if it can).
    pub(super) fn on_gc_timer(&mut self, out: &mut Vec<Output>) {
        let Some(due) = self.gc.due else {
            return self.ignore(Ignored::TimerNotDue);
        };
        // A grant counts only at the ballot it was given at: after a
        // promise to a newer leader, that leader does not count this
        // replica and may grant someone else (spec: GrantCurrent,
        // mutants/gc_stale_grant.tla). With a stale grant the replica waits
        // for its deadline as with none (the old leader's count expires);
        // it holds the grant, so it does not ask again (nor does the
        // spec's replica, whose grant is pending).
        let stale = due.granted.is_some_and(|(_, b)| b != self.ballot);
        if let Some(grant) = due.granted.filter(|_| self.now >= due.not_before && !stale) {
            return self.collect(Some(grant), out);
        }
        if self.now < due.since + self.cfg.gc_wait_max {
            if stale {
                // The grace's timer replaced the deadline's: set it again.
                out.push(Output::SetTimer {
                    timer: Timer::Gc,
                    at: due.since + self.cfg.gc_wait_max,
                });
            }
            // A transfer in progress checks back at each heartbeat too.
            if self
                .role
                .as_leader()
                .is_some_and(|l| l.gc.transfer.is_some())
            {
                self.advance_transfer(out);
            }
            return self.ignore(Ignored::TimerNotDue);
        }
        if self
            .role
            .as_leader()
            .is_some_and(|l| l.gc.transfer.is_some())
        {
            self.complete_transfer(out);
        }
        self.collect(None, out);
    }

    // ----- the leader's side -----

    pub(super) fn on_gc_request(&mut self, from: ReplicaId, ballot: Ballot, out: &mut Vec<Output>) {
        let budget = self.gc_budget();
        let now = self.now;
        let Some(l) = self.role.as_leader_mut() else {
            return;
        };
        if l.gc.in_grace.is_some_and(|(p, _)| p == from) {
            l.gc.in_grace = None;
        }
        let granted = match l.gc.collecting.get(&from) {
            // A retry: the grant was lost.
            Some(Held::Granted(_)) => true,
            _ => {
                l.gc.collecting.remove(&from);
                let self_waits = l.gc.queue.contains(&self.id) || l.gc.transfer.is_some();
                if !self_waits && l.gc.queue.is_empty() && l.gc.used() < budget {
                    l.gc.collecting.insert(from, Held::Granted(now));
                    true
                } else {
                    if !l.gc.queue.contains(&from) {
                        l.gc.queue.push_back(from);
                    }
                    false
                }
            }
        };
        self.emit(
            Action::HandleGcRequest {
                from,
                ballot,
                granted,
            },
            out,
        );
        if granted {
            self.emit(Action::GrantGc { to: from, ballot }, out);
            out.push(Output::Send {
                to: from,
                msg: Message::GcGrant { ballot },
            });
        }
    }

    pub(super) fn on_gc_done_from(
        &mut self,
        from: ReplicaId,
        ballot: Ballot,
        out: &mut Vec<Output>,
    ) {
        let Some(l) = self.role.as_leader_mut() else {
            return;
        };
        if l.gc.collecting.remove(&from).is_none() {
            return self.ignore(Ignored::GcNotGranted);
        }
        self.emit(
            Action::HandleGcDone {
                from,
                ballot,
                expired: false,
            },
            out,
        );
        self.pump_gc_queue(out);
    }

    /// The leader heard from `from`: a peer it assumed might be
    /// collecting is not.
    pub(super) fn gc_heard_from(&mut self, from: ReplicaId, out: &mut Vec<Output>) {
        let ballot = self.ballot;
        let Some(l) = self.role.as_leader_mut() else {
            return;
        };
        if matches!(l.gc.collecting.get(&from), Some(Held::Assumed(_))) {
            l.gc.collecting.remove(&from);
            self.emit(
                Action::HandleGcDone {
                    from,
                    ballot,
                    expired: true,
                },
                out,
            );
            self.pump_gc_queue(out);
        }
    }

    /// At each heartbeat: grants older than the timeout are released, and a
    /// hand-off in progress checks whether it can complete.
    pub(super) fn gc_heartbeat(&mut self, out: &mut Vec<Output>) {
        let (now, timeout, ballot) = (self.now, self.cfg.gc_grant_timeout, self.ballot);
        let Some(l) = self.role.as_leader_mut() else {
            return;
        };
        let expired: Vec<ReplicaId> =
            l.gc.collecting
                .iter()
                .filter(|(_, h)| h.since().saturating_add(timeout) <= now)
                .map(|(p, _)| *p)
                .collect();
        for p in &expired {
            l.gc.collecting.remove(p);
        }
        for from in expired {
            self.emit(
                Action::HandleGcDone {
                    from,
                    ballot,
                    expired: true,
                },
                out,
            );
        }
        self.pump_gc_queue(out);
        self.advance_transfer(out);
    }

    /// Gives free grants to the queue, in order; the leader's own turn
    /// starts its hand-off.
    pub(super) fn pump_gc_queue(&mut self, out: &mut Vec<Output>) {
        let (budget, now, me, ballot) = (self.gc_budget(), self.now, self.id, self.ballot);
        loop {
            let Some(l) = self.role.as_leader_mut() else {
                return;
            };
            if l.gc.transfer.is_some() || l.gc.used() >= budget {
                return;
            }
            let Some(next) = l.gc.queue.pop_front() else {
                return;
            };
            if next == me {
                if self.gc.due.is_none() {
                    // Not due any more (`collect` leaves the queue; this
                    // keeps a stale turn from moving leadership).
                    continue;
                }
                return self.start_transfer(out);
            }
            l.gc.collecting.insert(next, Held::Granted(now));
            self.emit(Action::GrantGc { to: next, ballot }, out);
            out.push(Output::Send {
                to: next,
                msg: Message::GcGrant { ballot },
            });
        }
    }

    /// A replica due for a collection was elected: it waits its turn as
    /// the leader (and hands off when it comes).
    pub(super) fn gc_became_leader(&mut self, out: &mut Vec<Output>) {
        self.leader_due(out);
    }
}

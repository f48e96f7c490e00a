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
//!   holds), steps down, and then asks the new leader like any follower.
//!   So no replica collects under a grant while it leads.
//! - A new leader does not know who collects under its predecessor's
//!   grants: it counts every peer that did not promise as collecting until
//!   it hears from it or the grant timeout passes.
//! - Past `gc_wait_max`, or with no headroom left, a replica collects
//!   anyway (`granted: false`); with coordination off it collects at once.
//!
//! Safety never depends on this phase: a collecting replica is only a
//! paused one, which Paxos tolerates. What it buys is latency.

use std::collections::{BTreeMap, VecDeque};

use crate::io::{Output, Record, Timer};
use crate::message::Message;
use crate::trace::Action;
use crate::types::{next_ballot, Ballot, Instance, ReplicaId, Reply, Time};

use super::role::RoleState;
use super::{injected, Ignored, Replica};

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
    fn pump_gc_queue(&mut self, out: &mut Vec<Output>) {
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

    /// The leader became due: its turn now if the budget allows, else it
    /// waits in the queue (and grants no one meanwhile).
    fn leader_due(&mut self, out: &mut Vec<Output>) {
        let (budget, me) = (self.gc_budget(), self.id);
        let Some(l) = self.role.as_leader_mut() else {
            return;
        };
        if l.gc.used() < budget && l.gc.queue.is_empty() {
            self.start_transfer(out);
        } else if !l.gc.queue.contains(&me) {
            l.gc.queue.push_back(me);
        }
    }

    /// Chooses the most up-to-date follower heard from recently and not
    /// collecting, and stops proposing. Without one, the leader waits (and
    /// collects forced at its deadline).
    fn start_transfer(&mut self, out: &mut Vec<Output>) {
        let (now, timeout) = (self.now, self.cfg.election_timeout);
        let grace = self
            .cfg
            .gc_handoff_grace
            .saturating_add(self.cfg.gc_wait_max);
        let Some(l) = self.role.as_leader_mut() else {
            return;
        };
        let in_grace =
            l.gc.in_grace
                .filter(|(_, since)| now < since.saturating_add(grace))
                .map(|(p, _)| p);
        // Not a replica collecting or waiting to (it would hand straight
        // back).
        let target = l
            .progress
            .iter()
            .filter(|(p, pr)| {
                pr.heard.saturating_add(timeout) >= now
                    && !l.gc.collecting.contains_key(*p)
                    && !l.gc.queue.contains(*p)
                    && in_grace != Some(**p)
            })
            .max_by_key(|(p, pr)| (pr.last_executed, std::cmp::Reverse(**p)))
            .map(|(p, _)| *p);
        match target {
            Some(t) => {
                l.gc.transfer = Some((t, now));
                self.advance_transfer(out);
            }
            None => {
                let me = self.id;
                if let Some(l) = self.role.as_leader_mut() {
                    if !l.gc.queue.contains(&me) {
                        l.gc.queue.push_front(me);
                    }
                }
            }
        }
    }

    /// Completes the hand-off once the target has accepted every slot still
    /// in flight (its election then recovers all of them from its own log),
    /// or once `gc_transfer_wait` has passed.
    pub(super) fn advance_transfer(&mut self, out: &mut Vec<Output>) {
        let (now, wait) = (self.now, self.cfg.gc_transfer_wait);
        let Some(l) = self.role.as_leader() else {
            return;
        };
        let Some((target, since)) = l.gc.transfer else {
            return;
        };
        let caught_up = l.votes.values().all(|v| v.ids.contains(target));
        // Eager: the promise `TimeoutNow` carries holds the slots in
        // flight, so the target's merge recovers them without the wait.
        let eager = self.cfg.gc_handoff_eager && self.cfg.gc_handoff_promise;
        if caught_up || now >= since + wait || eager {
            self.complete_transfer(out);
        }
    }

    /// Tells the target to campaign, redirects queued requests to it and
    /// steps down. The old leader then asks the new one for its grant.
    fn complete_transfer(&mut self, out: &mut Vec<Output>) {
        let ballot = self.ballot;
        let promise = if self.cfg.gc_handoff_promise {
            self.handoff_promise()
        } else {
            None
        };
        let Some(l) = self.role.as_leader_mut() else {
            return;
        };
        let Some((to, _)) = l.gc.transfer.take() else {
            return;
        };
        let mut pending: Vec<_> = l.pending.drain(..).collect();
        let reads = std::mem::take(&mut l.reads);
        if self.cfg.gc_handoff_eager && self.cfg.gc_handoff_promise && !self.cfg.commit_on_accept {
            // Slots still in flight commit under the next leader, and this
            // replica would learn so only at its next heartbeat: their
            // clients retry there with the same (client, seq) (a duplicate
            // executes once). With `commit_on_accept` it learns at the
            // next `Accept` and answers them itself.
            for slot in l.votes.keys() {
                if let Some(inst) = self.log.get(*slot) {
                    pending.extend(inst.value.requests().iter().cloned());
                }
            }
        }
        for req in pending {
            if self.waiting.remove(&(req.client, req.seq)) {
                let reply = Reply::Redirect { leader: Some(to) };
                out.push(Output::Reply {
                    client: req.client,
                    seq: req.seq,
                    reply,
                });
            }
        }
        for read in reads.into_all() {
            out.push(Output::Reply {
                client: read.client,
                seq: read.seq,
                reply: Reply::Redirect { leader: Some(to) },
            });
        }
        match promise {
            None => {
                out.push(Output::Send {
                    to,
                    msg: Message::TimeoutNow {
                        ballot,
                        promised: None,
                        entries: Vec::new(),
                    },
                });
                self.emit(Action::TransferLeadership { to, ballot }, out);
                self.become_follower(out);
                if let Some(f) = self.role.as_follower_mut() {
                    f.leader = Some(to);
                }
            }
            Some((promised, entries)) => {
                // The promise: adopted (persisted, and followed: `to` owns
                // it) before it leaves, exactly as a `Prepare(promised)`
                // would be answered. From here this replica rejects its own
                // old ballot's messages, like any acceptor that promised.
                // One step, traced once (the spec's TransferWithPromise).
                if !injected!(self.cfg, HandoffPromiseNotAdopted) {
                    self.become_follower(out);
                    self.ballot = promised;
                    self.persist(vec![Record::Ballot(promised)], out);
                }
                if let Some(f) = self.role.as_follower_mut() {
                    f.leader = Some(to);
                }
                self.emit(
                    Action::TransferWithPromise {
                        to,
                        ballot,
                        promised,
                    },
                    out,
                );
                let msg = Message::TimeoutNow {
                    ballot,
                    promised: Some(promised),
                    entries,
                };
                self.send_durable(to, msg, out);
            }
        }
        let not_before = self.now + self.cfg.gc_handoff_grace;
        if let Some(due) = self.gc.due.as_mut() {
            // The grant must come from the next leader, asked once clients
            // have had time to be redirected there.
            due.asked = None;
            due.not_before = not_before;
        }
    }

    /// The leader, handing off to its transfer target, promises the
    /// target's next ballot: that ballot and the promise's content, its
    /// instances above the target's last executed as the leader knows it
    /// (a lower figure than the target's own only carries more). `None`
    /// when the leader trimmed beyond that point: a promise would then
    /// need its snapshot, and the target runs a full election instead.
    fn handoff_promise(&self) -> Option<(Ballot, Vec<Instance>)> {
        let l = self.role.as_leader()?;
        let (to, _) = l.gc.transfer?;
        let known = l.progress.get(&to)?.last_executed;
        if self.log.trimmed() > known {
            return None;
        }
        let entries = self.log.iter_from(known).cloned().collect();
        Some((next_ballot(self.ballot, to), entries))
    }

    /// Our leader is about to collect and chose us: campaign now. With
    /// the old leader's promise of the ballot we campaign at, that promise
    /// counts as if it had answered our `Prepare` (which it is not sent).
    pub(super) fn on_timeout_now(
        &mut self,
        from: ReplicaId,
        ballot: Ballot,
        promised: Option<Ballot>,
        entries: Vec<Instance>,
        out: &mut Vec<Output>,
    ) {
        if self.gc.collecting.is_some() {
            return self.ignore(Ignored::TimeoutNowWhileCollecting);
        }
        self.emit(Action::HandleTimeoutNow { from, ballot }, out);
        // Only the ballot we are about to campaign at: the promise is for
        // that one exactly.
        let carried = promised.filter(|b| *b == next_ballot(self.ballot, self.id));
        self.start_election(carried.map(|_| from), out);
        if let RoleState::Candidate(c) = &mut self.role {
            c.handed_off = Some(from);
        }
        if carried.is_some_and(|b| b == self.ballot) {
            self.on_promise(from, entries, None, out);
        }
    }

    /// Elected after `old` handed off to us: `old` is due for a
    /// collection, so it waits in our queue as if it had asked.
    pub(super) fn gc_handed_off_by(&mut self, old: ReplicaId, out: &mut Vec<Output>) {
        if !self.cfg.gc_coordination {
            return;
        }
        let (after_grace, now) = (self.cfg.gc_grant_after_grace, self.now);
        if let Some(l) = self.role.as_leader_mut() {
            l.gc.collecting.remove(&old);
            if after_grace {
                // It asks when its grace ends; a grant now would hold the
                // budget through the grace, and a due leader could not hand
                // off meanwhile.
                l.gc.in_grace = Some((old, now));
            } else if !l.gc.queue.contains(&old) {
                l.gc.queue.push_back(old);
            }
        }
        self.pump_gc_queue(out);
    }

    /// Whether the leader is handing off (and so proposes nothing new).
    /// Public for the simulator's study, which times the hand-offs.
    pub fn handing_off(&self) -> bool {
        self.role
            .as_leader()
            .is_some_and(|l| l.gc.transfer.is_some())
    }
}

//! A leader's hand-off before it collects (GC coordination, `gc.rs`):
//! when its turn in the collection budget comes, the leader stops
//! proposing, lets its most up-to-date live follower catch up with the
//! slots in flight (at most `gc_transfer_wait`), tells it to campaign at
//! once (`TimeoutNow`, carrying the leader's promise of the target's next
//! ballot with `gc_handoff_promise`), redirects its queued clients there
//! and steps down; it then asks the new leader for its grant like any
//! follower. So no replica collects under a grant while it leads.

use crate::io::{Output, Record};
use crate::message::Message;
use crate::trace::Action;
use crate::types::{next_ballot, Ballot, Instance, ReplicaId, Reply};

use super::role::RoleState;
use super::{injected, Ignored, Replica};

impl Replica {
    /// The leader became due: its turn now if the budget allows, else it
    /// waits in the queue (and grants no one meanwhile).
    pub(super) fn leader_due(&mut self, out: &mut Vec<Output>) {
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
    pub(super) fn start_transfer(&mut self, out: &mut Vec<Output>) {
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
    pub(super) fn complete_transfer(&mut self, out: &mut Vec<Output>) {
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

//! Replication (the accept phase): client requests at the leader, `Propose`
//! within the window, `Accept` at the acceptors, `Accepted` counted into a
//! commit, and accepts resent when the network lost them.

use std::sync::Arc;

use crate::io::{Output, Record};
use crate::message::Message;
use crate::quorum::VoteSet;
use crate::sessions::is_registered_id;
use crate::state_machine::Outcome;
use crate::trace::{value_ids, Action};
use crate::types::{Ballot, InstanceState, Op, ReplicaId, Reply, Request, Slot, Time, Value};

use super::durability::Deferred;
use super::role::RoleState;
use super::{injected, Replica};

/// Acceptances of one slot the leader proposed or replayed.
#[derive(Clone, Copy, Debug)]
pub(super) struct Votes {
    /// Who accepted, the leader itself included once its accept is durable.
    pub ids: VoteSet,
    /// When `Accept` was last sent for it (to resend what the network lost).
    pub sent: Time,
}

impl Replica {
    pub(super) fn on_request(&mut self, req: Request, out: &mut Vec<Output>) {
        let (client, seq) = (req.client, req.seq);
        // Seq 0 is reserved for `Register` (`Request::malformed`): refused
        // here, never proposed.
        if req.malformed().is_some() {
            out.push(Output::Reply {
                client,
                seq,
                reply: Reply::Malformed,
            });
            return;
        }
        // Only ids the log assigned are served: any other id is refused
        // here, definite, nothing proposed; the client registers and
        // continues under its new id. A `Register` passes (its id is a
        // nonce), and so does a read: it changes nothing, needs no
        // session, and is never put in the log (below), so a read-only
        // client need not register.
        let unregistered = !is_registered_id(client);
        if unregistered && !matches!(req.op, Op::Register | Op::Get { .. }) {
            out.push(Output::Reply {
                client,
                seq,
                reply: Reply::UnknownClient,
            });
            return;
        }
        // The negative control answers reads from the local state on any
        // replica, leader or not, as a driver that skipped the protocol
        // would (the campaigns' --unsafe local-reads).
        if injected!(self.cfg, LocalReads) {
            if let Op::Get { key } = &req.op {
                let reply = Reply::Value(self.sm.kv.get(key).cloned());
                out.push(Output::Reply { client, seq, reply });
                return;
            }
        }
        if let RoleState::Candidate(c) = &mut self.role {
            if c.handed_off.is_some() && c.held.len() < self.cfg.max_pending {
                c.held.push(req);
                return;
            }
        }
        let Some(l) = self.role.as_leader() else {
            let leader = self.leader().filter(|l| *l != self.id);
            out.push(Output::Reply {
                client,
                seq,
                reply: Reply::Redirect { leader },
            });
            return;
        };
        // A `Register` (seq 0) is never answered early: it executes each
        // time it is chosen. Nor is an id this replica has not seen
        // assigned (`Snapshot::lookup`), nor an unregistered id's read
        // (it has no session to look up).
        let session = if unregistered {
            None
        } else {
            self.sm.lookup(client, seq)
        };
        if let Some(outcome) = session {
            let no_expiry = injected!(self.cfg, RegisteredNoExpiry);
            if !(no_expiry && outcome == Outcome::Expired) {
                out.push(Output::Reply {
                    client,
                    seq,
                    reply: outcome.reply(),
                });
                return;
            }
        }
        if l.queued.contains(&(client, seq)) {
            // A resend of a request in flight: answered when it executes.
            self.waiting.insert((client, seq));
            return;
        }
        // The storage alarm: a write now would wait for a disk that cannot
        // take it; refused at once, definitely. Reads go on below.
        if self.storage_full && !matches!(req.op, Op::Get { .. }) {
            out.push(Output::Reply {
                client,
                seq,
                reply: Reply::StorageFull,
            });
            return;
        }
        if l.pending.len() + l.reads.len() >= self.cfg.max_pending {
            out.push(Output::Reply {
                client,
                seq,
                reply: Reply::Busy,
            });
            return;
        }
        // A read of a registered id without a session goes through the
        // log: it is expired or unknown, which only execution may decide
        // for an id this replica has not seen assigned. Any other read is
        // served outside the log (ReadIndex).
        let read_in_log = !unregistered && self.sm.sessions.get(&client).is_none();
        if let Op::Get { key } = req.op {
            if !read_in_log {
                return self.queue_read(client, seq, key, out);
            }
            let req = Request {
                client,
                seq,
                op: Op::Get { key },
            };
            if let Some(l) = self.role.as_leader_mut() {
                l.queued.insert((client, seq));
                l.pending.push_back(req);
            }
            self.waiting.insert((client, seq));
            return self.try_propose(out);
        }
        if let Some(l) = self.role.as_leader_mut() {
            l.queued.insert((client, seq));
            l.pending.push_back(req);
        }
        self.waiting.insert((client, seq));
        self.try_propose(out);
    }

    /// Proposes pending requests while the window has room.
    pub(super) fn try_propose(&mut self, out: &mut Vec<Output>) {
        let window = self.cfg.window.max(1);
        let max_batch = self.cfg.max_batch.max(1);
        // A leader handing off for a collection proposes nothing new: its
        // pending requests go to the next leader.
        if self.handing_off() {
            return;
        }
        loop {
            let Some(l) = self.role.as_leader_mut() else {
                return;
            };
            if l.votes.len() >= window || l.pending.is_empty() {
                return;
            }
            let k = l.pending.len().min(max_batch);
            let batch: Vec<Request> = l.pending.drain(..k).collect();
            let value = Value::Batch(Arc::new(batch));
            let slot = self.log.last_index() + 1;
            let ballot = self.ballot;
            let committed = self.cfg.commit_on_accept.then_some(self.sm.last_executed);
            l.votes.insert(
                slot,
                Votes {
                    ids: VoteSet::default(),
                    sent: self.now,
                },
            );
            self.log.put(crate::types::Instance {
                slot,
                ballot,
                value: value.clone(),
                state: InstanceState::InProgress,
            });
            self.persist(
                vec![Record::Accept {
                    slot,
                    ballot,
                    value: value.clone(),
                }],
                out,
            );
            if self.cfg.trace {
                self.emit(
                    Action::Propose {
                        slot,
                        value: value_ids(&value),
                    },
                    out,
                );
            }
            for p in self.peers().collect::<Vec<_>>() {
                out.push(Output::Send {
                    to: p,
                    msg: Message::Accept {
                        ballot,
                        slot,
                        value: value.clone(),
                        committed,
                    },
                });
            }
            self.after_persist(Deferred::SelfVote { ballot, slot }, out);
        }
    }

    /// What an `Accept` carries as the leader's commit point
    /// (`Config::commit_on_accept`).
    pub(super) fn accept_committed(&self) -> Option<Slot> {
        self.cfg.commit_on_accept.then_some(self.sm.last_executed)
    }

    /// `Accept` at a ballot the ballot rule let through, at a follower;
    /// then the commit point it carries, if any, as a heartbeat's.
    pub(super) fn on_accept(
        &mut self,
        from: ReplicaId,
        b: Ballot,
        slot: Slot,
        value: Value,
        committed: Option<Slot>,
        out: &mut Vec<Output>,
    ) {
        if let Some(f) = self.role.as_follower_mut() {
            f.leader = Some(from);
            f.last_heard = self.now;
        }
        let keep = slot <= self.sm.last_executed
            || self.log.get(slot).is_some_and(|i| i.state.is_committed());
        let trace_value = if self.cfg.trace {
            value_ids(&value)
        } else {
            None
        };
        if !keep {
            self.log.put(crate::types::Instance {
                slot,
                ballot: b,
                value: value.clone(),
                state: InstanceState::InProgress,
            });
            self.persist(
                vec![Record::Accept {
                    slot,
                    ballot: b,
                    value,
                }],
                out,
            );
        }
        self.send_durable(
            from,
            Message::Accepted {
                ballot: b,
                slot,
                ok: true,
            },
            out,
        );
        self.emit(
            Action::HandleAccept {
                from,
                ballot: b,
                slot,
                ok: true,
                value: trace_value,
            },
            out,
        );
        if let Some(lle) = committed {
            self.learn_commit(from, b, slot, lle, out);
        }
    }

    /// The answer to an `Accept` below this acceptor's ballot.
    pub(super) fn reject_accept(
        &mut self,
        from: ReplicaId,
        b: Ballot,
        slot: Slot,
        value: &Value,
        out: &mut Vec<Output>,
    ) {
        let msg = Message::Accepted {
            ballot: self.ballot,
            slot,
            ok: false,
        };
        out.push(Output::Send { to: from, msg });
        if self.cfg.trace {
            self.emit(
                Action::HandleAccept {
                    from,
                    ballot: b,
                    slot,
                    ok: false,
                    value: value_ids(value),
                },
                out,
            );
        }
    }

    /// An acceptance of this leader's current ballot.
    pub(super) fn on_accepted(&mut self, from: ReplicaId, slot: Slot, out: &mut Vec<Output>) {
        let committed = self.add_vote(from, slot);
        self.emit(
            Action::HandleAccepted {
                from,
                ballot: self.ballot,
                slot,
                ok: true,
                committed,
            },
            out,
        );
        if committed {
            self.after_commit(out);
        } else {
            self.advance_transfer(out);
        }
    }

    /// Counts a vote; returns whether it committed the slot. A vote for a
    /// slot that is not waiting (committed already, or never proposed by
    /// this leader) changes nothing.
    pub(super) fn add_vote(&mut self, id: ReplicaId, slot: Slot) -> bool {
        let Some(l) = self.role.as_leader_mut() else {
            return false;
        };
        let Some(v) = l.votes.get_mut(&slot) else {
            return false;
        };
        v.ids.insert(id);
        let enough = self.quorum.reached(&v.ids)
            || (injected!(self.cfg, CommitWithoutMajority) && v.ids.contains(self.id));
        if !enough {
            return false;
        }
        l.votes.remove(&slot);
        if let Some(inst) = self.log.get_mut(slot) {
            if inst.state == InstanceState::InProgress {
                inst.state = InstanceState::Committed;
            }
        }
        true
    }

    /// The network may lose an `Accept` (a broken connection, a restarted
    /// peer): slots still uncommitted a heartbeat interval after their last
    /// send go again to the peers that have not acknowledged them.
    pub(super) fn resend_accepts(&mut self, out: &mut Vec<Output>) {
        let (now, ballot, me, n) = (self.now, self.ballot, self.id, self.cfg.n);
        // A resent accept carries no commit point: the spec (and trace
        // validation) knows one Accept per slot, with the commit point it
        // was proposed with; heartbeats carry the newer one.
        let committed = None;
        let due = self.cfg.heartbeat_interval;
        let RoleState::Leader(l) = &mut self.role else {
            return;
        };
        for (slot, v) in l.votes.iter_mut().take(self.cfg.catchup_max.max(1)) {
            if v.sent.saturating_add(due) > now {
                continue;
            }
            // Every voted slot holds this leader's instance (an invariant).
            let Some(inst) = self.log.get(*slot) else {
                continue;
            };
            v.sent = now;
            for p in (0..n as u16)
                .map(|i| i as ReplicaId)
                .filter(|p| *p != me && !v.ids.contains(*p))
            {
                let msg = Message::Accept {
                    ballot,
                    slot: *slot,
                    value: inst.value.clone(),
                    committed,
                };
                out.push(Output::Send { to: p, msg });
            }
        }
    }
}

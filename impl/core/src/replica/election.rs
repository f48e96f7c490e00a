//! Election (the prepare phase): the election timer, `Prepare`, `Promise`,
//! and `BecomeLeader`, which merges the promised logs and replays them at
//! the new ballot.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use crate::io::{Output, Record, Timer};
use crate::message::Message;
use crate::quorum::VoteSet;
use crate::state_machine::Snapshot;
use crate::trace::{value_ids, Action, SessionsSummary, SlotSummary};
use crate::types::{next_ballot, Ballot, Instance, InstanceState, ReplicaId, Slot, Time, Value};

use super::durability::Deferred;
use super::reads::ReadQueue;
use super::replication::Votes;
use super::role::{CandidateState, LeaderState, Progress, RoleState};
use super::{injected, Ignored, Replica, MAX_SLOTS_AHEAD};

/// What a peer's promise carried.
#[derive(Debug, Default)]
pub(super) struct PromiseData {
    pub entries: Vec<Instance>,
    pub snapshot: Option<Arc<Snapshot>>,
}

impl Replica {
    fn jitter(&mut self) -> Time {
        match self.cfg.election_jitter {
            0 => 0,
            j => self.rng.next_u64() % (j + 1),
        }
    }

    pub(super) fn arm_election(&mut self, from: Time, out: &mut Vec<Output>) {
        self.election_deadline = from + self.cfg.election_timeout + self.jitter();
        out.push(Output::SetTimer {
            timer: Timer::Election,
            at: self.election_deadline,
        });
    }

    pub(super) fn on_election_timer(&mut self, out: &mut Vec<Output>) {
        if self.now < self.election_deadline {
            return self.ignore(Ignored::TimerNotDue);
        }
        match &self.role {
            RoleState::Leader(_) => self.ignore(Ignored::ElectionTimerAtLeader),
            RoleState::Follower(f) if self.now < f.last_heard + self.cfg.election_timeout => {
                let heard = f.last_heard;
                self.arm_election(heard, out)
            }
            RoleState::Follower(_) | RoleState::Candidate(_) => self.campaign(out),
        }
    }

    /// Raises the ballot and asks the peers for their promises: all of
    /// them, or with `promised_by` (which promised already, in a
    /// hand-off's `TimeoutNow`) the others, and none if that promise and
    /// our own are a majority.
    pub(super) fn start_election(&mut self, promised_by: Option<ReplicaId>, out: &mut Vec<Output>) {
        let old = std::mem::replace(
            &mut self.role,
            RoleState::Candidate(CandidateState {
                promised: VoteSet::of(self.id),
                promises: BTreeMap::new(),
                handed_off: None,
                held: Vec::new(),
            }),
        );
        if let RoleState::Candidate(c) = old {
            // A campaign that timed out: what it held goes elsewhere.
            self.redirect_held(&c.held, out);
        }
        self.ballot = next_ballot(self.ballot, self.id);
        self.persist(vec![Record::Ballot(self.ballot)], out);
        self.emit(
            Action::StartElection {
                ballot: self.ballot,
            },
            out,
        );
        let msg = Message::Prepare {
            ballot: self.ballot,
            last_executed: self.sm.last_executed,
        };
        let mut have = VoteSet::of(self.id);
        if let Some(p) = promised_by {
            have.insert(p);
        }
        let ask = promised_by.is_none() || !self.quorum.reached(&have);
        for p in self
            .peers()
            .filter(|p| ask && !have.contains(*p))
            .collect::<Vec<_>>()
        {
            self.send_durable(p, msg.clone(), out);
        }
        self.arm_election(self.now, out);
        self.become_leader_if_elected(out);
    }

    /// `Prepare` at a ballot the ballot rule let through (raised to, or the
    /// one already promised to the same candidate).
    pub(super) fn on_prepare(
        &mut self,
        from: ReplicaId,
        b: Ballot,
        cand_le: Slot,
        out: &mut Vec<Output>,
    ) {
        if let Some(f) = self.role.as_follower_mut() {
            f.last_heard = self.now;
        }
        let (after, snapshot) = if self.log.trimmed() > cand_le {
            (self.sm.last_executed, Some(Arc::new(self.sm.clone())))
        } else {
            (cand_le, None)
        };
        let entries: Vec<Instance> = self.log.iter_from(after).cloned().collect();
        let msg = Message::Promise {
            ballot: b,
            ok: true,
            last_executed: self.sm.last_executed,
            entries,
            snapshot,
        };
        if injected!(self.cfg, PromiseBeforePersist) {
            out.push(Output::Send { to: from, msg });
        } else {
            self.send_durable(from, msg, out);
        }
        self.emit(
            Action::HandlePrepare {
                from,
                ballot: b,
                ok: true,
            },
            out,
        );
    }

    /// The answer to a `Prepare` the ballot rule rejects.
    pub(super) fn reject_prepare(&mut self, from: ReplicaId, b: Ballot, out: &mut Vec<Output>) {
        let msg = Message::Promise {
            ballot: self.ballot,
            ok: false,
            last_executed: self.sm.last_executed,
            entries: Vec::new(),
            snapshot: None,
        };
        out.push(Output::Send { to: from, msg });
        self.emit(
            Action::HandlePrepare {
                from,
                ballot: b,
                ok: false,
            },
            out,
        );
    }

    /// A promise for this candidate's current ballot.
    pub(super) fn on_promise(
        &mut self,
        from: ReplicaId,
        entries: Vec<Instance>,
        snapshot: Option<Arc<Snapshot>>,
        out: &mut Vec<Output>,
    ) {
        let limit = self.sm.last_executed + MAX_SLOTS_AHEAD;
        let entries = entries
            .into_iter()
            .filter(|e| e.slot > Slot::ZERO && e.slot <= limit)
            .collect();
        let RoleState::Candidate(c) = &mut self.role else {
            return self.ignore(Ignored::AnswerForRoleNotHeld);
        };
        c.promised.insert(from);
        c.promises.insert(from, PromiseData { entries, snapshot });
        self.emit(
            Action::HandlePromise {
                from,
                ballot: self.ballot,
                ok: true,
            },
            out,
        );
        self.become_leader_if_elected(out);
    }

    fn become_leader_if_elected(&mut self, out: &mut Vec<Output>) {
        if let RoleState::Candidate(c) = &self.role {
            if self.quorum.reached(&c.promised) {
                self.become_leader(out);
            }
        }
    }

    fn become_leader(&mut self, out: &mut Vec<Output>) {
        let RoleState::Candidate(c) = &mut self.role else {
            return;
        };
        let merged_from: Vec<ReplicaId> = c.promised.iter().collect();
        let promises = std::mem::take(&mut c.promises);
        let held = std::mem::take(&mut c.held);
        let handed_off_by = c.handed_off;

        // 1. A promiser that trimmed beyond our last executed sent its state.
        let mut snapshot_from = None;
        let mut records = Vec::new();
        let best = promises
            .iter()
            .filter_map(|(id, p)| p.snapshot.as_ref().map(|s| (*id, s)))
            .max_by_key(|(_, s)| s.last_executed);
        if let Some((id, snap)) = best {
            if snap.last_executed > self.sm.last_executed {
                snapshot_from = Some(id);
                let snap = snap.clone();
                records.push(self.install_snapshot(snap, out));
            }
        }

        // 2. Merge: committed wins, else highest ballot; gaps become no-ops.
        let base = self.sm.last_executed;
        let mut merged = self.merge(base, &promises);
        let promised_max = promises
            .values()
            .flat_map(|p| p.entries.iter().map(|i| i.slot))
            .max()
            .unwrap_or(Slot::ZERO);
        let max_slot = promised_max.max(self.log.last_index()).max(base);

        // 3. Replay every merged slot at the new ballot.
        let ballot = self.ballot;
        let mut votes = BTreeMap::new();
        records.reserve((max_slot - base) as usize);
        let mut replay = Vec::with_capacity((max_slot - base) as usize);
        let mut summaries = Vec::new();
        for slot in Slot::between(base + 1, max_slot) {
            let (value, committed, accepted_at) = match merged.remove(&slot) {
                Some((v, c, b)) => (v, c, b),
                None if injected!(self.cfg, SkipNoopFill) => continue,
                None => (Value::Noop, false, ballot),
            };
            let state = if committed {
                InstanceState::Committed
            } else {
                InstanceState::InProgress
            };
            if self.cfg.trace {
                summaries.push(SlotSummary {
                    slot,
                    ballot,
                    value: value_ids(&value),
                    committed,
                });
            }
            self.log.put(Instance {
                slot,
                ballot,
                value: value.clone(),
                state,
            });
            let logged_at = if injected!(self.cfg, WrongBallotReplay) {
                accepted_at
            } else {
                ballot
            };
            records.push(Record::Accept {
                slot,
                ballot: logged_at,
                value: value.clone(),
            });
            if !committed {
                votes.insert(
                    slot,
                    Votes {
                        ids: VoteSet::default(),
                        sent: self.now,
                    },
                );
            }
            replay.push((slot, value, committed));
        }
        let peers: Vec<ReplicaId> = self.peers().collect();
        let progress = peers
            .iter()
            .map(|p| {
                (
                    *p,
                    Progress {
                        last_executed: Slot::ZERO,
                        heard: self.now,
                        snapshot_sent: None,
                    },
                )
            })
            .collect();
        self.role = RoleState::Leader(Box::new(LeaderState {
            votes,
            pending: VecDeque::new(),
            queued: BTreeSet::new(),
            progress,
            replay_top: max_slot,
            reads: ReadQueue::default(),
            heartbeat_deadline: self.now,
            gc: if self.cfg.gc_coordination {
                super::gc::Coordinator::after_election(
                    peers.iter().copied(),
                    |p| merged_from.contains(&p),
                    self.now,
                )
            } else {
                super::gc::Coordinator::default()
            },
        }));
        if !records.is_empty() {
            self.persist(records, out);
        }
        let leader_committed = self.accept_committed();
        for (slot, value, done) in replay {
            for &p in &peers {
                out.push(Output::Send {
                    to: p,
                    msg: Message::Accept {
                        ballot,
                        slot,
                        value: value.clone(),
                        committed: leader_committed,
                    },
                });
            }
            if !done {
                self.after_persist(Deferred::SelfVote { ballot, slot }, out);
            }
        }
        let sessions = if self.cfg.trace {
            self.sm.sessions_summary(self.cfg.session_limit)
        } else {
            SessionsSummary::default()
        };
        self.emit(
            Action::BecomeLeader {
                ballot,
                merged_from,
                snapshot_from,
                entries: summaries,
                sessions,
            },
            out,
        );
        self.execute_committed(out);
        self.send_heartbeats(out);
        self.try_propose(out);
        // Requests held while campaigning after a hand-off.
        for req in held {
            self.on_request(req, out);
        }
        if let Some(old) = handed_off_by {
            self.gc_handed_off_by(old, out);
        }
        if self.gc.due.is_some() {
            self.gc_became_leader(out);
        }
    }

    /// The value each slot above `base` takes: an instance known committed
    /// anywhere wins; otherwise the one accepted at the highest ballot.
    /// Slot ↦ (value, committed, ballot).
    fn merge(
        &self,
        base: Slot,
        promises: &BTreeMap<ReplicaId, PromiseData>,
    ) -> BTreeMap<Slot, (Value, bool, Ballot)> {
        let mut merged: BTreeMap<Slot, (Value, bool, Ballot)> = BTreeMap::new();
        let mut consider = |inst: &Instance| {
            if inst.slot <= base {
                return;
            }
            let cand = (inst.value.clone(), inst.state.is_committed(), inst.ballot);
            match merged.get(&inst.slot) {
                Some((_, true, _)) => {}
                Some((_, false, b)) if !cand.1 && cand.2 <= *b => {}
                _ => {
                    merged.insert(inst.slot, cand);
                }
            }
        };
        for inst in self.log.iter_from(base) {
            consider(inst);
        }
        if !injected!(self.cfg, SkipMerge) {
            for p in promises.values() {
                for inst in &p.entries {
                    consider(inst);
                }
            }
        }
        merged
    }
}

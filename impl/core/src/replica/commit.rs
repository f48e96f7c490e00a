//! Commit and execution: executing committed slots in order, the leader's
//! heartbeats (which carry its `last_executed`, the followers' commit
//! point), the followers' answers (their progress, `global_last_executed`),
//! and check quorum.

use crate::io::{Output, Timer};
use crate::message::Message;
use crate::quorum::VoteSet;
use crate::state_machine::{digest_step, ExecBugs, Outcome};
use crate::trace::{value_ids, Action};
use crate::types::{Ballot, InstanceState, Op, ReplicaId, Request, Slot};

use super::role::RoleState;
use super::{injected, Ignored, Replica};

/// What a request adds to the log and the state, for `Config::trim_bytes`.
fn request_bytes(req: &Request) -> u64 {
    let payload = match &req.op {
        Op::Get { key } | Op::Del { key } => key.len(),
        Op::Put { key, value } => key.len() + value.len(),
        Op::Cas { key, from, to } => key.len() + from.as_ref().map_or(0, |f| f.len()) + to.len(),
        Op::Register => 0,
    };
    payload as u64 + 24
}

impl Replica {
    pub(super) fn after_commit(&mut self, out: &mut Vec<Output>) {
        self.advance_transfer(out);
        self.execute_committed(out);
        self.try_propose(out);
    }

    /// Applies committed slots in order from `last_executed + 1`, stopping
    /// at the first slot not committed, and answers the requests that
    /// arrived here.
    pub(super) fn execute_committed(&mut self, out: &mut Vec<Output>) {
        loop {
            let slot = self.sm.last_executed + 1;
            let value = match self.log.get_mut(slot) {
                Some(inst) if inst.state == InstanceState::Committed => {
                    inst.state = InstanceState::Executed;
                    inst.value.clone()
                }
                _ => break,
            };
            let bugs = ExecBugs {
                execute_duplicate: injected!(self.cfg, ExecuteDuplicate),
                failed_cas_writes: injected!(self.cfg, FailedCasWrites),
                registered_no_expiry: injected!(self.cfg, RegisteredNoExpiry),
            };
            let mut applied = 0u32;
            for req in value.requests() {
                self.executed_bytes += request_bytes(req);
                let outcome = self.sm.execute_checked(req, self.cfg.session_limit, bugs);
                if matches!(outcome, Outcome::Applied(_)) {
                    applied += 1;
                    // A Register changes the session table only: no
                    // key-value update (the bench compares this count with
                    // its acknowledged writes).
                    if !matches!(req.op, Op::Get { .. } | Op::Register) {
                        self.applied_updates += 1;
                    }
                }
                let key = (req.client, req.seq);
                if let Some(l) = self.role.as_leader_mut() {
                    l.queued.remove(&key);
                }
                // Older requests of this client that never executed (their
                // slot became a no-op) will not: stop waiting for them.
                while let Some(old) = self.waiting.range((req.client, 0)..key).next().copied() {
                    self.waiting.remove(&old);
                }
                if self.waiting.remove(&key) {
                    out.push(Output::Reply {
                        client: req.client,
                        seq: req.seq,
                        reply: outcome.reply(),
                    });
                }
            }
            self.sm.digest = digest_step(self.sm.digest, slot, &value);
            self.sm.last_executed = slot;
            if self.cfg.trace {
                let sessions = self.sm.sessions_summary(self.cfg.session_limit);
                self.emit(
                    Action::Execute {
                        slot,
                        value: value_ids(&value),
                        applied,
                        sessions,
                    },
                    out,
                );
            }
        }
        self.serve_reads(out);
    }

    pub(super) fn on_heartbeat_timer(&mut self, out: &mut Vec<Output>) {
        let Some(l) = self.role.as_leader() else {
            return self.ignore(Ignored::HeartbeatTimerNotLeader);
        };
        if self.now < l.heartbeat_deadline {
            return self.ignore(Ignored::TimerNotDue);
        }
        if self.lost_quorum() {
            // Cut off from a majority: stop taking requests that cannot
            // commit, so clients go elsewhere.
            self.become_follower(out);
            self.emit(
                Action::StepDown {
                    ballot: self.ballot,
                },
                out,
            );
        } else {
            self.send_heartbeats(out);
            self.reprobe_if_lost(out);
            self.gc_heartbeat(out);
        }
    }

    /// Whether the leader has not heard from a majority (itself included)
    /// for a whole election timeout.
    fn lost_quorum(&self) -> bool {
        let Some(l) = self.role.as_leader() else {
            return false;
        };
        let since = self.now.saturating_sub(self.cfg.election_timeout);
        let mut heard = VoteSet::of(self.id);
        for (id, p) in &l.progress {
            if p.heard >= since {
                heard.insert(*id);
            }
        }
        !self.quorum.reached(&heard)
    }

    pub(super) fn send_heartbeats(&mut self, out: &mut Vec<Output>) {
        let msg = Message::Heartbeat {
            ballot: self.ballot,
            last_executed: self.sm.last_executed,
            global_last_executed: self.global_last_executed,
        };
        for p in self.peers().collect::<Vec<_>>() {
            out.push(Output::Send {
                to: p,
                msg: msg.clone(),
            });
        }
        self.emit(
            Action::SendHeartbeat {
                ballot: self.ballot,
                last_executed: self.sm.last_executed,
                global_last_executed: self.global_last_executed,
            },
            out,
        );
        let at = self.now + self.cfg.heartbeat_interval;
        if let Some(l) = self.role.as_leader_mut() {
            l.heartbeat_deadline = at;
        }
        out.push(Output::SetTimer {
            timer: Timer::Heartbeat,
            at,
        });
        self.resend_accepts(out);
    }

    /// A heartbeat at a ballot the ballot rule let through, at a follower:
    /// commits the slots up to the leader's `last_executed` that hold an
    /// instance of the heartbeat's ballot.
    pub(super) fn on_heartbeat(
        &mut self,
        from: ReplicaId,
        b: Ballot,
        lle: Slot,
        gle: Slot,
        out: &mut Vec<Output>,
    ) {
        if let Some(f) = self.role.as_follower_mut() {
            f.leader = Some(from);
            f.last_heard = self.now;
        }
        let committed = self.commit_through(b, lle);
        self.global_last_executed = self.global_last_executed.max(gle);
        // Traced before the executions it enables, which are steps of their own.
        let action = Action::HandleHeartbeat {
            from,
            ballot: b,
            leader_last_executed: lle,
            global_last_executed: gle,
            ok: true,
            committed,
        };
        self.emit(action, out);
        self.execute_committed(out);
        let msg = Message::HeartbeatReply {
            ballot: b,
            ok: true,
            last_executed: self.sm.last_executed,
            leader_last_executed: lle,
        };
        if self.storage_full {
            // The storage alarm: what waits for the disk may wait long, and
            // a reply held that long makes the leader think itself cut off
            // and step down; with every disk full no leader could be
            // elected again, and reads would stop too. A heartbeat reply is
            // no vote (promises and acceptances still wait for the disk);
            // a `last_executed` a crash may take back costs the follower a
            // snapshot catch-up at worst.
            out.push(Output::Send { to: from, msg });
        } else {
            self.send_durable(from, msg, out);
        }
        self.maybe_trim(out);
        self.gc_leader_known(out);
    }

    /// Marks committed the slots up to the leader's `lle` that hold an
    /// instance of its ballot `b`, in order, stopping at the first that
    /// does not; returns them.
    fn commit_through(&mut self, b: Ballot, lle: Slot) -> Vec<Slot> {
        let any_ballot = injected!(self.cfg, FollowerCommitAnyBallot);
        let mut committed = Vec::new();
        let mut slot = self.sm.last_executed + 1;
        while slot <= lle {
            match self.log.get_mut(slot) {
                Some(inst) if inst.state.is_committed() => {}
                Some(inst) if inst.ballot == b || any_ballot => {
                    inst.state = InstanceState::Committed;
                    committed.push(slot);
                }
                // Missing, or of another ballot (a value the leader may
                // have replaced): the catch-up or the replay brings it.
                _ => break,
            }
            slot += 1;
        }
        committed
    }

    /// The commit point an `Accept` carried (`Config::commit_on_accept`):
    /// applied as a heartbeat's, without its reply (the `Accepted` is one)
    /// and only when it commits something.
    pub(super) fn learn_commit(
        &mut self,
        from: ReplicaId,
        b: Ballot,
        slot: Slot,
        lle: Slot,
        out: &mut Vec<Output>,
    ) {
        if lle <= self.sm.last_executed {
            return;
        }
        let committed = self.commit_through(b, lle);
        if committed.is_empty() {
            return;
        }
        self.emit(
            Action::LearnCommit {
                from,
                ballot: b,
                slot,
                leader_last_executed: lle,
                committed,
            },
            out,
        );
        self.execute_committed(out);
    }

    /// The answer to a heartbeat below this replica's ballot: the deposed
    /// leader learns the higher ballot from it.
    pub(super) fn reject_heartbeat(
        &mut self,
        from: ReplicaId,
        b: Ballot,
        lle: Slot,
        gle: Slot,
        out: &mut Vec<Output>,
    ) {
        let msg = Message::HeartbeatReply {
            ballot: self.ballot,
            ok: false,
            last_executed: self.sm.last_executed,
            leader_last_executed: lle,
        };
        out.push(Output::Send { to: from, msg });
        let action = Action::HandleHeartbeat {
            from,
            ballot: b,
            leader_last_executed: lle,
            global_last_executed: gle,
            ok: false,
            committed: Vec::new(),
        };
        self.emit(action, out);
    }

    /// A follower's answer to this leader's heartbeat: its progress, the
    /// new `global_last_executed`, and a catch-up if it is behind.
    pub(super) fn on_heartbeat_reply(
        &mut self,
        from: ReplicaId,
        le: Slot,
        lle: Slot,
        out: &mut Vec<Output>,
    ) {
        let (now, grace, own_le) = (self.now, self.cfg.trim_grace, self.sm.last_executed);
        let RoleState::Leader(l) = &mut self.role else {
            return self.ignore(Ignored::AnswerForRoleNotHeld);
        };
        let Some(p) = l.progress.get_mut(&from) else {
            return self.ignore(Ignored::UnknownPeer);
        };
        p.last_executed = p.last_executed.max(le);
        p.heard = now;
        let snapshot_sent = p.snapshot_sent;
        let gle = l
            .progress
            .values()
            .filter(|p| p.heard.saturating_add(grace) >= now)
            .map(|p| p.last_executed)
            .fold(own_le, Slot::min);
        self.global_last_executed = self.global_last_executed.max(gle);
        let ballot = self.ballot;
        self.emit(
            Action::HandleHeartbeatReply {
                from,
                ballot,
                ok: true,
                last_executed: le,
            },
            out,
        );
        // A follower that could not commit what the heartbeat allowed is
        // missing instances: send them, or our state if we trimmed them.
        if le < lle || le < self.log.trimmed() {
            self.send_catch_up(from, le, snapshot_sent, out);
        }
        self.maybe_trim(out);
        self.gc_heard_from(from, out);
        self.advance_transfer(out);
    }
}

//! Trimming and catch-up: a replica trims its log up to
//! `min(global_last_executed, last_executed)` behind a persisted snapshot;
//! a follower that is behind gets the committed instances it lacks
//! (`CatchUp`), or the leader's state if the leader trimmed them
//! (`InstallSnapshot`).

use std::sync::Arc;

use crate::io::{Output, Record};
use crate::message::Message;
use crate::state_machine::Snapshot;
use crate::trace::Action;
use crate::types::{Ballot, ClientId, Instance, InstanceState, ReplicaId, Seq, Slot, Time};

use super::{injected, Ignored, Replica, MAX_SLOTS_AHEAD};

impl Replica {
    /// Sends a follower whose `last_executed` is `le` what it lacks: the
    /// leader's state if it trimmed beyond `le` (at most once per election
    /// timeout: a snapshot is large), else the executed instances after `le`.
    pub(super) fn send_catch_up(
        &mut self,
        to: ReplicaId,
        le: Slot,
        snapshot_sent: Option<Time>,
        out: &mut Vec<Output>,
    ) {
        let (now, ballot) = (self.now, self.ballot);
        if le < self.log.trimmed() {
            let recently =
                snapshot_sent.is_some_and(|t| t.saturating_add(self.cfg.election_timeout) > now);
            if recently {
                return;
            }
            let snapshot = Arc::new(self.sm.clone());
            out.push(Output::Send {
                to,
                msg: Message::InstallSnapshot { ballot, snapshot },
            });
            if let Some(p) = self
                .role
                .as_leader_mut()
                .and_then(|l| l.progress.get_mut(&to))
            {
                p.snapshot_sent = Some(now);
            }
            self.emit(
                Action::SendCatchUp {
                    to,
                    slots: Vec::new(),
                    snapshot: true,
                },
                out,
            );
        } else {
            let top = self.sm.last_executed;
            let entries: Vec<Instance> = self
                .log
                .iter_from(le)
                .take_while(|i| i.slot <= top)
                .take(self.cfg.catchup_max.max(1))
                .cloned()
                .collect();
            if !entries.is_empty() {
                let slots = if self.cfg.trace {
                    entries.iter().map(|i| i.slot).collect()
                } else {
                    Vec::new()
                };
                out.push(Output::Send {
                    to,
                    msg: Message::CatchUp { ballot, entries },
                });
                self.emit(
                    Action::SendCatchUp {
                        to,
                        slots,
                        snapshot: false,
                    },
                    out,
                );
            }
        }
    }

    /// Committed instances from the leader, at a follower.
    pub(super) fn on_catch_up(
        &mut self,
        from: ReplicaId,
        b: Ballot,
        entries: Vec<Instance>,
        out: &mut Vec<Output>,
    ) {
        if let Some(f) = self.role.as_follower_mut() {
            f.leader = Some(from);
            f.last_heard = self.now;
        }
        let mut records = Vec::new();
        let mut slots = Vec::new();
        for e in entries {
            // Beyond what the log may hold (a faulty peer), or held already.
            if e.slot > self.sm.last_executed + MAX_SLOTS_AHEAD {
                continue;
            }
            let have = e.slot <= self.sm.last_executed
                || self.log.get(e.slot).is_some_and(|i| i.state.is_committed());
            if have {
                continue;
            }
            slots.push(e.slot);
            records.push(Record::Accept {
                slot: e.slot,
                ballot: e.ballot,
                value: e.value.clone(),
            });
            self.log.put(Instance {
                state: InstanceState::Committed,
                ..e
            });
        }
        if !records.is_empty() {
            self.persist(records, out);
        }
        self.emit(
            Action::HandleCatchUp {
                from,
                ballot: b,
                slots,
            },
            out,
        );
        self.execute_committed(out);
        self.maybe_trim(out);
    }

    /// The leader's state, at a follower behind the leader's trim point.
    pub(super) fn on_install_snapshot(
        &mut self,
        from: ReplicaId,
        snap: Arc<Snapshot>,
        out: &mut Vec<Output>,
    ) {
        if let Some(f) = self.role.as_follower_mut() {
            f.leader = Some(from);
            f.last_heard = self.now;
        }
        if snap.last_executed <= self.sm.last_executed {
            return self.ignore(Ignored::SnapshotNotNewer);
        }
        let le = snap.last_executed;
        let record = self.install_snapshot(snap, out);
        self.persist(vec![record], out);
        self.emit(
            Action::InstallSnapshot {
                from,
                last_executed: le,
                sessions: self.sm.sessions_summary(self.cfg.session_limit),
            },
            out,
        );
        self.execute_committed(out);
    }

    /// Replaces the executed state by a newer snapshot; returns the record
    /// that persists it (the caller persists it with the step's other
    /// records, so that the step is durable as a whole or not at all).
    pub(super) fn install_snapshot(
        &mut self,
        snap: Arc<Snapshot>,
        out: &mut Vec<Output>,
    ) -> Record {
        let le = snap.last_executed;
        let own_sessions = injected!(self.cfg, StaleSessionsOnInstall)
            .then(|| std::mem::take(&mut self.sm.sessions));
        self.sm = (*snap).clone();
        if let Some(sessions) = own_sessions {
            self.sm.sessions = sessions;
        }
        self.log.trim(le);
        let record = Record::Snapshot {
            trimmed: le,
            snapshot: snap,
        };
        // Requests waiting here that the snapshot covers can be answered.
        let done: Vec<(ClientId, Seq)> = self
            .waiting
            .iter()
            .filter(|(c, s)| self.sm.lookup(*c, *s).is_some())
            .copied()
            .collect();
        for (client, seq) in done {
            self.waiting.remove(&(client, seq));
            if let Some(l) = self.role.as_leader_mut() {
                l.queued.remove(&(client, seq));
            }
            if let Some(o) = self.sm.lookup(client, seq) {
                out.push(Output::Reply {
                    client,
                    seq,
                    reply: o.reply(),
                });
            }
        }
        record
    }

    pub(super) fn maybe_trim(&mut self, out: &mut Vec<Output>) {
        let to = self.global_last_executed.min(self.sm.last_executed);
        let by_slots = to >= self.log.trimmed() + self.cfg.trim_every.max(1);
        let by_bytes = self.cfg.trim_bytes > 0
            && self.executed_bytes >= self.cfg.trim_bytes
            && to > self.log.trimmed();
        if !by_slots && !by_bytes {
            return;
        }
        self.executed_bytes = 0;
        let snapshot = Arc::new(self.sm.clone());
        self.persist(
            vec![Record::Snapshot {
                trimmed: to,
                snapshot,
            }],
            out,
        );
        self.log.trim(to);
        self.emit(Action::Trim { up_to: to }, out);
    }
}

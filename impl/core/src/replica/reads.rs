//! Reads (ReadIndex): no log write, no fsync.
//!
//! A read that arrives at the leader records its read index: every write
//! acknowledged before now is at or below it (this leader's own are
//! executed; earlier leaders' were merged and replayed up to
//! `replay_top`). The leader then sends a probe at its ballot; an acceptor
//! acknowledges only if its ballot is not above the leader's. A majority of
//! acknowledgments (the leader's own included), all given after the read
//! arrived, shows that no other leader had been elected when the read
//! arrived: a newer leader needs promises from a majority, which overlaps
//! this one, and an acceptor that promised a higher ballot does not
//! acknowledge. So every write acknowledged before the read arrived is at
//! or below the read index, and the read is answered from the state once
//! execution reaches that index. No clock is involved: a paused leader
//! cannot answer from a stale state after it wakes up, since its probe
//! must first be acknowledged by a majority at its ballot.

use std::collections::VecDeque;

use bytes::Bytes;

use crate::io::Output;
use crate::message::Message;
use crate::quorum::VoteSet;
use crate::types::{Ballot, ClientId, ReplicaId, Reply, Seq, Slot, Time};

use super::role::RoleState;
use super::{Ignored, Replica};

/// A read waiting at the leader: answered once the leader has confirmed
/// its leadership by a probe sent after the read arrived and has executed
/// up to `index`.
#[derive(Debug)]
pub(super) struct PendingRead {
    pub index: Slot,
    pub client: ClientId,
    pub seq: Seq,
    pub key: Bytes,
}

/// The probe in flight: its id, who acknowledged it (the leader from the
/// start), when it was sent.
#[derive(Clone, Copy, Debug)]
pub(super) struct Probe {
    pub id: u64,
    pub acks: VoteSet,
    pub sent: Time,
}

/// The leader's read queue. Every read is covered by exactly one probe sent
/// after it arrived; at most one probe is in flight, so all reads that
/// arrive during a round share the next one (batching).
#[derive(Debug, Default)]
pub(super) struct ReadQueue {
    pub inflight: Option<Probe>,
    /// Arrived after the probe in flight was sent: wait for the next one.
    pub unprobed: Vec<PendingRead>,
    /// Covered by the probe in flight.
    pub probing: Vec<PendingRead>,
    /// Leadership confirmed; waiting for execution up to their index
    /// (indexes never decrease along the queue).
    pub confirmed: VecDeque<PendingRead>,
}

impl ReadQueue {
    pub fn len(&self) -> usize {
        self.unprobed.len() + self.probing.len() + self.confirmed.len()
    }

    /// Every queued read, oldest stage first.
    pub fn into_all(self) -> impl Iterator<Item = PendingRead> {
        self.confirmed
            .into_iter()
            .chain(self.probing)
            .chain(self.unprobed)
    }
}

impl Replica {
    /// Queues a read at the leader and starts a probe round if none runs.
    pub(super) fn queue_read(
        &mut self,
        client: ClientId,
        seq: Seq,
        key: Bytes,
        out: &mut Vec<Output>,
    ) {
        let le = self.sm.last_executed;
        let Some(l) = self.role.as_leader_mut() else {
            return;
        };
        let index = le.max(l.replay_top);
        l.reads.unprobed.push(PendingRead {
            index,
            client,
            seq,
            key,
        });
        self.maybe_probe(out);
    }

    fn maybe_probe(&mut self, out: &mut Vec<Output>) {
        let (me, now, ballot) = (self.id, self.now, self.ballot);
        let Some(l) = self.role.as_leader_mut() else {
            return;
        };
        if l.reads.inflight.is_some() || l.reads.unprobed.is_empty() {
            return;
        }
        let acks = VoteSet::of(me);
        if self.quorum.reached(&acks) {
            // A replica alone is its own majority.
            let reads = std::mem::take(&mut l.reads.unprobed);
            l.reads.confirmed.extend(reads);
            self.serve_reads(out);
            return;
        }
        self.last_probe += 1;
        let id = self.last_probe;
        l.reads.probing = std::mem::take(&mut l.reads.unprobed);
        l.reads.inflight = Some(Probe {
            id,
            acks,
            sent: now,
        });
        for p in self.peers() {
            out.push(Output::Send {
                to: p,
                msg: Message::ReadProbe { ballot, id },
            });
        }
    }

    /// A probe lost with a broken connection would hold its reads forever:
    /// one unanswered for a heartbeat interval is replaced by a new one.
    pub(super) fn reprobe_if_lost(&mut self, out: &mut Vec<Output>) {
        let (now, interval) = (self.now, self.cfg.heartbeat_interval);
        let Some(l) = self.role.as_leader_mut() else {
            return;
        };
        let Some(p) = l.reads.inflight else { return };
        if p.sent.saturating_add(interval) > now {
            return;
        }
        l.reads.inflight = None;
        let mut reads = std::mem::take(&mut l.reads.probing);
        reads.append(&mut l.reads.unprobed);
        l.reads.unprobed = reads;
        self.maybe_probe(out);
    }

    /// At an acceptor in any role. Exempt from the ballot rule: a probe
    /// changes no state, not even the ballot (the heartbeats and accepts of
    /// `b` update it).
    pub(super) fn on_read_probe(
        &mut self,
        from: ReplicaId,
        b: Ballot,
        id: u64,
        out: &mut Vec<Output>,
    ) {
        if b >= self.ballot {
            out.push(Output::Send {
                to: from,
                msg: Message::ReadProbeAck { ballot: b, id },
            });
        } else {
            self.ignore(Ignored::ProbeBelowBallot);
        }
    }

    /// An acknowledgment of a probe at this leader's current ballot.
    pub(super) fn on_read_probe_ack(&mut self, from: ReplicaId, id: u64, out: &mut Vec<Output>) {
        let RoleState::Leader(l) = &mut self.role else {
            return self.ignore(Ignored::AnswerForRoleNotHeld);
        };
        let Some(p) = l.reads.inflight.as_mut().filter(|p| p.id == id) else {
            return self.ignore(Ignored::AckOfOtherProbe);
        };
        p.acks.insert(from);
        if !self.quorum.reached(&p.acks) {
            return;
        }
        l.reads.inflight = None;
        let reads = std::mem::take(&mut l.reads.probing);
        l.reads.confirmed.extend(reads);
        self.serve_reads(out);
        self.maybe_probe(out);
    }

    /// Answers the confirmed reads whose index is executed.
    pub(super) fn serve_reads(&mut self, out: &mut Vec<Output>) {
        let le = self.sm.last_executed;
        let Some(l) = self.role.as_leader_mut() else {
            return;
        };
        while l.reads.confirmed.front().is_some_and(|r| r.index <= le) {
            let Some(r) = l.reads.confirmed.pop_front() else {
                break;
            };
            let reply = Reply::Value(self.sm.kv.get(&r.key).cloned());
            out.push(Output::Reply {
                client: r.client,
                seq: r.seq,
                reply,
            });
        }
    }
}

//! The entry for peer messages. The ballot rule is applied here, once for
//! every message, and only then is the message handed to the handler of
//! the role that can act on it (as etcd raft's `Step` applies the term rule
//! before its per-role step functions).
//!
//! Every message is one of three classes:
//!
//! - a **request** from a would-be or current leader (`Prepare`, `Accept`,
//!   `Heartbeat`, `CatchUp`, `InstallSnapshot`), carrying the sender's
//!   ballot: below ours it gets the message's rejection reply (or is
//!   ignored, where a rejection would tell the sender nothing its
//!   heartbeats do not); above ours it is adopted (`observe_ballot`:
//!   persisted, stepping down); then a follower handles it;
//! - an **answer** to one of our requests (`Promise`, `Accepted`,
//!   `HeartbeatReply`, `ReadProbeAck`): a rejection carries the rejecter's
//!   ballot, which is traced and adopted; an acceptance counts only at our
//!   current ballot and in the role that asked;
//! - a **probe** (`ReadProbe`, `PreVote`), exempt: it changes no state,
//!   not even the ballot. A `PreVote`'s refusal is an answer like the
//!   others (its ballot adopted if higher); its grant counts only in the
//!   pre-vote round it was asked for (`pre_vote.rs`).

use crate::io::Output;
use crate::message::Message;
use crate::trace::Action;
use crate::types::{ballot_owner, Ballot, ReplicaId, Role, Slot};

use super::role::RoleState;
use super::{injected, Ignored, Replica, MAX_SLOTS_AHEAD};

/// What the ballot rule decided for a request.
enum Verdict {
    /// Below our ballot: the message's rejection reply, or nothing.
    Stale,
    /// Malformed, or at our own ballot while we lead or campaign: ignored
    /// (the reason is counted).
    Ignored,
    /// At our ballot (raised to it if it was higher): a follower handles it.
    Follow,
}

impl Replica {
    pub(super) fn step(&mut self, from: ReplicaId, msg: Message, out: &mut Vec<Output>) {
        // A message from an unknown id or claiming to be from us is a peer
        // bug or an attack: never trust it.
        if (from as usize) >= self.cfg.n || from == self.id {
            return self.ignore(Ignored::UnknownSender);
        }
        match msg {
            // Requests from a would-be or current leader.
            Message::Prepare {
                ballot,
                last_executed,
            } => {
                // A repeated Prepare of the candidate we promised gets the
                // same promise again; any other needs a higher ballot.
                let repeat = ballot == self.ballot && ballot_owner(ballot) == from;
                let stale = ballot < self.ballot || (ballot == self.ballot && !repeat);
                match self.ballot_rule(ballot, stale, true, out) {
                    Verdict::Stale => self.reject_prepare(from, ballot, out),
                    Verdict::Ignored => {}
                    Verdict::Follow => self.on_prepare(from, ballot, last_executed, out),
                }
            }
            Message::Accept {
                ballot,
                slot,
                value,
                committed,
            } => {
                let stale = ballot < self.ballot && !injected!(self.cfg, AcceptLowerBallot);
                let in_range = slot > Slot::ZERO && slot <= self.sm.last_executed + MAX_SLOTS_AHEAD;
                match self.ballot_rule(ballot, stale, in_range, out) {
                    Verdict::Stale => self.reject_accept(from, ballot, slot, &value, out),
                    Verdict::Ignored => {}
                    Verdict::Follow => self.on_accept(from, ballot, slot, value, committed, out),
                }
            }
            Message::Heartbeat {
                ballot,
                last_executed,
                global_last_executed,
            } => match self.ballot_rule(ballot, ballot < self.ballot, true, out) {
                Verdict::Stale => {
                    self.reject_heartbeat(from, ballot, last_executed, global_last_executed, out)
                }
                Verdict::Ignored => {}
                Verdict::Follow => {
                    self.on_heartbeat(from, ballot, last_executed, global_last_executed, out)
                }
            },
            // No rejection reply: the deposed leader learns our ballot from
            // the answers to its heartbeats.
            Message::CatchUp { ballot, entries } => {
                match self.ballot_rule(ballot, ballot < self.ballot, true, out) {
                    Verdict::Stale => self.ignore(Ignored::StaleBallot),
                    Verdict::Ignored => {}
                    Verdict::Follow => self.on_catch_up(from, ballot, entries, out),
                }
            }
            Message::InstallSnapshot { ballot, snapshot } => {
                match self.ballot_rule(ballot, ballot < self.ballot, true, out) {
                    Verdict::Stale => self.ignore(Ignored::StaleBallot),
                    Verdict::Ignored => {}
                    Verdict::Follow => self.on_install_snapshot(from, snapshot, out),
                }
            }

            // Rejections of our requests.
            Message::Promise {
                ballot, ok: false, ..
            } => self.on_rejection(
                ballot,
                Action::HandlePromise {
                    from,
                    ballot,
                    ok: false,
                },
                out,
            ),
            Message::Accepted {
                ballot,
                slot,
                ok: false,
            } => {
                let action = Action::HandleAccepted {
                    from,
                    ballot,
                    slot,
                    ok: false,
                    committed: false,
                };
                self.on_rejection(ballot, action, out)
            }
            Message::HeartbeatReply {
                ballot,
                ok: false,
                last_executed,
                ..
            } => {
                let action = Action::HandleHeartbeatReply {
                    from,
                    ballot,
                    ok: false,
                    last_executed,
                };
                self.on_rejection(ballot, action, out)
            }

            // Acceptances of our requests.
            Message::Promise {
                ballot,
                entries,
                snapshot,
                ..
            } => {
                if self.answer_counts(ballot, Role::Candidate) {
                    self.on_promise(from, entries, snapshot, out)
                }
            }
            Message::Accepted { ballot, slot, .. } => {
                if self.answer_counts(ballot, Role::Leader) {
                    self.on_accepted(from, slot, out)
                }
            }
            Message::HeartbeatReply {
                ballot,
                last_executed,
                leader_last_executed,
                ..
            } => {
                if self.answer_counts(ballot, Role::Leader) {
                    self.on_heartbeat_reply(from, last_executed, leader_last_executed, out)
                }
            }
            Message::ReadProbeAck { ballot, id } => {
                if self.answer_counts(ballot, Role::Leader) {
                    self.on_read_probe_ack(from, id, out)
                }
            }

            // GC coordination: a grant and a hand-off are requests of the
            // leader at its ballot; a follower's request and its "done" are
            // answers that count at the leader's current ballot only.
            Message::GcGrant { ballot } => {
                match self.ballot_rule(ballot, ballot < self.ballot, true, out) {
                    Verdict::Stale => self.ignore(Ignored::StaleBallot),
                    Verdict::Ignored => {}
                    Verdict::Follow => self.on_gc_grant(from, ballot, out),
                }
            }
            Message::TimeoutNow {
                ballot,
                promised,
                entries,
            } => match self.ballot_rule(ballot, ballot < self.ballot, true, out) {
                Verdict::Stale => self.ignore(Ignored::StaleBallot),
                Verdict::Ignored => {}
                Verdict::Follow => self.on_timeout_now(from, ballot, promised, entries, out),
            },
            Message::GcRequest { ballot } => {
                if self.answer_counts(ballot, Role::Leader) {
                    self.on_gc_request(from, ballot, out)
                }
            }
            Message::GcDone { ballot } => {
                if self.answer_counts(ballot, Role::Leader) {
                    self.on_gc_done_from(from, ballot, out)
                }
            }

            // Pre-vote: the request is exempt (its ballot is one the sender
            // has not raised to); a refusal carries the refuser's ballot.
            Message::PreVoteReply { ballot, ok: false } => self.on_rejection(
                ballot,
                Action::HandlePreVoteReply {
                    from,
                    ballot,
                    ok: false,
                },
                out,
            ),
            Message::PreVoteReply { ballot, ok: true } => {
                self.on_pre_vote_granted(from, ballot, out)
            }

            // Exempt from the ballot rule.
            Message::ReadProbe { ballot, id } => self.on_read_probe(from, ballot, id, out),
            Message::PreVote { ballot } => self.on_pre_vote(from, ballot, out),
        }
    }

    /// The ballot rule for a request at ballot `b`: a stale one is
    /// rejected; a malformed one ignored whatever its ballot; a higher one
    /// adopted (persisted, stepping down). What a follower may then handle
    /// is at exactly our ballot.
    fn ballot_rule(
        &mut self,
        b: Ballot,
        stale: bool,
        well_formed: bool,
        out: &mut Vec<Output>,
    ) -> Verdict {
        if stale {
            return Verdict::Stale;
        }
        if !well_formed {
            self.ignore(Ignored::SlotOutOfRange);
            return Verdict::Ignored;
        }
        self.observe_ballot(b, out);
        if !matches!(self.role, RoleState::Follower(_)) {
            // Still candidate or leader: `b` is our own ballot, which no
            // peer can hold.
            self.ignore(Ignored::OwnBallotFromPeer);
            return Verdict::Ignored;
        }
        if let Some(f) = self.role.as_follower_mut() {
            // A leader or candidate at our ballot is alive: a pre-vote
            // round of ours ends (as etcd's pre-candidate steps back).
            f.pre_vote = None;
        }
        Verdict::Follow
    }

    /// A peer refused one of our requests and sent its own ballot: the
    /// refusal is traced, then the ballot adopted if higher.
    fn on_rejection(&mut self, b: Ballot, action: Action, out: &mut Vec<Output>) {
        self.emit(action, out);
        self.observe_ballot(b, out);
    }

    /// Whether an acceptance counts: only for our current ballot, in the
    /// role that sent the request.
    fn answer_counts(&mut self, b: Ballot, asked_as: Role) -> bool {
        if b != self.ballot {
            self.ignore(Ignored::AnswerToOldBallot);
            return false;
        }
        if self.role.kind() != asked_as {
            self.ignore(Ignored::AnswerForRoleNotHeld);
            return false;
        }
        true
    }
}

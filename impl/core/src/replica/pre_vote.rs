//! Pre-vote and leader stickiness (`Config::pre_vote`), in the manner of
//! etcd raft's PreVote with CheckQuorum.
//!
//! Without it, a replica that cannot hear the leader (a bridge partition:
//! cut from the leader only) raises its ballot when its election timer
//! fires; the replicas that still hear the leader adopt that ballot from
//! its `Prepare` and reject the healthy leader's next heartbeat and
//! accepts, so one bad link unseats a leader a majority can reach.
//!
//! With it, the timer starts a round of `PreVote` at the ballot the replica
//! would use, and nothing is raised or persisted. A replica grants only if
//! that ballot is above its own (the `Prepare` would be promised) and it
//! has not heard from a live leader within an election timeout (it is not
//! in the leader's *lease*); a leader never grants. A majority of grants,
//! its own included, lets the replica run the real election
//! (`start_election`); anything from a leader or candidate at our ballot or
//! above ends the round (the ballot rule in `step.rs`).
//!
//! The lease cannot keep a dead leader: a leader that has not heard from a
//! majority for an election timeout steps down (check quorum, `commit.rs`),
//! and its followers' leases run out after a timeout without its
//! heartbeats. A leadership hand-off (`TimeoutNow`, `gc.rs`) calls
//! `start_election` directly, and `Prepare` itself is never refused for
//! stickiness, so a transfer needs no pre-vote.
//!
//! The core asks nothing of the candidate's log: a `Prepare` is promised
//! whatever the candidate holds, since the new leader merges the promised
//! logs (`election.rs`), so a pre-vote mirrors that rule and asks only
//! about the ballot.

use crate::io::Output;
use crate::message::Message;
use crate::quorum::VoteSet;
use crate::trace::Action;
use crate::types::{next_ballot, Ballot, ReplicaId};

use super::role::{PreVoteRound, RoleState};
use super::{Ignored, Replica};

impl Replica {
    /// The election timer fired: campaign, first with a pre-vote round if
    /// configured.
    pub(super) fn campaign(&mut self, out: &mut Vec<Output>) {
        if self.cfg.pre_vote {
            self.start_pre_vote(out)
        } else {
            self.start_election(None, out)
        }
    }

    fn start_pre_vote(&mut self, out: &mut Vec<Output>) {
        if !matches!(self.role, RoleState::Follower(_)) {
            // A candidate whose campaign timed out asks again first, as
            // etcd's does: it may be the one cut off.
            self.become_follower(out);
        }
        let ballot = next_ballot(self.ballot, self.id);
        if let Some(f) = self.role.as_follower_mut() {
            f.leader = None;
            f.pre_vote = Some(PreVoteRound {
                ballot,
                granted: VoteSet::of(self.id),
            });
        }
        self.emit(Action::StartPreVote { ballot }, out);
        for p in self.peers().collect::<Vec<_>>() {
            out.push(Output::Send {
                to: p,
                msg: Message::PreVote { ballot },
            });
        }
        self.arm_election(self.now, out);
        self.elect_if_pre_voted(out);
    }

    /// Whether this replica still believes in a live leader: it leads (and
    /// check quorum has not stepped it down), or it follows a leader heard
    /// from within an election timeout.
    fn in_lease(&self) -> bool {
        match &self.role {
            RoleState::Leader(_) => true,
            RoleState::Candidate(_) => false,
            RoleState::Follower(f) => {
                f.leader.is_some()
                    && self.now < f.last_heard.saturating_add(self.cfg.election_timeout)
            }
        }
    }

    /// A peer asks whether we would promise `b`. Answered whatever our own
    /// `pre_vote` setting, so that replicas with and without it can mix.
    pub(super) fn on_pre_vote(&mut self, from: ReplicaId, b: Ballot, out: &mut Vec<Output>) {
        let ok = b > self.ballot && !self.in_lease();
        let ballot = if ok { b } else { self.ballot };
        // Sent at once: the answer changes nothing here, so nothing needs
        // to be durable first.
        out.push(Output::Send {
            to: from,
            msg: Message::PreVoteReply { ballot, ok },
        });
        self.emit(
            Action::HandlePreVote {
                from,
                ballot: b,
                ok,
            },
            out,
        );
    }

    /// A grant for the pre-vote round at ballot `b`.
    pub(super) fn on_pre_vote_granted(
        &mut self,
        from: ReplicaId,
        b: Ballot,
        out: &mut Vec<Output>,
    ) {
        let own = self.ballot;
        let round = self
            .role
            .as_follower_mut()
            .and_then(|f| f.pre_vote.as_mut());
        let Some(round) = round.filter(|r| r.ballot == b && b > own) else {
            return self.ignore(Ignored::PreVoteNotCampaigning);
        };
        round.granted.insert(from);
        self.emit(
            Action::HandlePreVoteReply {
                from,
                ballot: b,
                ok: true,
            },
            out,
        );
        self.elect_if_pre_voted(out);
    }

    fn elect_if_pre_voted(&mut self, out: &mut Vec<Output>) {
        let won = match &self.role {
            RoleState::Follower(f) => f
                .pre_vote
                .as_ref()
                .is_some_and(|r| self.quorum.reached(&r.granted)),
            _ => false,
        };
        if won {
            // `start_election` raises the ballot to `next_ballot(ballot)`:
            // the one the round asked about, as our ballot has not moved
            // (a raise would have ended the round).
            self.start_election(None, out);
        }
    }
}

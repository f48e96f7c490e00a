//! Roles as an enum carrying their own state: a follower has no votes to
//! touch, a candidate only its promises, and everything a leader keeps
//! (votes, pending requests, follower progress, reads) is dropped, with
//! definite answers to its clients, the moment it steps down.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::io::{Output, Record};
use crate::quorum::VoteSet;
use crate::trace::Action;
use crate::types::{
    ballot_owner, Ballot, ClientId, ReplicaId, Reply, Request, Role, Seq, Slot, Time,
};

use super::election::PromiseData;
use super::reads::ReadQueue;
use super::replication::Votes;
use super::Replica;

pub(super) struct FollowerState {
    /// The leader it follows, if known.
    pub leader: Option<ReplicaId>,
    /// When it last heard from a leader or a candidate it promised.
    pub last_heard: Time,
    /// The pre-vote round it runs, if its election timer fired with
    /// `Config::pre_vote` on (etcd's pre-candidate): still a follower, its
    /// ballot unchanged, until a majority grants.
    pub pre_vote: Option<PreVoteRound>,
}

/// A pre-vote round: the ballot it asks about (the one the replica would
/// campaign at) and who granted it, itself included.
pub(super) struct PreVoteRound {
    pub ballot: Ballot,
    pub granted: VoteSet,
}

pub(super) struct CandidateState {
    /// Who promised, itself included (its own promise counts at once).
    pub promised: VoteSet,
    /// What the peers' promises carried (its own promise is its log).
    pub promises: BTreeMap<ReplicaId, PromiseData>,
    /// Campaigning because the leader handed off (`TimeoutNow`): it
    /// expects to win within a round trip, so requests arriving meanwhile
    /// (the old leader redirects its queue here) wait for the outcome
    /// instead of being redirected nowhere.
    pub handed_off: Option<ReplicaId>,
    pub held: Vec<Request>,
}

/// What the leader knows of a follower.
#[derive(Clone, Copy, Debug)]
pub(super) struct Progress {
    pub last_executed: Slot,
    pub heard: Time,
    pub snapshot_sent: Option<Time>,
}

pub(super) struct LeaderState {
    /// Acceptances of the slots proposed or replayed and not yet committed.
    pub votes: BTreeMap<Slot, Votes>,
    /// Writes waiting for a slot (the window is full).
    pub pending: VecDeque<Request>,
    /// Requests pending or proposed by this leader and not yet executed.
    pub queued: BTreeSet<(ClientId, Seq)>,
    /// One entry per peer.
    pub progress: BTreeMap<ReplicaId, Progress>,
    /// The highest slot merged and replayed when this replica became
    /// leader: every write acknowledged by an earlier leader is at or below.
    pub replay_top: Slot,
    pub reads: ReadQueue,
    pub heartbeat_deadline: Time,
    /// GC coordination: grants, queue, own hand-off.
    pub gc: super::gc::Coordinator,
}

pub(super) enum RoleState {
    Follower(FollowerState),
    Candidate(CandidateState),
    // Boxed: the leader carries far more state than the other roles.
    Leader(Box<LeaderState>),
}

impl RoleState {
    pub fn follower(leader: Option<ReplicaId>, now: Time) -> RoleState {
        RoleState::Follower(FollowerState {
            leader,
            last_heard: now,
            pre_vote: None,
        })
    }

    pub fn kind(&self) -> Role {
        match self {
            RoleState::Follower(_) => Role::Follower,
            RoleState::Candidate(_) => Role::Candidate,
            RoleState::Leader(_) => Role::Leader,
        }
    }

    pub fn as_leader(&self) -> Option<&LeaderState> {
        match self {
            RoleState::Leader(l) => Some(l),
            _ => None,
        }
    }

    pub fn as_leader_mut(&mut self) -> Option<&mut LeaderState> {
        match self {
            RoleState::Leader(l) => Some(l),
            _ => None,
        }
    }

    pub fn as_follower_mut(&mut self) -> Option<&mut FollowerState> {
        match self {
            RoleState::Follower(f) => Some(f),
            _ => None,
        }
    }
}

impl Replica {
    /// The ballot rule's one effect: a higher ballot `b` is adopted
    /// (persisted before anything that depends on it is sent) and its owner
    /// followed. Returns whether `b` was higher.
    pub(super) fn observe_ballot(&mut self, b: Ballot, out: &mut Vec<Output>) -> bool {
        if b <= self.ballot {
            return false;
        }
        self.ballot = b;
        self.persist(vec![Record::Ballot(b)], out);
        if !matches!(self.role, RoleState::Follower(_)) {
            self.become_follower(out);
        }
        // Traced for followers too: the raise is a step of its own (the
        // spec's StepDown), persisted before the handler's own records.
        self.emit(Action::StepDown { ballot: b }, out);
        if let Some(f) = self.role.as_follower_mut() {
            f.leader = Some(ballot_owner(b));
            // A pre-vote round asked about a ballot no longer above ours.
            f.pre_vote = None;
        }
        true
    }

    /// Requests a candidate held (after a hand-off) that it will not
    /// propose: a redirect to whoever is known to lead, which is the truth.
    pub(super) fn redirect_held(&mut self, held: &[Request], out: &mut Vec<Output>) {
        let leader = Some(ballot_owner(self.ballot)).filter(|l| *l != self.id);
        for req in held {
            out.push(Output::Reply {
                client: req.client,
                seq: req.seq,
                reply: Reply::Redirect { leader },
            });
        }
    }

    /// Leaves the candidate or leader role. What the leader held is
    /// answered: never-proposed requests and queued reads get a redirect,
    /// which is the truth (they were not and will not be executed).
    pub(super) fn become_follower(&mut self, out: &mut Vec<Output>) {
        let old = std::mem::replace(&mut self.role, RoleState::follower(None, self.now));
        if let RoleState::Candidate(c) = &old {
            self.redirect_held(&c.held, out);
        }
        if let RoleState::Leader(l) = old {
            let leader = Some(ballot_owner(self.ballot)).filter(|l| *l != self.id);
            for req in l.pending {
                if self.waiting.remove(&(req.client, req.seq)) {
                    out.push(Output::Reply {
                        client: req.client,
                        seq: req.seq,
                        reply: Reply::Redirect { leader },
                    });
                }
            }
            for read in l.reads.into_all() {
                out.push(Output::Reply {
                    client: read.client,
                    seq: read.seq,
                    reply: Reply::Redirect { leader },
                });
            }
        }
        self.arm_election(self.now, out);
    }
}

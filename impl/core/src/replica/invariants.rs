//! What must hold between any two steps of a replica, checked after every
//! step in debug builds and when `Config::check_invariants` is on (the
//! simulator turns it on). A violation is a bug of the core, never of a
//! peer: no message, however malformed, may break these. Each check costs
//! O(1) or a scan of a bounded queue, so that the simulator can afford it.

use crate::types::{ballot_owner, InstanceState};

use super::role::RoleState;
use super::Replica;

/// Fails the check with a message naming the violated property.
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

impl Replica {
    /// `Err` names the first invariant that does not hold.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.check_barrier()?;
        self.check_log()?;
        self.check_gc()?;
        match &self.role {
            RoleState::Follower(f) => {
                // The round asks about the ballot it would raise to.
                let b = f.pre_vote.as_ref().map(|r| r.ballot);
                ensure!(
                    b.is_none_or(|b| b > self.ballot),
                    "pre-vote round at {b:?}, not above ballot {}",
                    self.ballot
                );
                Ok(())
            }
            RoleState::Candidate(_) => self.check_candidate(),
            RoleState::Leader(_) => self.check_leader(),
        }
    }

    /// GC coordination: a replica never collects under a grant while it
    /// leads; a leader counts no more collecting replicas (its own hand-off
    /// included) than `n − majority`; a due replica is not collecting.
    fn check_gc(&self) -> Result<(), String> {
        let granted = matches!(self.gc.collecting, Some(Some(_)));
        ensure!(
            !(granted && matches!(self.role, RoleState::Leader(_))),
            "collecting under a grant while leader"
        );
        ensure!(
            !(self.gc.due.is_some() && self.gc.collecting.is_some()),
            "due and collecting at once"
        );
        if let RoleState::Leader(l) = &self.role {
            let budget = self.gc_budget();
            ensure!(
                l.gc.used() <= budget,
                "{} replicas counted as collecting, budget {budget}",
                l.gc.used()
            );
            ensure!(
                !l.gc.collecting.contains_key(&self.id),
                "the leader holds a grant of its own"
            );
            if let Some((to, _)) = l.gc.transfer {
                ensure!(to != self.id, "hand-off to itself");
            }
        }
        Ok(())
    }

    fn check_barrier(&self) -> Result<(), String> {
        let b = &self.barrier;
        ensure!(
            b.persisted_token <= b.next_token,
            "persisted token {} beyond the newest issued {}",
            b.persisted_token,
            b.next_token
        );
        // Deferred outputs are queued with the newest token, which never
        // decreases: the queue is ordered by construction, so its ends are
        // checked (a scan on every step cost the simulator a quarter of its
        // time while a paused replica's queue grew).
        if let (Some((first, _)), Some((last, _))) = (b.deferred.front(), b.deferred.back()) {
            ensure!(
                *first > b.persisted_token,
                "deferred token {first} is durable already ({})",
                b.persisted_token
            );
            ensure!(first <= last, "deferred tokens decrease ({first} … {last})");
            ensure!(
                *last <= b.next_token,
                "deferred token {last} was never issued (newest {})",
                b.next_token
            );
        }
        Ok(())
    }

    fn check_log(&self) -> Result<(), String> {
        let (le, trimmed, last) = (
            self.sm.last_executed,
            self.log.trimmed(),
            self.log.last_index(),
        );
        ensure!(trimmed <= le, "trimmed {trimmed} beyond last executed {le}");
        ensure!(
            le <= last,
            "last executed {le} beyond the last index {last}"
        );
        if le > trimmed {
            let state = self.log.get(le).map(|i| i.state);
            ensure!(
                state == Some(InstanceState::Executed),
                "slot {le} (last executed) is {state:?} in the log"
            );
        }
        // Execution never lags a commit: a committed slot right after the
        // last executed one would have been executed in the same step.
        let next = self.log.get(le + 1).map(|i| i.state);
        ensure!(
            next.is_none_or(|s| s == InstanceState::InProgress),
            "slot {} after last executed {le} is {next:?}",
            le + 1
        );
        Ok(())
    }

    fn check_candidate(&self) -> Result<(), String> {
        let RoleState::Candidate(c) = &self.role else {
            return Ok(());
        };
        ensure!(
            ballot_owner(self.ballot) == self.id,
            "candidate at ballot {} it does not own",
            self.ballot
        );
        ensure!(
            c.promised.contains(self.id),
            "candidate without its own promise"
        );
        ensure!(
            c.promised.len() == c.promises.len() + 1
                && c.promises.keys().all(|id| c.promised.contains(*id)),
            "promised set {:?} is not itself plus the promises kept {:?}",
            c.promised.iter().collect::<Vec<_>>(),
            c.promises.keys().collect::<Vec<_>>()
        );
        ensure!(
            !self.quorum.reached(&c.promised),
            "candidate holding a majority of promises is not leader"
        );
        Ok(())
    }

    fn check_leader(&self) -> Result<(), String> {
        let RoleState::Leader(l) = &self.role else {
            return Ok(());
        };
        let le = self.sm.last_executed;
        ensure!(
            ballot_owner(self.ballot) == self.id,
            "leader at ballot {} it does not own",
            self.ballot
        );
        ensure!(
            l.progress.keys().copied().eq(self.peers()),
            "leader progress covers {:?}, not every peer",
            l.progress.keys().collect::<Vec<_>>()
        );
        // Votes are for uncommitted slots of this leader's own ballot. The
        // first and last are checked (all of them would cost a scan of the
        // window on every step).
        for slot in [l.votes.keys().next(), l.votes.keys().next_back()]
            .into_iter()
            .flatten()
        {
            ensure!(
                *slot > le,
                "votes kept for slot {slot}, executed already (last executed {le})"
            );
            let inst = self.log.get(*slot).map(|i| (i.ballot, i.state));
            ensure!(
                inst == Some((self.ballot, InstanceState::InProgress)),
                "voted slot {slot} holds {inst:?}, not an uncommitted instance at ballot {}",
                self.ballot
            );
        }
        ensure!(
            // A leader handing off for a collection proposes nothing new.
            l.pending.is_empty()
                || l.votes.len() >= self.cfg.window.max(1)
                || l.gc.transfer.is_some(),
            "{} requests pending with only {} of {} window slots in flight",
            l.pending.len(),
            l.votes.len(),
            self.cfg.window
        );
        let r = &l.reads;
        ensure!(
            r.inflight.is_some() != r.probing.is_empty(),
            "probe in flight: {}, reads covered by it: {}",
            r.inflight.is_some(),
            r.probing.len()
        );
        if let Some(p) = r.inflight {
            ensure!(
                p.id <= self.last_probe,
                "probe {} was never sent (last {})",
                p.id,
                self.last_probe
            );
            ensure!(
                p.acks.contains(self.id),
                "probe without the leader's own acknowledgment"
            );
        }
        // Read indexes are taken in arrival order and never decrease; the
        // ends of the queue are checked (a scan would grow with it).
        if let (Some(first), Some(last)) = (r.confirmed.front(), r.confirmed.back()) {
            ensure!(
                first.index <= last.index,
                "confirmed read indexes decrease ({} … {})",
                first.index,
                last.index
            );
        }
        Ok(())
    }
}

//! The one quorum rule of the protocol: a decision (an election, a commit,
//! a read confirmation, staying leader) needs the votes of a majority of
//! the `n` replicas, and the deciding replica's own vote is a member of the
//! vote set like any other. It is inserted when it is given (a candidate's
//! promise at once, a leader's acceptance once it is durable), never added
//! as a `+ 1` on the side.

use crate::types::ReplicaId;

/// A set of replica ids (a ballot reserves 8 bits for an id, so 256 bits
/// hold any id and `insert` cannot go out of range).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VoteSet([u64; 4]);

impl VoteSet {
    /// The set holding only `id`.
    pub fn of(id: ReplicaId) -> VoteSet {
        let mut s = VoteSet::default();
        s.insert(id);
        s
    }

    pub fn insert(&mut self, id: ReplicaId) {
        self.0[(id / 64) as usize] |= 1 << (id % 64);
    }

    pub fn contains(&self, id: ReplicaId) -> bool {
        self.0[(id / 64) as usize] & (1 << (id % 64)) != 0
    }

    pub fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }

    /// The ids in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = ReplicaId> + '_ {
        (0..=u8::MAX).filter(move |id| self.contains(*id))
    }
}

/// Majority quorums of `n` replicas.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quorum {
    n: usize,
}

impl Quorum {
    pub fn new(n: usize) -> Quorum {
        Quorum { n }
    }

    /// Votes needed: `n/2 + 1`, so that any two quorums share a replica.
    pub fn majority(&self) -> usize {
        self.n / 2 + 1
    }

    /// Whether `votes` (the replica's own included when it was given) form
    /// a majority.
    pub fn reached(&self, votes: &VoteSet) -> bool {
        votes.len() >= self.majority()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_two_majorities_intersect_and_own_vote_counts_like_any_other() {
        for n in 1..=7usize {
            let q = Quorum::new(n);
            // The smallest majorities at both ends of the id range overlap.
            let mut low = VoteSet::default();
            let mut high = VoteSet::default();
            for i in 0..q.majority() {
                low.insert(i as ReplicaId);
                high.insert((n - 1 - i) as ReplicaId);
            }
            assert!(q.reached(&low) && q.reached(&high));
            assert!(low.iter().any(|id| high.contains(id)), "n={n}");
            // One vote fewer is not a quorum, whoever is missing.
            let mut short = VoteSet::default();
            for i in 1..q.majority() {
                short.insert(i as ReplicaId);
            }
            assert!(!q.reached(&short), "n={n}");
        }
        assert!(
            Quorum::new(1).reached(&VoteSet::of(0)),
            "a single replica decides alone"
        );
        assert!(!Quorum::new(3).reached(&VoteSet::of(0)));
    }

    #[test]
    fn vote_set_holds_every_id_once() {
        let mut s = VoteSet::default();
        assert!(s.is_empty());
        for id in [0u8, 63, 64, 200, 255, 64] {
            s.insert(id);
        }
        assert_eq!(s.len(), 5);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 63, 64, 200, 255]);
        assert!(s.contains(255) && !s.contains(1));
    }
}

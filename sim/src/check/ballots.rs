//! Ballot monotonicity: a replica's ballot never goes down while it runs,
//! and after a restart not below what its log kept (a crash may lose a
//! ballot that was never made durable, and so never shown to anyone).

use stutter_core::{Ballot, ReplicaId};

use super::Violations;

pub struct Ballots {
    max: Vec<Ballot>,
}

impl Ballots {
    pub fn new(n: usize) -> Ballots {
        Ballots {
            max: vec![Ballot::default(); n],
        }
    }

    pub fn observe(&mut self, r: ReplicaId, b: Ballot, v: &mut Violations) {
        let Some(max) = self.max.get_mut(r as usize) else {
            return;
        };
        if b < *max {
            v.add(
                "ballot-monotonic",
                format!("replica {r}: ballot {b} after {max}"),
            );
        }
        *max = (*max).max(b);
    }

    pub fn crashed(&mut self, r: ReplicaId, durable: Ballot) {
        if let Some(max) = self.max.get_mut(r as usize) {
            *max = durable;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lower_ballot_is_a_violation_unless_a_crash_lost_it() {
        let (b1, b2) = (Ballot(257), Ballot(513));
        let mut bs = Ballots::new(1);
        let mut v = Violations::default();
        bs.observe(0, b2, &mut v);
        bs.crashed(0, b1);
        bs.observe(0, b1, &mut v);
        assert!(v.into_vec().is_empty());
        let mut v = Violations::default();
        bs.observe(0, Ballot::default(), &mut v);
        assert_eq!(v.into_vec().len(), 1);
    }
}

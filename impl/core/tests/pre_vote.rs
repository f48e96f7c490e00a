//! Pre-vote and leader stickiness over many seeds (prevote.txt shows one
//! of each case step by step): a follower cut from the leader only never
//! raises a ballot while the leader lives, and without pre-vote it does.

// Test code: unwrap, expect and panic are how a test fails (the
// workspace lints deny them in the code under test).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use stutter_core::*;

/// A 3-replica cluster with an elected leader, then `leader`–`cut` cut
/// both ways for `for_time`, then healed. Returns (the leader before, the
/// leader after, the highest ballot after, whether the cut replica ever
/// raised its ballot).
fn bridge(
    seed: u64,
    pre_vote: bool,
    for_time: Time,
) -> (ReplicaId, Option<ReplicaId>, Ballot, bool) {
    let mut c = Cluster::new(
        Config {
            pre_vote,
            ..test_config(3)
        },
        seed,
    );
    c.run_fair(1_000);
    let leader = c.leader().expect("a leader after a fault-free second");
    let ballot = c.nodes[leader as usize].replica.ballot();
    let cut = (leader + 1) % 3;
    c.cut.insert((leader, cut));
    c.cut.insert((cut, leader));
    c.run_fair(for_time);
    let raised = c.nodes[cut as usize].replica.ballot() > ballot;
    c.cut.clear();
    c.run_fair(1_000);
    assert!(c.violations.is_empty(), "seed {seed}: {:?}", c.violations);
    let top = c
        .nodes
        .iter()
        .map(|n| n.replica.ballot())
        .max()
        .unwrap_or(Ballot::ZERO);
    (leader, c.leader(), top, raised)
}

#[test]
fn with_pre_vote_a_bridge_partition_changes_no_leader_and_no_ballot() {
    for seed in 0..50 {
        let before = {
            let mut c = Cluster::new(
                Config {
                    pre_vote: true,
                    ..test_config(3)
                },
                seed,
            );
            c.run_fair(1_000);
            c.leader().map(|l| c.nodes[l as usize].replica.ballot())
        };
        let (leader, after, top, raised) = bridge(seed, true, 5_000);
        assert_eq!(after, Some(leader), "seed {seed}: the leader stays");
        assert_eq!(
            Some(top),
            before,
            "seed {seed}: no ballot was raised anywhere"
        );
        assert!(!raised, "seed {seed}");
    }
}

#[test]
fn without_pre_vote_the_cut_follower_raises_its_ballot_and_unseats_the_leader() {
    let mut unseated = 0;
    for seed in 0..50 {
        let (leader, after, _, raised) = bridge(seed, false, 5_000);
        assert!(raised, "seed {seed}: the cut follower raised its ballot");
        if after != Some(leader) {
            unseated += 1;
        }
    }
    // Who leads at the end is a coin toss between the two that take turns;
    // that it happens at all is the point.
    assert!(unseated > 0, "no seed ended with another leader");
}

#[test]
fn with_pre_vote_a_crashed_leader_is_replaced() {
    for seed in 0..50 {
        let mut c = Cluster::new(
            Config {
                pre_vote: true,
                ..test_config(3)
            },
            seed,
        );
        c.run_fair(1_000);
        let old = c.leader().expect("a leader");
        c.crash(old);
        c.run_fair(2_000);
        let new = c.leader();
        assert!(
            new.is_some() && new != Some(old),
            "seed {seed}: {old} crashed, leader now {new:?}"
        );
        assert!(c.violations.is_empty(), "seed {seed}: {:?}", c.violations);
    }
}

//! Issue 17: a follower cut off from the leader only (a bridge partition)
//! and then back. Without pre-vote it raises its ballot, the third replica
//! promises it, and the leader changes; with pre-vote (and leader
//! stickiness) the first leader stays for the whole run. The test fails if
//! pre-vote stops protecting the leader, and also if the scenario stops
//! showing the problem without it.

// Test code: unwrap, expect and panic are how a test fails (the
// workspace lints deny them in the code under test).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use stutter_sim::scenario::Scenario;

/// Elections won in the `bridge` scenario at `seed`, the run checked.
fn elections(seed: u64, pre_vote: bool) -> u64 {
    let mut s = Scenario::named("bridge").expect("bridge scenario");
    s.pre_vote = pre_vote;
    let out = stutter_sim::run(s, seed);
    assert!(
        out.violations.is_empty(),
        "seed {seed}, pre_vote {pre_vote}: {:?}",
        out.violations
    );
    assert_eq!(
        out.faults.partitions, 1,
        "seed {seed}: the bridge partition was applied"
    );
    assert!(
        out.history.iter().filter(|o| o.is_ok()).count() > 1_000,
        "seed {seed}: clients made progress"
    );
    out.elections
}

#[test]
fn without_pre_vote_the_cut_follower_unseats_the_leader() {
    for seed in 1..=3 {
        let n = elections(seed, false);
        assert!(
            n > 1,
            "seed {seed}: {n} election(s); the cut follower should have won one"
        );
    }
}

#[test]
fn with_pre_vote_the_first_leader_stays() {
    for seed in 1..=3 {
        let n = elections(seed, true);
        assert_eq!(
            n, 1,
            "seed {seed}: {n} elections; only the first should happen"
        );
    }
}

//! Each known protocol bug, injected into the core, is caught by the
//! checkers within a bounded number of swarm seeds.

use stutter_core::Bug;
use stutter_sim::scenario::Scenario;

/// The first seed in `0..limit` whose run reports a violation.
fn first_failing(bug: Bug, limit: u64) -> Option<(u64, String)> {
    (0..limit).find_map(|seed| {
        let mut s = Scenario::from_seed(seed);
        s.bug = Some(bug);
        let out = stutter_sim::run(s, seed);
        out.violations.first().map(|v| (seed, format!("{}: {}", v.check, v.detail)))
    })
}

fn caught(bug: Bug, limit: u64) {
    match first_failing(bug, limit) {
        Some((seed, what)) => println!("{bug:?} caught at seed {seed}: {what}"),
        None => panic!("{bug:?} was not caught in {limit} seeds"),
    }
}

#[test]
fn skip_merge_is_caught() {
    caught(Bug::SkipMerge, 300);
}

#[test]
fn accept_lower_ballot_is_caught() {
    caught(Bug::AcceptLowerBallot, 300);
}

#[test]
fn reply_before_persist_is_caught() {
    caught(Bug::ReplyBeforePersist, 300);
}

#[test]
fn commit_without_majority_is_caught() {
    caught(Bug::CommitWithoutMajority, 300);
}

#[test]
fn follower_commit_any_ballot_is_caught() {
    caught(Bug::FollowerCommitAnyBallot, 300);
}

#[test]
fn local_reads_are_caught() {
    caught(Bug::LocalReads, 300);
}

#[test]
fn correct_core_passes_the_same_seeds() {
    for seed in 0..20 {
        let out = stutter_sim::run(Scenario::from_seed(seed), seed);
        assert!(out.violations.is_empty(), "seed {seed}: {:?}", out.violations);
    }
}

//! Replays the regression corpus in traces/seeds.txt.

// Test code: unwrap, expect and panic are how a test fails (the
// workspace lints deny them in the code under test).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use stutter_sim::scenario::Scenario;

#[test]
fn every_corpus_seed_runs_clean() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../traces/seeds.txt"))
        .expect("traces/seeds.txt");
    let mut n = 0;
    for line in text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let mut parts = line.split_whitespace();
        let seed: u64 = parts.next().and_then(|s| s.parse().ok()).expect("seed");
        let name = parts.next().expect("scenario");
        let scenario = Scenario::parse(name, seed).expect("known scenario");
        let out = stutter_sim::run(scenario, seed);
        assert!(out.violations.is_empty(), "{line}: {:?}", out.violations);
        if let Some(h) = parts.next() {
            assert_eq!(
                format!("{:016x}", out.trace_hash),
                h,
                "{line}: trace changed"
            );
        }
        n += 1;
    }
    assert!(n >= 10, "corpus has {n} entries");
}

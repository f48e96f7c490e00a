//! Scripted traces for the conformance corpus (`traces/valid`,
//! `traces/invalid`, docs/conformance.md): schedules that random
//! simulation almost never produces, written out as the core traced them.
//!
//! Each test builds its schedule, asserts that the schedule reached the
//! situation it is about, and compares the trace with the stored file.
//! `spec/validate` (run by scripts/conformance-ci) then decides whether
//! the spec accepts it. After an intended change to the core's trace,
//! regenerate the files with
//! `STUTTER_WRITE_TRACES=1 cargo test -p stutter-core --test corpus_traces`
//! and check that the valid ones are still accepted and the invalid ones
//! still rejected at the same step.

mod common;

use std::path::PathBuf;

use common::*;
use stutter_core::*;

fn corpus_file(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../traces").join(rel)
}

fn ndjson(trace: &[TraceEvent]) -> String {
    trace.iter().map(|e| serde_json::to_string(e).unwrap() + "\n").collect()
}

/// Compares `trace` with the stored corpus file (or writes it).
fn matches_corpus(rel: &str, trace: &[TraceEvent]) {
    let path = corpus_file(rel);
    let text = ndjson(trace);
    if std::env::var_os("STUTTER_WRITE_TRACES").is_some() {
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let stored = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (STUTTER_WRITE_TRACES=1 writes it)", path.display()));
    assert!(
        stored == text,
        "{} differs from the trace this schedule produces now; if the core's trace changed on \
         purpose, regenerate with STUTTER_WRITE_TRACES=1 and re-validate (docs/conformance.md)",
        path.display()
    );
}

/// The slot a `Propose` event of replica `id` put `(client, seq)` into.
fn proposed_slot(c: &Cluster, id: ReplicaId, client: u64, seq: u64) -> Slot {
    c.trace
        .iter()
        .filter(|e| e.replica == id)
        .find_map(|e| match &e.action {
            Action::Propose { slot, value: Some(ids) } if ids.contains(&(client, seq)) => Some(*slot),
            _ => None,
        })
        .unwrap()
}

/// A leader proposes two slots; the Accepts of the first are lost, the
/// second reaches one follower; the leader falls silent (it is cut off and
/// stays so: nothing of it appears in the trace again). The followers
/// elect a new leader whose merged log has the second slot but not the
/// first: a gap, which the new leader must fill with a no-op.
fn gap_at_election(bug: Option<Bug>) -> (Cluster, Slot, Slot) {
    let mut cfg = test_config(3);
    cfg.injected_bug = bug;
    let mut c = Cluster::new(cfg, 11);
    c.run_fair(200);
    let old = c.leader().unwrap();
    let followers: Vec<ReplicaId> = (0..3).filter(|&r| r != old).collect();

    c.input(old, Input::Request(put(1, 1, "a", "1")));
    c.input(old, Input::Request(put(2, 1, "b", "2")));
    let (s1, s2) = (proposed_slot(&c, old, 1, 1), proposed_slot(&c, old, 2, 1));
    assert!(s1 < s2, "the two requests went into one slot");

    // Lose every Accept of s1; deliver the Accept of s2 to one follower.
    c.net.retain(|m| !matches!(m.msg, Message::Accept { slot, .. } if slot == s1));
    let i = c
        .net
        .iter()
        .position(|m| m.to == followers[0] && matches!(m.msg, Message::Accept { slot, .. } if slot == s2))
        .unwrap();
    c.deliver(i, false);
    c.sync(followers[0]);

    // The old leader is cut off for good.
    c.nodes[old as usize].up = false;
    c.net.retain(|m| m.to != old && m.from != old);
    c.run_fair(400);
    (c, s1, s2)
}

/// The `BecomeLeader` event of the new leader: its ballot's owner is not `old`.
fn new_leader_entries(c: &Cluster, old: ReplicaId) -> Vec<SlotSummary> {
    c.trace
        .iter()
        .filter(|e| e.replica != old)
        .find_map(|e| match &e.action {
            Action::BecomeLeader { entries, .. } => Some(entries.clone()),
            _ => None,
        })
        .unwrap()
}

#[test]
fn election_fills_a_gap_with_a_noop() {
    let (c, s1, s2) = gap_at_election(None);
    let old = c.nodes.iter().position(|n| !n.up).unwrap() as ReplicaId;
    let entries = new_leader_entries(&c, old);
    let at = |s: Slot| entries.iter().find(|e| e.slot == s).cloned();
    assert_eq!(at(s1).map(|e| e.value), Some(None), "the gap was not filled with a no-op: {entries:?}");
    assert_eq!(at(s2).and_then(|e| e.value), Some(vec![(2, 1)]));
    assert!(c.violations.is_empty(), "{:?}", c.violations);
    // Both slots end up executed everywhere the new leader reaches.
    assert!(c.nodes.iter().filter(|n| n.up).all(|n| n.replica.last_executed() >= s2));
    matches_corpus("valid/election-fills-gap-with-noop.ndjson", &c.trace);
}

#[test]
fn skip_noop_fill_leaves_the_gap_open() {
    let (c, s1, s2) = gap_at_election(Some(Bug::SkipNoopFill));
    let old = c.nodes.iter().position(|n| !n.up).unwrap() as ReplicaId;
    let entries = new_leader_entries(&c, old);
    assert!(entries.iter().all(|e| e.slot != s1), "the bug did not leave the gap: {entries:?}");
    assert!(entries.iter().any(|e| e.slot == s2));
    // No safety checker notices: nothing executes past the gap, nothing disagrees.
    assert!(c.violations.is_empty(), "{:?}", c.violations);
    assert!(c.nodes.iter().filter(|n| n.up).all(|n| n.replica.last_executed() < s1));
    // Invalid corpus traces end at the step the spec must reject.
    let end = c
        .trace
        .iter()
        .position(|e| e.replica != old && matches!(e.action, Action::BecomeLeader { .. }))
        .unwrap();
    matches_corpus("invalid/skip-noop-fill.ndjson", &c.trace[..=end]);
}

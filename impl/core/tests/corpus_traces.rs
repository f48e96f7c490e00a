//! Scripted traces for the conformance corpus (`traces/valid`,
//! `traces/invalid`, docs/conformance.md): schedules that random
//! simulation almost never produces, written out as the core traced them.
//!
//! Each test builds its schedule and asserts that the trace reached the
//! situation it is about; the stored file must read back as trace events
//! of today's format and show the same situation. It is not compared byte
//! for byte: a harmless change of the trace (a field added to the state
//! summary, another timer value, an event of a kind the situation does not
//! involve) leaves the stored file meaningful, and `spec/validate` (run by
//! scripts/conformance-ci) judges the file itself. A change that loses the
//! situation, or a format the file no longer parses in, fails here;
//! regenerate the files with
//! `STUTTER_WRITE_TRACES=1 cargo test -p stutter-core --test corpus_traces`
//! and check that the valid ones are still accepted and the invalid ones
//! still rejected at the same step.

// Test code: unwrap, expect and panic are how a test fails (the
// workspace lints deny them in the code under test).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::PathBuf;

use common::*;
use stutter_core::*;

fn corpus_file(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../traces")
        .join(rel)
}

fn ndjson(trace: &[TraceEvent]) -> String {
    trace
        .iter()
        .map(|e| serde_json::to_string(e).unwrap() + "\n")
        .collect()
}

/// Judges `trace` with `situation`, then the stored corpus file (or writes
/// it): the file must parse as trace events and pass the same judgement.
fn matches_corpus(
    rel: &str,
    trace: &[TraceEvent],
    situation: impl Fn(&[TraceEvent]) -> Result<(), String>,
) {
    if let Err(e) = situation(trace) {
        panic!("the schedule no longer reaches its situation: {e}");
    }
    let path = corpus_file(rel);
    if std::env::var_os("STUTTER_WRITE_TRACES").is_some() {
        std::fs::write(&path, ndjson(trace)).unwrap();
        return;
    }
    let stored = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (STUTTER_WRITE_TRACES=1 writes it)", path.display()));
    let events: Vec<TraceEvent> = stored
        .lines()
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l).unwrap_or_else(|e| {
                panic!(
                    "{} line {}: {e}: the trace format changed; regenerate with STUTTER_WRITE_TRACES=1 and \
                     re-validate (docs/conformance.md)",
                    path.display(),
                    i + 1
                )
            })
        })
        .collect();
    if let Err(e) = situation(&events) {
        panic!(
            "{} no longer shows its situation ({e}); if the core's trace changed on purpose, regenerate with \
             STUTTER_WRITE_TRACES=1 and re-validate (docs/conformance.md)",
            path.display()
        );
    }
}

/// The slot a `Propose` event put `(client, seq)` into, and the replica
/// that proposed it.
fn proposed_slot(trace: &[TraceEvent], client: u64, seq: u64) -> Option<(ReplicaId, Slot)> {
    trace.iter().find_map(|e| match &e.action {
        Action::Propose {
            slot,
            value: Some(ids),
        } if ids.iter().any(|id| id.key() == (client, seq)) => Some((e.replica, *slot)),
        _ => None,
    })
}

/// The situation of `gap_at_election` read from a trace: the old leader,
/// the two slots it proposed, the position of the new leader's
/// `BecomeLeader` and the entries it replayed.
fn gap_situation(
    trace: &[TraceEvent],
) -> Result<(ReplicaId, Slot, Slot, usize, Vec<SlotSummary>), String> {
    let (old, s1) = proposed_slot(trace, FIRST, 1).ok_or("no Propose of request (r0, 1)")?;
    let (old2, s2) = proposed_slot(trace, FIRST + 1, 1).ok_or("no Propose of request (r1, 1)")?;
    if old != old2 || s1 >= s2 {
        return Err(format!("the two requests were not proposed in two slots by one leader: {old}@{s1:?}, {old2}@{s2:?}"));
    }
    let (at, entries) = trace
        .iter()
        .enumerate()
        .filter(|(_, e)| e.replica != old)
        .find_map(|(i, e)| match &e.action {
            Action::BecomeLeader { entries, .. } => Some((i, entries.clone())),
            _ => None,
        })
        .ok_or("no new leader was elected")?;
    Ok((old, s1, s2, at, entries))
}

/// The new leader replayed the gap `s1` as a no-op and `s2` with its request.
fn gap_filled(trace: &[TraceEvent]) -> Result<(), String> {
    let (_, s1, s2, _, entries) = gap_situation(trace)?;
    let at = |s: Slot| {
        entries
            .iter()
            .find(|e| e.slot == s)
            .map(|e| e.value.clone())
    };
    if at(s1) != Some(None) {
        return Err(format!("the gap was not filled with a no-op: {entries:?}"));
    }
    if at(s2)
        != Some(Some(vec![RequestId {
            client: FIRST + 1,
            seq: 1,
        }]))
    {
        return Err(format!("the surviving slot was not replayed: {entries:?}"));
    }
    Ok(())
}

/// The new leader replayed `s2` but left the gap `s1` out, and the trace
/// ends at that step (the one the spec must reject).
fn gap_left_open(trace: &[TraceEvent]) -> Result<(), String> {
    let (_, s1, s2, at, entries) = gap_situation(trace)?;
    if entries.iter().any(|e| e.slot == s1) || !entries.iter().any(|e| e.slot == s2) {
        return Err(format!(
            "not a replay of slot {s2:?} with the gap {s1:?} left out: {entries:?}"
        ));
    }
    if at + 1 != trace.len() {
        return Err(format!(
            "the trace goes on after the rejected step ({} events after it)",
            trace.len() - at - 1
        ));
    }
    Ok(())
}

/// The first id the log assigns: the schedule's two clients register
/// first, and get it and the next.
const FIRST: ClientId = REGISTERED_BASE;

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
    assert_eq!(c.register(old, 1), Some(FIRST));
    assert_eq!(c.register(old, 2), Some(FIRST + 1));

    c.input(old, Input::Request(put(FIRST, 1, "a", "1")));
    c.input(old, Input::Request(put(FIRST + 1, 1, "b", "2")));
    let (s1, s2) = (
        proposed_slot(&c.trace, FIRST, 1).unwrap().1,
        proposed_slot(&c.trace, FIRST + 1, 1).unwrap().1,
    );
    assert!(s1 < s2, "the two requests went into one slot");

    // Lose every Accept of s1; deliver the Accept of s2 to one follower.
    c.net
        .retain(|m| !matches!(m.msg, Message::Accept { slot, .. } if slot == s1));
    let i = c
        .net
        .iter()
        .position(|m| {
            m.to == followers[0] && matches!(m.msg, Message::Accept { slot, .. } if slot == s2)
        })
        .unwrap();
    c.deliver(i, false);
    c.sync(followers[0]);

    // The old leader is cut off for good.
    c.nodes[old as usize].up = false;
    c.net.retain(|m| m.to != old && m.from != old);
    c.run_fair(400);
    (c, s1, s2)
}

#[test]
fn election_fills_a_gap_with_a_noop() {
    let (c, _, s2) = gap_at_election(None);
    assert!(c.violations.is_empty(), "{:?}", c.violations);
    // Both slots end up executed everywhere the new leader reaches.
    assert!(c
        .nodes
        .iter()
        .filter(|n| n.up)
        .all(|n| n.replica.last_executed() >= s2));
    matches_corpus(
        "valid/election-fills-gap-with-noop.ndjson",
        &c.trace,
        gap_filled,
    );
}

#[test]
fn skip_noop_fill_leaves_the_gap_open() {
    let (c, s1, _) = gap_at_election(Some(Bug::SkipNoopFill));
    // No safety checker notices: nothing executes past the gap, nothing disagrees.
    assert!(c.violations.is_empty(), "{:?}", c.violations);
    assert!(c
        .nodes
        .iter()
        .filter(|n| n.up)
        .all(|n| n.replica.last_executed() < s1));
    // Invalid corpus traces end at the step the spec must reject.
    let end = gap_situation(&c.trace)
        .map(|g| g.3)
        .unwrap_or_else(|e| panic!("{e}"));
    matches_corpus(
        "invalid/skip-noop-fill.ndjson",
        &c.trace[..=end],
        gap_left_open,
    );
}

/// The judgement can fail: a stored trace whose new leader replayed the gap
/// is not one that left it open, and a cut-short trace shows no election.
#[test]
fn a_trace_without_its_situation_is_rejected() {
    let (c, _, _) = gap_at_election(None);
    assert!(gap_filled(&c.trace).is_ok());
    assert!(gap_left_open(&c.trace).is_err());
    let (_, _, _, at, _) = gap_situation(&c.trace).unwrap();
    assert!(gap_filled(&c.trace[..at]).is_err());
}

//! Reads (ReadIndex): the leader answers a `Get` without writing the log,
//! once a majority has confirmed, after the read arrived, that no higher
//! ballot was promised, and once it has executed up to the read's index.

mod common;

use std::sync::Arc;

use common::*;
use stutter_core::*;

fn replica(id: ReplicaId) -> Replica {
    let mut r = Replica::new(id, test_config(3), rng(id as u64));
    let mut out = Vec::new();
    r.handle(0, Input::Start, &mut out);
    r
}

fn sends(out: &[Output]) -> Vec<(ReplicaId, Message)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Send { to, msg } => Some((*to, msg.clone())),
            _ => None,
        })
        .collect()
}

fn replies(out: &[Output]) -> Vec<(u64, u64, Reply)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Reply { client, seq, reply } => Some((*client, *seq, reply.clone())),
            _ => None,
        })
        .collect()
}

fn probes(out: &[Output]) -> Vec<(ReplicaId, Ballot, u64)> {
    sends(out)
        .into_iter()
        .filter_map(|(to, m)| match m {
            Message::ReadProbe { ballot, id } => Some((to, ballot, id)),
            _ => None,
        })
        .collect()
}

fn handle(r: &mut Replica, now: Time, input: Input) -> Vec<Output> {
    let mut out = Vec::new();
    r.handle(now, input, &mut out);
    out
}

fn msg(r: &mut Replica, now: Time, from: ReplicaId, m: Message) -> Vec<Output> {
    handle(r, now, Input::Message { from, msg: m })
}

/// Replica 0 as leader (ballot 256) with `k = v` written and executed.
fn leader_with_k() -> Replica {
    let mut r = replica(0);
    handle(&mut r, 1_000, Input::Timer(Timer::Election));
    handle(&mut r, 1_000, Input::Persisted { token: 1 });
    let b = r.ballot();
    let promise = Message::Promise { ballot: b, ok: true, last_executed: 0, entries: vec![], snapshot: None };
    msg(&mut r, 1_001, 1, promise);
    assert_eq!(r.role(), Role::Leader);
    handle(&mut r, 1_002, Input::Request(put(7, 1, "k", "v")));
    let slot = r.last_index();
    msg(&mut r, 1_003, 1, Message::Accepted { ballot: b, slot, ok: true });
    let issued = r.tokens().0;
    let out = handle(&mut r, 1_004, Input::Persisted { token: issued });
    assert_eq!(replies(&out), vec![(7, 1, Reply::Done)]);
    r
}

#[test]
fn read_needs_no_log_write_and_waits_for_a_majority_confirmation() {
    let mut r = leader_with_k();
    let b = r.ballot();
    let last = r.last_index();
    let out = handle(&mut r, 2_000, Input::Request(get(9, 1, "k")));
    assert!(out.iter().all(|o| !matches!(o, Output::Persist { .. })), "no log write for a read");
    assert!(out.iter().all(|o| !matches!(o, Output::Trace(_))), "reads are not traced");
    assert_eq!(r.last_index(), last, "no slot for a read");
    assert!(replies(&out).is_empty(), "not before a majority confirmed the leadership");
    let p = probes(&out);
    assert_eq!(p.len(), 2, "one probe to each peer");
    let id = p[0].2;
    assert!(p.iter().all(|(_, pb, pid)| *pb == b && *pid == id));
    // One acknowledgment plus the leader's own is a majority of three.
    let out = msg(&mut r, 2_001, 2, Message::ReadProbeAck { ballot: b, id });
    assert_eq!(replies(&out), vec![(9, 1, Reply::Value(Some("v".into())))]);
    assert!(out.iter().all(|o| !matches!(o, Output::Trace(_) | Output::Persist { .. })));
    assert_eq!(r.pending_reads(), 0);
}

#[test]
fn acknowledgments_of_another_probe_or_ballot_do_not_count() {
    let mut r = leader_with_k();
    let b = r.ballot();
    let out = handle(&mut r, 2_000, Input::Request(get(9, 1, "k")));
    let id = probes(&out)[0].2;
    assert!(replies(&msg(&mut r, 2_001, 1, Message::ReadProbeAck { ballot: b, id: id + 1 })).is_empty());
    assert!(replies(&msg(&mut r, 2_001, 1, Message::ReadProbeAck { ballot: b - 1, id })).is_empty());
    assert_eq!(r.pending_reads(), 1);
}

#[test]
fn reads_arriving_during_a_probe_share_the_next_one() {
    let mut r = leader_with_k();
    let b = r.ballot();
    let out = handle(&mut r, 2_000, Input::Request(get(9, 1, "k")));
    let first = probes(&out)[0].2;
    let mut later = Vec::new();
    for c in 10..15 {
        later.extend(handle(&mut r, 2_001, Input::Request(get(c, 1, "k"))));
    }
    assert!(probes(&later).is_empty(), "one probe in flight at a time");
    // The first probe answers only the read that preceded it, and starts
    // the next one for the five that came during it.
    let out = msg(&mut r, 2_002, 1, Message::ReadProbeAck { ballot: b, id: first });
    assert_eq!(replies(&out).len(), 1);
    let next = probes(&out);
    assert_eq!(next.len(), 2);
    assert_ne!(next[0].2, first);
    let out = msg(&mut r, 2_003, 2, Message::ReadProbeAck { ballot: b, id: next[0].2 });
    let answered: Vec<u64> = replies(&out).iter().map(|r| r.0).collect();
    assert_eq!(answered, vec![10, 11, 12, 13, 14]);
}

#[test]
fn acceptor_acknowledges_only_when_it_promised_no_higher_ballot_and_changes_nothing() {
    let mut f = replica(1);
    msg(&mut f, 1, 0, Message::Heartbeat { ballot: 256, last_executed: 0, global_last_executed: 0 });
    let before = f.summary();
    let out = msg(&mut f, 2, 0, Message::ReadProbe { ballot: 256, id: 4 });
    assert_eq!(sends(&out), vec![(0, Message::ReadProbeAck { ballot: 256, id: 4 })]);
    assert_eq!(out.len(), 1, "no persist, no trace, no timer");
    assert_eq!(f.summary(), before);
    // After promising a higher ballot, a probe of the old leader is not acknowledged.
    msg(&mut f, 3, 2, Message::Prepare { ballot: 514, last_executed: 0 });
    let before = f.summary();
    let out = msg(&mut f, 4, 0, Message::ReadProbe { ballot: 256, id: 5 });
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(f.summary(), before);
}

#[test]
fn deposed_leader_never_answers_a_read_and_redirects_it_when_it_learns() {
    // A leader paused (or partitioned) while the others elected a new one:
    // its local state is stale, so it must not answer, whatever the clocks.
    let mut r = leader_with_k();
    let b = r.ballot();
    let out = handle(&mut r, 1_050, Input::Request(get(9, 1, "k")));
    let id = probes(&out)[0].2;
    // Both followers promised 514 meanwhile: neither acknowledges (see the
    // acceptor test); within the election timeout (no check-quorum step
    // down yet) the heartbeat timer replaces the unanswered probe.
    let out = handle(&mut r, 1_050 + 2 * test_config(3).heartbeat_interval, Input::Timer(Timer::Heartbeat));
    assert!(replies(&out).is_empty());
    let again = probes(&out);
    assert_eq!(again.len(), 2, "an unanswered probe is replaced");
    assert_ne!(again[0].2, id);
    // A message with the higher ballot ends it: redirect, a definite answer.
    let out = msg(&mut r, 1_080, 1, Message::Accepted { ballot: 514, slot: 1, ok: false });
    assert_eq!(r.role(), Role::Follower);
    assert_eq!(replies(&out), vec![(9, 1, Reply::Redirect { leader: Some(2) })]);
    assert_eq!(r.pending_reads(), 0);
    // Late acknowledgments of its old probes do nothing.
    assert!(replies(&msg(&mut r, 1_090, 2, Message::ReadProbeAck { ballot: b, id })).is_empty());
}

#[test]
fn read_waits_until_the_new_leader_executed_what_earlier_leaders_may_have_acknowledged() {
    // Replica 0 becomes leader; a promise carries slot 1 (`k = old`,
    // accepted at ballot 1, maybe chosen and acknowledged by leader 1).
    let mut r = replica(0);
    handle(&mut r, 1_000, Input::Timer(Timer::Election));
    handle(&mut r, 1_000, Input::Persisted { token: 1 });
    let b = r.ballot();
    let v = Value::Batch(Arc::new(vec![put(5, 1, "k", "old")]));
    let entries = vec![Instance { slot: 1, ballot: 1, value: v, state: InstanceState::InProgress }];
    msg(&mut r, 1_001, 1, Message::Promise { ballot: b, ok: true, last_executed: 0, entries, snapshot: None });
    assert_eq!(r.role(), Role::Leader);
    assert_eq!(r.last_executed(), 0, "the replayed slot is not committed yet");
    let out = handle(&mut r, 1_002, Input::Request(get(9, 1, "k")));
    let id = probes(&out)[0].2;
    let out = msg(&mut r, 1_003, 1, Message::ReadProbeAck { ballot: b, id });
    assert!(replies(&out).is_empty(), "confirmed, but slot 1 is not executed: answering now could miss it");
    // The replay commits: the read sees the value.
    msg(&mut r, 1_004, 2, Message::Accepted { ballot: b, slot: 1, ok: true });
    let issued = r.tokens().0;
    let out = handle(&mut r, 1_005, Input::Persisted { token: issued });
    assert_eq!(r.last_executed(), 1);
    let reads: Vec<_> = replies(&out).into_iter().filter(|r| r.0 == 9).collect();
    assert_eq!(reads, vec![(9, 1, Reply::Value(Some("old".into())))]);
}

#[test]
fn follower_still_redirects_reads_and_the_injected_local_reads_bug_still_skips_the_probe() {
    let mut f = replica(1);
    let out = handle(&mut f, 1, Input::Request(get(1, 1, "k")));
    assert_eq!(replies(&out), vec![(1, 1, Reply::Redirect { leader: None })]);

    let mut cfg = test_config(3);
    cfg.injected_bug = Some(Bug::LocalReads);
    let mut r = Replica::new(0, cfg, rng(0));
    handle(&mut r, 0, Input::Start);
    handle(&mut r, 1_000, Input::Timer(Timer::Election));
    handle(&mut r, 1_000, Input::Persisted { token: 1 });
    let b = r.ballot();
    msg(&mut r, 1_001, 1, Message::Promise { ballot: b, ok: true, last_executed: 0, entries: vec![], snapshot: None });
    let out = handle(&mut r, 1_002, Input::Request(get(9, 1, "k")));
    assert_eq!(replies(&out), vec![(9, 1, Reply::Value(None))], "answered at once from local state");
    assert!(probes(&out).is_empty());
}

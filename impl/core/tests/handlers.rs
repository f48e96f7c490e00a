//! One handler at a time: explicit inputs to a single replica, and the exact
//! outputs it must produce (in the spirit of etcd raft's transcript tests).

mod common;

use std::sync::Arc;

use common::*;
use stutter_core::*;

fn replica(id: ReplicaId) -> (Replica, Vec<Output>) {
    let mut r = Replica::new(id, test_config(3), rng(id as u64));
    let mut out = Vec::new();
    r.handle(0, Input::Start, &mut out);
    (r, out)
}

fn sends(out: &[Output]) -> Vec<(ReplicaId, Message)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Send { to, msg } => Some((*to, msg.clone())),
            _ => None,
        })
        .collect()
}

fn persists(out: &[Output]) -> Vec<(u64, Vec<Record>)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Persist { token, records } => Some((*token, records.clone())),
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

fn actions(out: &[Output]) -> Vec<Action> {
    out.iter()
        .filter_map(|o| match o {
            Output::Trace(e) => Some(e.action.clone()),
            _ => None,
        })
        .collect()
}

fn msg(r: &mut Replica, now: Time, from: ReplicaId, m: Message) -> Vec<Output> {
    let mut out = Vec::new();
    r.handle(now, Input::Message { from, msg: m }, &mut out);
    out
}

fn inst(slot: Slot, ballot: Ballot, v: Value, state: InstanceState) -> Instance {
    Instance { slot, ballot, value: v, state }
}

fn batch(reqs: Vec<Request>) -> Value {
    Value::Batch(Arc::new(reqs))
}

/// Makes replica `id` leader at its first ballot with empty promises.
fn elect(r: &mut Replica) -> Vec<Output> {
    let mut out = Vec::new();
    r.handle(1_000, Input::Timer(Timer::Election), &mut out);
    r.handle(1_000, Input::Persisted { token: 1 }, &mut out);
    let b = r.ballot();
    let promise = Message::Promise { ballot: b, ok: true, last_executed: 0, entries: vec![], snapshot: None };
    out.extend(msg(r, 1_001, (r.id() + 1) % 3, promise));
    out
}

#[test]
fn start_arms_the_election_timer_with_jitter_in_range() {
    let (_, out) = replica(0);
    let at: Vec<Time> = out
        .iter()
        .filter_map(|o| match o {
            Output::SetTimer { timer: Timer::Election, at } => Some(*at),
            _ => None,
        })
        .collect();
    assert_eq!(at.len(), 1);
    assert!((100..=150).contains(&at[0]), "timeout 100 + jitter ≤ 50, got {}", at[0]);
}

#[test]
fn election_timeout_persists_ballot_before_sending_prepare() {
    let (mut r, _) = replica(1);
    let mut out = Vec::new();
    r.handle(1_000, Input::Timer(Timer::Election), &mut out);
    assert_eq!(r.role(), Role::Candidate);
    assert_eq!(r.ballot(), 1, "round 0, id 1");
    assert_eq!(persists(&out), vec![(1, vec![Record::Ballot(1)])]);
    assert!(sends(&out).is_empty(), "Prepare must wait for the ballot to be durable");
    assert_eq!(actions(&out), vec![Action::StartElection { ballot: 1 }]);
    let mut out = Vec::new();
    r.handle(1_001, Input::Persisted { token: 1 }, &mut out);
    let s = sends(&out);
    assert_eq!(s.len(), 2);
    for (to, m) in s {
        assert!(to == 0 || to == 2);
        assert_eq!(m, Message::Prepare { ballot: 1, last_executed: 0 });
    }
}

#[test]
fn early_or_stale_election_timer_is_ignored() {
    let (mut r, _) = replica(0);
    let mut out = Vec::new();
    r.handle(10, Input::Timer(Timer::Election), &mut out);
    assert_eq!(r.role(), Role::Follower);
    assert!(out.is_empty());
}

#[test]
fn prepare_with_higher_ballot_is_promised_after_persisting() {
    let (mut r, _) = replica(0);
    let out = msg(&mut r, 5, 1, Message::Prepare { ballot: 257, last_executed: 0 });
    assert_eq!(r.ballot(), 257);
    assert_eq!(persists(&out), vec![(1, vec![Record::Ballot(257)])]);
    assert!(sends(&out).is_empty());
    let mut out = Vec::new();
    r.handle(6, Input::Persisted { token: 1 }, &mut out);
    match &sends(&out)[..] {
        [(1, Message::Promise { ballot: 257, ok: true, entries, snapshot: None, .. })] => {
            assert!(entries.is_empty())
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn prepare_with_lower_ballot_is_rejected_with_own_ballot_and_ballot_never_lowers() {
    let (mut r, _) = replica(0);
    msg(&mut r, 5, 1, Message::Prepare { ballot: 513, last_executed: 0 });
    let out = msg(&mut r, 6, 2, Message::Prepare { ballot: 258, last_executed: 0 });
    assert_eq!(r.ballot(), 513);
    assert!(persists(&out).is_empty());
    match &sends(&out)[..] {
        [(2, Message::Promise { ballot: 513, ok: false, .. })] => {}
        other => panic!("unexpected {other:?}"),
    }
    // Accept and heartbeat with a lower ballot do not lower it either.
    let out = msg(&mut r, 7, 2, Message::Accept { ballot: 258, slot: 1, value: Value::Noop });
    assert_eq!(r.ballot(), 513);
    assert!(matches!(&sends(&out)[..], [(2, Message::Accepted { ballot: 513, ok: false, .. })]));
    assert!(r.instance(1).is_none());
    let out = msg(&mut r, 8, 2, Message::Heartbeat { ballot: 258, last_executed: 5, global_last_executed: 0 });
    assert_eq!(r.ballot(), 513);
    assert!(matches!(&sends(&out)[..], [(2, Message::HeartbeatReply { ballot: 513, ok: false, .. })]));
}

#[test]
fn promise_carries_log_suffix_above_candidates_last_executed() {
    let (mut r, _) = replica(0);
    msg(&mut r, 1, 1, Message::Accept { ballot: 1, slot: 1, value: Value::Noop });
    msg(&mut r, 1, 1, Message::Accept { ballot: 1, slot: 2, value: batch(vec![put(9, 1, "k", "v")]) });
    let mut out = Vec::new();
    r.handle(2, Input::Persisted { token: r.tokens().0 }, &mut out);
    let out = msg(&mut r, 3, 2, Message::Prepare { ballot: 258, last_executed: 1 });
    let mut out2 = Vec::new();
    r.handle(4, Input::Persisted { token: r.tokens().0 }, &mut out2);
    let all: Vec<Output> = out.into_iter().chain(out2).collect();
    match &sends(&all)[..] {
        [(2, Message::Promise { ok: true, entries, .. })] => {
            assert_eq!(entries.iter().map(|e| (e.slot, e.ballot)).collect::<Vec<_>>(), vec![(2, 1)]);
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn merge_committed_wins_else_highest_ballot_and_gaps_become_noops() {
    let a = batch(vec![put(1, 1, "a", "1")]);
    let x = batch(vec![put(2, 1, "x", "1")]);
    let y = batch(vec![put(3, 1, "y", "1")]);
    let z = batch(vec![put(4, 1, "z", "1")]);
    // Five replicas, so that two promises are needed besides the candidate's.
    // Candidate's own log: slot 1 `x` and slot 2 `z`, both at ballot 1.
    // Promise from 2: slot 1 committed `a` (beats `x` though not higher),
    // slot 4 `x` at ballot 2 (only it has slot 4). Promise from 3: slot 2
    // `y` at ballot 2 (beats `z` at ballot 1). Slot 3: nobody → no-op.
    let mut r5 = Replica::new(0, Config { n: 5, ..test_config(5) }, rng(5));
    let mut o = Vec::new();
    r5.handle(0, Input::Start, &mut o);
    msg(&mut r5, 1, 1, Message::Accept { ballot: 1, slot: 1, value: x.clone() });
    msg(&mut r5, 1, 1, Message::Accept { ballot: 1, slot: 2, value: z.clone() });
    r5.handle(2, Input::Persisted { token: r5.tokens().0 }, &mut o);
    r5.handle(10_000, Input::Timer(Timer::Election), &mut o);
    r5.handle(10_000, Input::Persisted { token: r5.tokens().0 }, &mut o);
    let b5 = r5.ballot();
    let p1 = vec![inst(1, 1, a.clone(), InstanceState::Committed), inst(4, 2, x.clone(), InstanceState::InProgress)];
    let p2 = vec![inst(2, 2, y.clone(), InstanceState::InProgress)];
    msg(&mut r5, 10_001, 2, Message::Promise { ballot: b5, ok: true, last_executed: 0, entries: p1, snapshot: None });
    assert_eq!(r5.role(), Role::Candidate, "2 of 5");
    let out = msg(&mut r5, 10_002, 3, Message::Promise { ballot: b5, ok: true, last_executed: 0, entries: p2, snapshot: None });
    assert_eq!(r5.role(), Role::Leader);
    assert_eq!(r5.instance(1).map(|i| i.value.clone()), Some(a.clone()), "committed wins");
    assert_eq!(r5.instance(1).map(|i| i.state), Some(InstanceState::Executed), "known committed, executed at once");
    assert_eq!(r5.instance(2).map(|i| i.value.clone()), Some(y.clone()), "highest ballot wins");
    assert_eq!(r5.instance(3).map(|i| i.value.clone()), Some(Value::Noop), "gap filled");
    assert_eq!(r5.instance(4).map(|i| i.value.clone()), Some(x.clone()));
    for s in 1..=4 {
        assert_eq!(r5.instance(s).map(|i| i.ballot), Some(b5), "replayed at the new ballot");
    }
    assert_eq!(r5.last_executed(), 1);
    let accepts: Vec<Slot> = sends(&out)
        .into_iter()
        .filter_map(|(_, m)| match m {
            Message::Accept { ballot, slot, .. } if ballot == b5 => Some(slot),
            _ => None,
        })
        .collect();
    assert_eq!(accepts.len(), 4 * 4, "each of 4 slots replayed to 4 peers");
    match actions(&out).iter().find(|a| matches!(a, Action::BecomeLeader { .. })) {
        Some(Action::BecomeLeader { merged_from, entries, .. }) => {
            assert_eq!(merged_from, &vec![0, 2, 3]);
            assert_eq!(entries.len(), 4);
        }
        other => panic!("no BecomeLeader: {other:?}"),
    }
}

#[test]
fn accept_is_acknowledged_only_after_persist_and_keeps_committed_slots() {
    let (mut r, _) = replica(2);
    let v = batch(vec![put(1, 1, "k", "v")]);
    let out = msg(&mut r, 1, 1, Message::Accept { ballot: 1, slot: 1, value: v.clone() });
    assert!(sends(&out).is_empty());
    let p = persists(&out);
    assert_eq!(p.len(), 2, "ballot raise and the instance");
    assert_eq!(p[1].1, vec![Record::Accept { slot: 1, ballot: 1, value: v.clone() }]);
    let mut out = Vec::new();
    r.handle(2, Input::Persisted { token: 1 }, &mut out);
    assert!(sends(&out).is_empty(), "token 2 is not durable yet");
    r.handle(2, Input::Persisted { token: 2 }, &mut out);
    assert_eq!(sends(&out), vec![(1, Message::Accepted { ballot: 1, slot: 1, ok: true })]);
    assert_eq!(r.leader(), Some(1));
}

#[test]
fn leader_commits_on_majority_only_and_replies_to_the_client() {
    let (mut r, _) = replica(0);
    let _ = elect(&mut r);
    assert_eq!(r.role(), Role::Leader);
    let b = r.ballot();
    let mut out = Vec::new();
    r.handle(2_000, Input::Request(put(7, 1, "k", "v")), &mut out);
    let slot = r.last_index();
    assert_eq!(r.instance(slot).map(|i| i.state), Some(InstanceState::InProgress));
    let accepts = sends(&out).len();
    assert_eq!(accepts, 2);
    // A follower's vote alone is not a majority of 3 (own vote not durable yet).
    let out = msg(&mut r, 2_001, 1, Message::Accepted { ballot: b, slot, ok: true });
    assert!(replies(&out).is_empty());
    assert_eq!(r.instance(slot).map(|i| i.state), Some(InstanceState::InProgress));
    // Own persist completes → majority → commit, execute, reply.
    let mut out = Vec::new();
    r.handle(2_002, Input::Persisted { token: r.tokens().0 }, &mut out);
    assert_eq!(replies(&out), vec![(7, 1, Reply::Done)]);
    assert_eq!(r.last_executed(), slot);
}

#[test]
fn rejection_with_higher_ballot_makes_the_leader_step_down_and_redirect_pending() {
    let (mut r, _) = replica(0);
    let _ = elect(&mut r);
    let b = r.ballot();
    let mut cfg_window_full = Vec::new();
    for seq in 1..=10 {
        r.handle(2_000, Input::Request(put(seq, 1, "k", "v")), &mut cfg_window_full);
    }
    assert!(r.pending_len() > 0, "window 4 × batch 3 < 10 requests");
    let out = msg(&mut r, 2_001, 1, Message::Accepted { ballot: b + 256, slot: 1, ok: false });
    assert_eq!(r.role(), Role::Follower);
    assert_eq!(r.ballot(), b + 256);
    assert!(actions(&out).contains(&Action::StepDown { ballot: b + 256 }));
    let redirected = replies(&out).iter().filter(|r| matches!(r.2, Reply::Redirect { .. })).count();
    assert!(redirected > 0, "never-proposed requests get a definite rejection");
}

#[test]
fn follower_redirects_clients_to_the_leader_it_knows() {
    let (mut r, _) = replica(1);
    let mut out = Vec::new();
    r.handle(1, Input::Request(get(1, 1, "k")), &mut out);
    assert_eq!(replies(&out), vec![(1, 1, Reply::Redirect { leader: None })]);
    msg(&mut r, 2, 2, Message::Heartbeat { ballot: 2, last_executed: 0, global_last_executed: 0 });
    let mut out = Vec::new();
    r.handle(3, Input::Request(get(1, 1, "k")), &mut out);
    assert_eq!(replies(&out), vec![(1, 1, Reply::Redirect { leader: Some(2) })]);
}

#[test]
fn follower_commits_only_entries_of_the_heartbeats_ballot() {
    let (mut r, _) = replica(1);
    let new = batch(vec![put(2, 1, "b", "new")]);
    msg(&mut r, 1, 0, Message::Accept { ballot: 256, slot: 1, value: new.clone() });
    msg(&mut r, 1, 2, Message::Accept { ballot: 258, slot: 2, value: Value::Noop });
    // Slot 1 holds a value of the old ballot 256, which the leader of 258
    // may have replaced: a 258 heartbeat must not commit it.
    let mut o = Vec::new();
    r.handle(2, Input::Persisted { token: r.tokens().0 }, &mut o);
    let out = msg(&mut r, 3, 2, Message::Heartbeat { ballot: 258, last_executed: 3, global_last_executed: 0 });
    assert_eq!(r.last_executed(), 0, "slot 1 is from ballot 256: not committed by a 258 heartbeat");
    match actions(&out).last() {
        Some(Action::HandleHeartbeat { committed, ok: true, .. }) => assert!(committed.is_empty()),
        other => panic!("unexpected {other:?}"),
    }
    // The new leader replays slot 1 at its ballot: now it commits up to 2.
    msg(&mut r, 4, 2, Message::Accept { ballot: 258, slot: 1, value: new.clone() });
    let out = msg(&mut r, 5, 2, Message::Heartbeat { ballot: 258, last_executed: 3, global_last_executed: 0 });
    assert_eq!(r.last_executed(), 2, "slots 1-2 at ballot 258; slot 3 missing");
    let mut o = Vec::new();
    r.handle(6, Input::Persisted { token: r.tokens().0 }, &mut o);
    let all: Vec<Output> = out.into_iter().chain(o).collect();
    assert!(sends(&all).iter().any(|(to, m)| *to == 2
        && matches!(m, Message::HeartbeatReply { ok: true, last_executed: 2, leader_last_executed: 3, .. })));
}

#[test]
fn retried_request_is_answered_from_the_session_table_without_a_new_slot() {
    let (mut r, _) = replica(0);
    let _ = elect(&mut r);
    let b = r.ballot();
    let mut out = Vec::new();
    r.handle(2_000, Input::Request(put(7, 1, "k", "v")), &mut out);
    let slot = r.last_index();
    // The client retries before the commit: attached, not proposed twice.
    r.handle(2_001, Input::Request(put(7, 1, "k", "v")), &mut out);
    assert_eq!(r.last_index(), slot);
    msg(&mut r, 2_002, 1, Message::Accepted { ballot: b, slot, ok: true });
    let mut out = Vec::new();
    r.handle(2_003, Input::Persisted { token: r.tokens().0 }, &mut out);
    assert_eq!(replies(&out), vec![(7, 1, Reply::Done)]);
    // Retried after execution: recorded reply, no new slot.
    let mut out = Vec::new();
    r.handle(2_004, Input::Request(put(7, 1, "k", "other")), &mut out);
    assert_eq!(replies(&out), vec![(7, 1, Reply::Done)]);
    assert_eq!(r.last_index(), slot);
    assert_eq!(r.state_machine().kv.get(&bytes::Bytes::from("k")), Some(&bytes::Bytes::from("v")));
    let mut out = Vec::new();
    r.handle(2_005, Input::Request(put(7, 0, "k", "older")), &mut out);
    assert_eq!(replies(&out), vec![(7, 0, Reply::Stale)]);
}

#[test]
fn requests_beyond_the_window_are_batched() {
    let (mut r, _) = replica(0);
    let _ = elect(&mut r);
    let start = r.last_index();
    let mut out = Vec::new();
    for c in 1..=10 {
        r.handle(2_000, Input::Request(put(c, 1, "k", "v")), &mut out);
    }
    // Window 4: four slots in flight; the rest wait and are batched (≤ 3).
    assert_eq!(r.last_index(), start + 4);
    assert_eq!(r.pending_len(), 6);
    let b = r.ballot();
    r.handle(2_001, Input::Persisted { token: r.tokens().0 }, &mut out);
    msg(&mut r, 2_002, 1, Message::Accepted { ballot: b, slot: start + 1, ok: true });
    assert_eq!(r.last_index(), start + 5);
    assert_eq!(r.instance(start + 5).map(|i| i.value.requests().len()), Some(3));
}

#[test]
fn recovered_replica_keeps_its_ballot_and_accepted_instances() {
    let mut d = DurableState::default();
    d.apply(Record::Ballot(514));
    d.apply(Record::Accept { slot: 1, ballot: 258, value: Value::Noop });
    let mut r = Replica::recover(0, test_config(3), d, rng(1));
    let mut out = Vec::new();
    r.handle(0, Input::Start, &mut out);
    assert_eq!(r.ballot(), 514);
    assert_eq!(r.instance(1).map(|i| (i.ballot, i.state)), Some((258, InstanceState::InProgress)));
    assert!(actions(&out).contains(&Action::Recover));
    // It will not promise a ballot it already exceeded.
    let out = msg(&mut r, 1, 1, Message::Prepare { ballot: 257, last_executed: 0 });
    assert!(matches!(&sends(&out)[..], [(1, Message::Promise { ok: false, ballot: 514, .. })]));
}

#[test]
fn messages_from_unknown_or_own_ids_are_dropped() {
    let (mut r, _) = replica(0);
    let out = msg(&mut r, 1, 9, Message::Prepare { ballot: 999, last_executed: 0 });
    assert!(out.is_empty());
    let out = msg(&mut r, 1, 0, Message::Prepare { ballot: 999, last_executed: 0 });
    assert!(out.is_empty());
    assert_eq!(r.ballot(), 0);
}

#[test]
fn promiser_that_trimmed_past_the_candidate_sends_its_snapshot() {
    let (mut c, leader) = cluster_after_puts(test_config(3), 20);
    let trimmed: Vec<Slot> = c.nodes.iter().map(|n| n.replica.trimmed()).collect();
    assert!(trimmed.iter().all(|t| *t > 0), "trim_every 4: everyone trimmed, got {trimmed:?}");
    let follower = (leader + 1) % 3;
    let mut r = std::mem::replace(&mut c.nodes[follower as usize].replica, Replica::new(follower, test_config(3), rng(0)));
    let b = r.ballot() + 256;
    let out = msg(&mut r, c.now, (follower + 1) % 3, Message::Prepare { ballot: b, last_executed: 0 });
    let mut o = Vec::new();
    r.handle(c.now, Input::Persisted { token: r.tokens().0 }, &mut o);
    let all: Vec<Output> = out.into_iter().chain(o).collect();
    match sends(&all).into_iter().find(|(_, m)| matches!(m, Message::Promise { .. })) {
        Some((_, Message::Promise { ok: true, snapshot: Some(s), entries, .. })) => {
            assert_eq!(s.last_executed, r.last_executed());
            assert!(entries.iter().all(|e| e.slot > s.last_executed));
        }
        other => panic!("expected a promise with a snapshot, got {other:?}"),
    }
}

#[test]
fn trimming_by_bytes_of_executed_requests() {
    // Slots alone would never trim here; 40 puts of ~10 bytes plus overhead
    // pass 1,000 bytes.
    let cfg = Config { trim_every: 1 << 40, trim_bytes: 1_000, ..test_config(3) };
    let (c, _) = cluster_after_puts(cfg, 40);
    let trimmed: Vec<Slot> = c.nodes.iter().map(|n| n.replica.trimmed()).collect();
    assert!(trimmed.iter().all(|t| *t > 0), "everyone trimmed, got {trimmed:?}");
    assert!(c.violations.is_empty(), "{:?}", c.violations);
    let (c, _) = cluster_after_puts(Config { trim_bytes: 0, ..cfg_no_slots() }, 40);
    assert!(c.nodes.iter().all(|n| n.replica.trimmed() == 0), "neither trigger: no trim");
}

/// Three replicas with `cfg` after electing a leader and executing `puts`
/// puts of distinct keys, one at a time; returns the cluster and the leader.
fn cluster_after_puts(cfg: Config, puts: u64) -> (Cluster, ReplicaId) {
    let mut c = Cluster::new(cfg, 3);
    c.run_fair(2_000);
    let leader = c.leader().expect("a leader");
    for seq in 1..=puts {
        c.input(leader, Input::Request(put(100 + seq, 1, &format!("k{seq}"), "v")));
        c.run_fair(50);
    }
    c.run_fair(500);
    (c, leader)
}

fn cfg_no_slots() -> Config {
    Config { trim_every: 1 << 40, ..test_config(3) }
}

#[test]
fn leader_cut_off_from_a_majority_steps_down() {
    let (mut r, _) = replica(0);
    let _ = elect(&mut r);
    assert_eq!(r.role(), Role::Leader);
    let b = r.ballot();
    // One follower answers heartbeats for a while: quorum kept.
    let mut t = 1_001;
    for _ in 0..20 {
        t += 10;
        let mut out = Vec::new();
        r.handle(t, Input::Timer(Timer::Heartbeat), &mut out);
        msg(&mut r, t, 1, Message::HeartbeatReply { ballot: b, ok: true, last_executed: 0, leader_last_executed: 0 });
    }
    assert_eq!(r.role(), Role::Leader);
    // Then silence for longer than the election timeout.
    let mut out = Vec::new();
    for _ in 0..15 {
        t += 10;
        r.handle(t, Input::Timer(Timer::Heartbeat), &mut out);
    }
    assert_eq!(r.role(), Role::Follower);
    assert_eq!(r.ballot(), b, "stepping down never changes the ballot");
    assert!(actions(&out).contains(&Action::StepDown { ballot: b }));
}

//! Session expiry (issue 17): with a bounded session table the runs stay
//! correct and clients meet expired sessions. Legacy clients (ids below
//! 2^63, `Scenario::legacy_clients`): with few tombstones a client's resent
//! first request is expired thanks to its retry flag, and the at-most-once
//! checker catches it running twice when the flag is ignored. Registered
//! clients (the default): every operation runs under an assigned id, and
//! the checker catches an evicted registered id that is not expired.

use stutter_sim::history::Outcome;
use stutter_sim::scenario::Scenario;

/// The sessions scenario with legacy clients, whose expiry rests on
/// tombstones and the retry flag.
fn legacy_sessions() -> Scenario {
    let mut s = Scenario::named("sessions").expect("the sessions scenario");
    s.set_legacy_clients();
    s
}

#[test]
fn a_bounded_table_expires_sessions_and_every_check_passes() {
    let out = stutter_sim::run(legacy_sessions(), 3);
    assert!(out.violations.is_empty(), "{:?}", out.violations);
    let expired = out
        .history
        .iter()
        .filter(|o| matches!(o.outcome, Outcome::Unknown(_)))
        .count();
    let ok = out.history.iter().filter(|o| o.is_ok()).count();
    assert!(expired > 1_000 && ok > 1_000, "{expired} expired, {ok} ok");
    // Clients continued under new ids after their sessions expired.
    let ids: std::collections::BTreeSet<_> = out.history.iter().map(|o| o.client).collect();
    assert!(ids.len() > 1_000, "{} client ids", ids.len());
}

/// Seed 14 with 16 tombstones: a client's seq-1 request executed after a
/// leader change, the client never heard of it, and its resend arrived
/// after its session and tombstone were gone (docs/protocol.md, "Session
/// expiry").
fn few_tombstones() -> Scenario {
    let mut s = legacy_sessions();
    s.session_tombstones = 16;
    s
}

#[test]
fn with_few_tombstones_a_resent_first_request_is_expired_not_run_twice() {
    let out = stutter_sim::run(few_tombstones(), 14);
    assert!(out.violations.is_empty(), "{:?}", out.violations);
}

#[test]
fn with_the_retry_flag_ignored_the_first_request_runs_twice_and_the_checker_says_so() {
    let mut s = few_tombstones();
    s.bug = Some(stutter_core::Bug::IgnoreRetryFlag);
    let out = stutter_sim::run(s, 14);
    assert!(
        out.violations.iter().any(|v| v.check == "at-most-once"),
        "{:?}",
        out.violations
    );
}

#[test]
fn an_unbounded_table_expires_nothing() {
    let mut s = legacy_sessions();
    s.session_limit = usize::MAX;
    let out = stutter_sim::run(s, 3);
    assert!(out.violations.is_empty(), "{:?}", out.violations);
    assert!(!out
        .history
        .iter()
        .any(|o| matches!(o.outcome, Outcome::Unknown(_))));
}

/// The sessions scenario as named: its clients register (`Op::Register`)
/// and use the ids the log assigns.
fn registered() -> Scenario {
    let s = Scenario::named("sessions").expect("the sessions scenario");
    assert!(!s.legacy_clients, "clients register by default");
    s
}

#[test]
fn registered_clients_use_assigned_ids_meet_expiry_and_every_check_passes() {
    let out = stutter_sim::run(registered(), 3);
    assert!(out.violations.is_empty(), "{:?}", out.violations);
    assert!(
        out.history
            .iter()
            .all(|o| o.client >= stutter_core::REGISTERED_BASE),
        "every operation under an assigned id"
    );
    let expired = out
        .history
        .iter()
        .filter(|o| matches!(o.outcome, Outcome::Unknown(_)))
        .count();
    let ok = out.history.iter().filter(|o| o.is_ok()).count();
    assert!(expired > 100 && ok > 1_000, "{expired} expired, {ok} ok");
}

#[test]
fn with_registered_ids_never_expired_a_request_runs_twice_and_the_checker_says_so() {
    let mut s = registered();
    s.bug = Some(stutter_core::Bug::RegisteredNoExpiry);
    let out = stutter_sim::run(s, 1);
    assert!(
        out.violations.iter().any(|v| v.check == "at-most-once"),
        "{:?}",
        out.violations
    );
}

#[test]
fn legacy_clients_use_ids_below_the_registered_base() {
    let out = stutter_sim::run(legacy_sessions(), 3);
    assert!(!out.history.is_empty());
    assert!(
        out.history
            .iter()
            .all(|o| o.client < stutter_core::REGISTERED_BASE),
        "every operation under a legacy id"
    );
}

/// The exported history (`sim run --export-history`) names registered
/// clients by processes that a signed 64-bit reader takes (the campaigns'
/// checker decodes a process into a Go `int`), one process per client id.
#[test]
fn exported_histories_of_registered_clients_fit_a_signed_process() {
    let out = stutter_sim::run(registered(), 3);
    let mut buf = Vec::new();
    stutter_sim::history::write_ndjson(&mut buf, &out.history).expect("write");
    let mut processes = std::collections::BTreeSet::new();
    for line in String::from_utf8(buf).expect("utf-8").lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("json");
        processes.insert(v["process"].as_i64().expect("a process that fits an i64"));
    }
    let clients: std::collections::BTreeSet<_> = out.history.iter().map(|o| o.client).collect();
    assert!(clients.len() > 100, "{} clients", clients.len());
    assert_eq!(processes.len(), clients.len(), "one process per client id");
}

//! Session expiry (issue 17): with a bounded session table the runs stay
//! correct, clients meet expired sessions and continue under new ids, and
//! the at-most-once checker catches an evicted id that is not expired.

// Test code: unwrap, expect and panic are how a test fails (the
// workspace lints deny them in the code under test).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use stutter_sim::history::Outcome;
use stutter_sim::scenario::Scenario;

/// The sessions scenario: 40 clients, a table of 4 sessions.
fn sessions() -> Scenario {
    Scenario::named("sessions").expect("the sessions scenario")
}

#[test]
fn clients_use_assigned_ids_meet_expiry_and_every_check_passes() {
    let out = stutter_sim::run(sessions(), 3);
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
    // Clients continued under new ids after their sessions expired.
    let ids: std::collections::BTreeSet<_> = out.history.iter().map(|o| o.client).collect();
    assert!(ids.len() > 100, "{} client ids", ids.len());
}

#[test]
fn with_registered_ids_never_expired_a_request_runs_twice_and_the_checker_says_so() {
    let mut s = sessions();
    s.bug = Some(stutter_core::Bug::RegisteredNoExpiry);
    let out = stutter_sim::run(s, 1);
    assert!(
        out.violations.iter().any(|v| v.check == "at-most-once"),
        "{:?}",
        out.violations
    );
}

#[test]
fn an_unbounded_table_expires_nothing() {
    let mut s = sessions();
    s.session_limit = usize::MAX;
    let out = stutter_sim::run(s, 3);
    assert!(out.violations.is_empty(), "{:?}", out.violations);
    assert!(!out
        .history
        .iter()
        .any(|o| matches!(o.outcome, Outcome::Unknown(_))));
}

/// The exported history (`sim run --export-history`) names registered
/// clients by processes that a signed 64-bit reader takes (the campaigns'
/// checker decodes a process into a Go `int`), one process per client id.
#[test]
fn exported_histories_of_registered_clients_fit_a_signed_process() {
    let out = stutter_sim::run(sessions(), 3);
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

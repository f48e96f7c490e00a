//! Session expiry (issue 17): with a bounded session table the runs stay
//! correct, clients meet expired sessions, and the at-most-once checker
//! catches the one case expiry leaves open when tombstones are too few.

use stutter_sim::history::Outcome;
use stutter_sim::scenario::Scenario;

fn sessions() -> Scenario {
    Scenario::named("sessions").expect("the sessions scenario")
}

#[test]
fn a_bounded_table_expires_sessions_and_every_check_passes() {
    let out = stutter_sim::run(sessions(), 3);
    assert!(out.violations.is_empty(), "{:?}", out.violations);
    let expired = out.history.iter().filter(|o| matches!(o.outcome, Outcome::Unknown(_))).count();
    let ok = out.history.iter().filter(|o| o.is_ok()).count();
    assert!(expired > 1_000 && ok > 1_000, "{expired} expired, {ok} ok");
    // Clients continued under new ids after their sessions expired.
    let ids: std::collections::BTreeSet<_> = out.history.iter().map(|o| o.client).collect();
    assert!(ids.len() > 1_000, "{} client ids", ids.len());
}

#[test]
fn too_few_tombstones_let_a_first_request_run_twice_and_the_checker_says_so() {
    // The residual case (docs/protocol.md, "Session expiry"): a client's
    // seq-1 request re-proposed after a leader change outlives the 16
    // tombstones and executes again.
    let mut s = sessions();
    s.session_tombstones = 16;
    let out = stutter_sim::run(s, 14);
    assert!(out.violations.iter().any(|v| v.check == "at-most-once"), "{:?}", out.violations);
}

#[test]
fn an_unbounded_table_expires_nothing() {
    let mut s = sessions();
    s.session_limit = usize::MAX;
    let out = stutter_sim::run(s, 3);
    assert!(out.violations.is_empty(), "{:?}", out.violations);
    assert!(!out.history.iter().any(|o| matches!(o.outcome, Outcome::Unknown(_))));
}

//! What the default swarm's seeds explore: GC coordination, each hand-off
//! mode and the grant-after-grace switch are drawn from the seed
//! (`Scenario::from_seed`), so a plain `sim swarm` reaches them without
//! flags. Counts over seeds 0..2000 are printed (`--nocapture`) and
//! bounded, and every mode must occur.

// Test code: unwrap, expect and panic are how a test fails (the
// workspace lints deny them in the code under test).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use stutter_sim::scenario::Scenario;

#[test]
fn the_default_swarm_draws_coordination_and_every_hand_off_mode() {
    let (mut coordinated, mut fast, mut grace, mut as_before) = (0, 0, 0, 0);
    let mut modes: BTreeMap<(bool, bool, bool), u32> = BTreeMap::new();
    for seed in 0..2000 {
        let s = Scenario::from_seed(seed);
        let mode = (s.gc_handoff_promise, s.gc_handoff_eager, s.commit_on_accept);
        if !s.memory.coordinated {
            // Seeds that do not coordinate run as before the draw existed.
            assert_eq!(mode, (false, false, false), "seed {seed}: {}", s.name);
            assert!(!s.gc_grant_after_grace, "seed {seed}: {}", s.name);
            continue;
        }
        coordinated += 1;
        *modes.entry(mode).or_default() += 1;
        if mode == (true, true, true) {
            fast += 1;
            assert!(
                s.name.contains("+handoff(promise,eager,commit)"),
                "{}",
                s.name
            );
        }
        if s.gc_grant_after_grace {
            grace += 1;
            assert!(s.name.contains("+grace-grant"), "{}", s.name);
        }
        assert!(!s.gc_handoff_eager || s.gc_handoff_promise, "{}", s.name);
        if mode == (false, false, false) && !s.gc_grant_after_grace {
            as_before += 1; // the waiting hand-off, as before the draw
        }
    }
    println!(
        "seeds 0..2000: {coordinated} coordinate, {fast} hand off fast, {grace} grant after grace, {as_before} run as before the draw; modes (promise, eager, commit): {modes:?}"
    );
    // A third of the seeds draw a collector, half of those coordinate.
    assert!((250..420).contains(&coordinated), "{coordinated}");
    // Half of the coordinating seeds hand off fast (plus 1/8 of the rest).
    assert!(
        fast * 2 > coordinated && fast * 10 < coordinated * 7,
        "{fast}"
    );
    assert!(
        grace * 3 > coordinated && grace * 3 < coordinated * 2,
        "{grace}"
    );
    // Every combination of the switches (eager only with the promise).
    assert_eq!(modes.len(), 6, "{modes:?}");
}

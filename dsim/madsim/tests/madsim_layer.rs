//! The madsim layer's tests: a seed replays to the same result (the hash of
//! the run), and swarms of 3- and 5-replica clusters with every fault kind
//! pass. madsim's own `Runtime::check_determinism` is not used: its two runs
//! sit on threads where tokio seeds the generator of `select!` from a
//! process-wide counter that madsim does not control, so it reports draws
//! that differ (measured: it failed on seeds of 0..10) where `run`, which
//! seeds that generator (lib.rs, `run_here`), replays exactly.
//!
//! With the feature `node-bugs` only the negative controls are compiled,
//! one per injected bug (`ack-before-sync`: the group commit acknowledges
//! before it writes and syncs; `drop-on-reconnect`;
//! `lost-redirect-route`), each run with `STUTTER_NODE_BUG` naming its bug
//! and a test-name filter, e.g. `STUTTER_NODE_BUG=ack-before-sync cargo
//! test --release --features node-bugs --test madsim_layer
//! ack_before_sync`; the three share one build.
//! Every run is judged for liveness too (the turmoil layer's
//! `check::liveness`).
//!
//! GC runs (the collector model of `[gc]` in virtual time, with and
//! without Blade) get a swarm and a replay test of their own.
//!
//! `cargo test --release` in dsim/madsim runs them; `SWARM_SEEDS=500`
//! widens the swarms (GC swarms: half of it per model and mode).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

/// Items for the correct node only: left out when the crate is built with
/// the injected node bugs, whose tests are the teeth below.
macro_rules! correct_node_only {
    ($($item:item)*) => {
        $(
            #[cfg(not(feature = "node-bugs"))]
            $item
        )*
    };
}

#[cfg(feature = "node-bugs")]
use stutter_replica::node_bug::require as require_bug;

correct_node_only! {
    use std::collections::BTreeSet;
}

use stutter_dsim_madsim::{run, Options};

correct_node_only! {
    /// `SWARM_SEEDS`, at least 100: fewer may miss a fault kind.
    fn seeds() -> u64 {
        std::env::var("SWARM_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(100).max(100)
    }
}

correct_node_only! {
    #[test]
    fn the_same_seed_gives_the_same_hash() {
        let opts = Options::default();
        let mut hashes = BTreeSet::new();
        for seed in 0..100 {
            let a = run(seed, &opts).unwrap_or_else(|e| panic!("seed {seed}: {e:#}"));
            let b = run(seed, &opts).unwrap_or_else(|e| panic!("seed {seed}: {e:#}"));
            assert_eq!(a.hash, b.hash, "seed {seed}: {:?} vs {:?}", a.faults, b.faults);
            assert_eq!(a.violations, b.violations);
            hashes.insert(a.hash);
        }
        // Different seeds differ (the hash sees the run).
        assert_eq!(hashes.len(), 100, "two seeds gave the same hash");
    }
}

correct_node_only! {
    fn swarm(opts: &Options) {
        let mut kinds = BTreeSet::new();
        let mut acknowledged = 0;
        for seed in 0..seeds() {
            let o = run(seed, opts).unwrap_or_else(|e| panic!("seed {seed}: {e:#}"));
            assert!(o.violations.is_empty(), "seed {seed}: {:?}\nfaults: {:?}", o.violations, o.faults);
            for f in &o.faults {
                kinds.insert(f.split_whitespace().nth(1).unwrap_or("").to_string());
            }
            acknowledged += o.acknowledged;
        }
        for k in ["pause", "kill", "power", "isolate", "clog", "cut", "loss", "slow"] {
            assert!(kinds.contains(k), "no {k} fault in the swarm: {kinds:?}");
        }
        assert!(acknowledged > 0, "nothing was acknowledged");
    }
}

correct_node_only! {
    #[test]
    fn a_swarm_of_three_replicas_with_every_fault_kind_passes() {
        swarm(&Options::default());
    }
}

correct_node_only! {
    #[test]
    fn a_swarm_of_five_replicas_with_every_fault_kind_passes() {
        swarm(&Options { replicas: 5, ..Options::default() });
    }
}

correct_node_only! {
    /// GC runs (`Options::gc`): each replica runs the collector model of its
    /// `[gc]` section in virtual time under tight memory (`GcMode::tight`),
    /// its pauses, assists and marking stop the whole node, and the plan's
    /// timer pauses become full collections asked of it. Per model, with and
    /// without GC coordination (Blade), `SWARM_SEEDS / 2` seeds each (50
    /// unless set: 200 runs, about 10 s in the debug profile); every run passes every check, collectors
    /// pause in most runs, and with Blade leaders hand off in most runs.
    #[test]
    fn gc_swarms_of_go_and_g1_with_and_without_blade_pass() {
        use stutter_dsim_madsim::cluster::GcMode;
        let per_mode = std::env::var("SWARM_SEEDS").ok().and_then(|s| s.parse::<u64>().ok()).map_or(50, |n| (n / 2).max(50));
        for model in ["go", "g1"] {
            for blade in [false, true] {
                // G1's eden is at least one region (1 MiB at these heaps),
                // more than a replica allocates in 150 operations per
                // client (at most 0.8 MiB): at 150, g1 replicas collected
                // only when a full collection was asked for (67 of 100
                // runs). At 300 its own young collections come in 100 of
                // 100, with and without Blade.
                let ops = if model == "g1" { 300 } else { Options::default().ops };
                let opts = Options { gc: Some(GcMode::tight(model, blade)), ops, ..Options::default() };
                let (mut paused, mut stopped, mut handed_off, mut granted, mut asked) = (0, 0, 0, 0, 0);
                for seed in 0..per_mode {
                    let o = run(seed, &opts).unwrap_or_else(|e| panic!("{model} blade {blade} seed {seed}: {e:#}"));
                    assert!(o.violations.is_empty(), "{model} blade {blade} seed {seed}: {:?}\nfaults: {:?}\ngc: {:?}", o.violations, o.faults, o.gc);
                    assert_eq!(o.gc.len(), opts.replicas);
                    // Each stop held the loop until its end (virtual time),
                    // and no node stood still longer than its collector owed.
                    for g in &o.gc {
                        assert_eq!(g.resumed_early, 0, "{model} blade {blade} seed {seed}: {g:?}");
                        assert!(g.stopped_us <= g.pause_us + g.assist_us + g.slowed_us + g.stops, "{model} blade {blade} seed {seed}: {g:?}");
                    }
                    paused += u64::from(o.gc.iter().any(|g| g.pauses > 0));
                    stopped += u64::from(o.gc.iter().any(|g| g.stops > 0 && g.stopped_us > 0));
                    handed_off += u64::from(o.gc.iter().any(|g| g.handoffs > 0));
                    granted += o.gc.iter().map(|g| g.granted).sum::<u64>();
                    asked += o.faults.iter().filter(|f| f.contains(" gc r")).count();
                    assert!(!o.faults.iter().any(|f| f.contains(" pause r")), "a timer pause in a GC run: {:?}", o.faults);
                }
                // Measured on seeds 0..500: pauses in 489 (go) runs
                // uncoordinated, 486 with Blade; hand-offs in 469 (go) with
                // Blade (docs/simulator-madsim.md). g1 at 300
                // operations, seeds 0..100: pauses in 100 runs with and
                // without Blade, hand-offs in 100 with Blade.
                assert!(paused * 10 >= per_mode * 8, "{model} blade {blade}: pauses in only {paused} of {per_mode} runs");
                assert!(asked > 0, "{model} blade {blade}: no full collection was asked for");
                // A Go-like cycle's pauses (20 µs) alone stay owed (below
                // madsim's 1 ms sleep); a full collection asked for stops.
                assert!(stopped > 0, "{model} blade {blade}: no node stood still");
                if blade {
                    assert!(handed_off * 10 >= per_mode * 8, "{model}: hand-offs in only {handed_off} of {per_mode} runs");
                    assert!(granted > 0, "{model}: no coordinated collection");
                } else {
                    assert_eq!((handed_off, granted), (0, 0), "{model}: hand-offs without coordination");
                }
            }
        }
    }
}

correct_node_only! {
    /// A GC run replays exactly: same hash (which folds in every replica's
    /// collector tally), same tallies, same verdict.
    #[test]
    fn a_gc_run_replays_to_the_same_hash() {
        use stutter_dsim_madsim::cluster::GcMode;
        for (model, blade) in [("go", false), ("go", true), ("g1", false), ("g1", true)] {
            let opts = Options { gc: Some(GcMode::tight(model, blade)), ..Options::default() };
            for seed in 0..10 {
                let a = run(seed, &opts).unwrap_or_else(|e| panic!("seed {seed}: {e:#}"));
                let b = run(seed, &opts).unwrap_or_else(|e| panic!("seed {seed}: {e:#}"));
                assert_eq!(a.hash, b.hash, "{model} blade {blade} seed {seed}: {:?} vs {:?}", a.gc, b.gc);
                assert_eq!((a.gc, a.violations), (b.gc, b.violations));
            }
        }
    }
}

correct_node_only! {
    /// The replicas never sync (`Options::no_fsync`): a kill is a crash of the
    /// node's machine on the simulated disk, which loses what was not synced,
    /// acknowledged or not.
    #[test]
    fn teeth_no_fsync_is_caught_by_the_simulated_disk() {
        // Measured: 33 of seeds 0..100 fail, the first at seed 3.
        let opts = Options { no_fsync: true, ..Options::default() };
        let caught = (0..10).find(|seed| run(*seed, &opts).map_or(true, |o| !o.violations.is_empty()));
        assert!(caught.is_some(), "no fsync survived 10 seeds");
    }
}

/// The group commit acknowledges before it syncs: the log buffers a
/// group's records in the process and writes and syncs them in one call
/// after the simulated sync time (10 ms, impl/replica/src/wal/mod.rs), so a
/// kill in that window takes acknowledged records away; a power loss of
/// the whole cluster loses them for good.
#[cfg(feature = "node-bugs")]
#[test]
fn teeth_ack_before_sync_is_caught() {
    require_bug(stutter_replica::node_bug::NodeBug::AckBeforeSync);
    // Measured: seeds 0..500 catch it 20 times, the first at seed 15.
    let opts = Options::default();
    let caught = (0..60).find(|seed| run(*seed, &opts).map_or(true, |o| !o.violations.is_empty()));
    assert!(caught.is_some(), "ack-before-sync survived 60 seeds");
}

/// A re-established peer link drops the first message of every batch
/// (impl/replica/src/node/peers.rs): no safety check fails; a replica
/// behind the near-silent link stays behind (convergence) and some calls
/// wait past the liveness bound. Measured: 38 of seeds 0..100 fail (all
/// by convergence, 3 also by the liveness judge), the first at seed 1.
#[cfg(feature = "node-bugs")]
#[test]
fn teeth_drop_on_reconnect_is_caught() {
    require_bug(stutter_replica::node_bug::NodeBug::DropOnReconnect);
    let opts = Options::default();
    let caught = (0..10).find(|seed| run(*seed, &opts).map_or(true, |o| !o.violations.is_empty()));
    assert!(caught.is_some(), "drop-on-reconnect survived 10 seeds");
}

/// A replica that redirected a client keeps no route for its later
/// requests (impl/replica/src/node/routes.rs): only the liveness judge
/// sees it. Measured: 27 of seeds 0..40 fail, every one by the judge
/// alone, the first at seed 2.
#[cfg(feature = "node-bugs")]
#[test]
fn teeth_lost_redirect_route_is_caught() {
    require_bug(stutter_replica::node_bug::NodeBug::LostRedirectRoute);
    let opts = Options::default();
    let caught = (0..20).find(|seed| {
        run(*seed, &opts).is_ok_and(|o| o.violations.iter().any(|v| v.starts_with("liveness:")))
    });
    assert!(caught.is_some(), "lost-redirect-route survived 20 seeds");
}

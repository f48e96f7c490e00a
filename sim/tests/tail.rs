//! `sim study split`: every measured operation lands in exactly one class,
//! the hand-offs of a coordinated run are found and timed, and a run
//! without coordination has none.

use stutter_sim::study::Setup;
use stutter_sim::tail::{split, CLASSES};

fn setup(model: &str, coordinated: bool) -> Setup {
    let (net_min_us, net_extra_us, disk_min_us, disk_max_us) = Setup::NET_DISK_DEFAULT;
    Setup {
        model: model.into(),
        ratio: 8.0,
        cores: 2,
        dataset: 64 << 20,
        duration: 2.5,
        warmup: 0.5,
        read_fraction: 0.5,
        coordinated,
        grace_ms: Setup::GRACE_MS,
        grant_after_grace: false,
        handoff_promise: false,
        eager_handoff: false,
        commit_on_accept: false,
        speed: 1.0,
        net_min_us,
        net_extra_us,
        disk_min_us,
        disk_max_us,
        disk_quantiles_us: Vec::new(),
        clients: 1024,
        runtime: Default::default(),
    }
}

#[test]
fn a_coordinated_run_splits_into_hand_offs_collections_and_the_rest() {
    let t = split(&setup("g1", true), 150_000.0, 1).expect("setup");
    assert_eq!(t.classes.len(), CLASSES.len());
    let total: usize = t.classes.iter().map(|c| c.ops).sum();
    // 2 measured seconds at 150 k ops/s, open loop.
    assert!(
        (280_000..=320_000).contains(&total),
        "{total} operations measured"
    );
    assert!(t.hand_offs > 0, "the leader handed off: {t:?}");
    assert!(t.transfer_ms > 0.0 && t.election_ms > 0.0, "{t:?}");
    let hand_off = &t.classes[0];
    assert!(hand_off.windows > 0 && hand_off.ops > 0, "{hand_off:?}");
    // An operation in flight through a hand-off waits for it.
    let none = t.classes.last().expect("none");
    assert!(
        hand_off.p50 > none.p50,
        "hand-off p50 {} vs the rest {}",
        hand_off.p50,
        none.p50
    );
    // The classes' worst is the run's, and the slowest 0.1 % are in some class.
    let worst = t.classes.iter().map(|c| c.max).fold(0.0, f64::max);
    assert_eq!(worst, t.max);
    let above: usize = t.classes.iter().map(|c| c.above_p999).sum();
    assert!(
        above >= total / 1000,
        "{above} of {total} at or above p99.9"
    );
}

#[test]
fn without_coordination_there_are_only_the_runtimes_pauses() {
    let t = split(&setup("g1", false), 150_000.0, 1).expect("setup");
    assert_eq!(t.hand_offs, 0);
    for c in &t.classes[..CLASSES.len() - 2] {
        assert_eq!((c.windows, c.ops), (0, 0), "{c:?}");
    }
    let pauses = &t.classes[CLASSES.len() - 2];
    assert!(pauses.windows > 0 && pauses.ops > 0, "{pauses:?}");
    assert!(pauses.max > t.classes[CLASSES.len() - 1].p99, "{t:?}");
}

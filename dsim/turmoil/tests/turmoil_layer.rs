//! The turmoil layer's tests: a seed replays to the same result, a swarm of
//! seeds with every fault kind passes, a swarm with corrupted reads and
//! damaged files ends in refusals, never in a panic or a violation, and
//! the injected node bugs (feature `node-bugs`, one test per bug, each
//! run with `STUTTER_NODE_BUG` naming its bug: `ack-before-sync`,
//! `accept-torn-tail`, `drop-on-reconnect`, `lost-redirect-route`) are
//! caught. Every run is also judged for
//! liveness (`check::liveness`: after the last fault healed, every
//! operation answered within 10 election timeouts).
//!
//! `cargo test --release` in dsim/turmoil runs them; `SWARM_SEEDS=500`
//! widens the swarm. A negative control, e.g.:
//! `STUTTER_NODE_BUG=ack-before-sync cargo test --features node-bugs --test
//! turmoil_layer ack_before_sync`; the four share one build.

use stutter_dsim_turmoil::{run, Options};

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
    /// `SWARM_SEEDS`, at least 20: fewer may miss a fault kind (a power loss
    /// is drawn for about one fault in ten).
    fn seeds() -> u64 {
        std::env::var("SWARM_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(20).max(20)
    }
}

/// Not in the `node-bugs` build, whose runs ./test filters to the teeth
/// (the liveness bugs' runs are long: every stalled call waits out the
/// client's 5 s deadline).
#[cfg(not(feature = "node-bugs"))]
#[test]
fn the_same_seed_gives_the_same_run() {
    let opts = Options::default();
    // Tasks spawned between two runs move tokio's process-wide task ids
    // (which once made seed 11 differ, lib.rs `task_ids`); the harness
    // aligns them, so the runs stay the same.
    let stray = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for seed in [3, 11] {
        let a = run(seed, &opts).unwrap();
        for _ in 0..seed % 4 {
            stray.block_on(async { tokio::spawn(async {}).await.unwrap() });
        }
        let b = run(seed, &opts).unwrap();
        assert_eq!(
            a.hash, b.hash,
            "seed {seed}: {:?} vs {:?}",
            a.faults, b.faults
        );
        assert_eq!(a.violations, b.violations);
    }
    // And different seeds differ (the hash sees the run).
    assert_ne!(run(3, &opts).unwrap().hash, run(4, &opts).unwrap().hash);
}

correct_node_only! {
    #[test]
    fn a_swarm_with_every_fault_kind_passes() {
        let opts = Options::default();
        let mut kinds = std::collections::BTreeSet::new();
        let mut acknowledged = 0;
        for seed in 0..seeds() {
            let o = run(seed, &opts).unwrap_or_else(|e| panic!("seed {seed}: {e:#}"));
            assert!(o.violations.is_empty(), "seed {seed}: {:?}\nfaults: {:?}", o.violations, o.faults);
            for f in &o.faults {
                kinds.insert(f.split_whitespace().nth(1).unwrap_or("").to_string());
            }
            acknowledged += o.acknowledged;
        }
        for k in ["partition", "hold", "isolate", "crash", "power"] {
            assert!(kinds.contains(k), "no {k} fault in the swarm: {kinds:?}");
        }
        assert!(acknowledged > 0, "nothing was acknowledged");
    }
}

/// The group commit acknowledges before it syncs: a crash (a power loss of
/// the cluster above all) takes acknowledged writes away.
#[cfg(feature = "node-bugs")]
#[test]
fn teeth_ack_before_sync_is_caught() {
    require_bug(stutter_replica::node_bug::NodeBug::AckBeforeSync);
    // Measured: seeds 0..100 catch it 6 times, the first at seed 18.
    let opts = Options::default();
    let caught = (0..30).find(|seed| run(*seed, &opts).map_or(true, |o| !o.violations.is_empty()));
    assert!(caught.is_some(), "ack-before-sync survived 30 seeds");
}

correct_node_only! {
    /// Regression: in these seeds a follower's sender blocked on a crashed
    /// leader's full socket and was never redialled, so the follower stayed
    /// behind (no convergence) until peer writes got a stall timeout
    /// (`WRITE_STALL` in impl/replica/src/node/peers.rs).
    #[test]
    fn a_sender_stalled_on_a_crashed_peer_is_redialled() {
        for seed in [15, 71, 99] {
            let o = run(seed, &Options::default()).unwrap();
            assert!(o.violations.is_empty(), "seed {seed}: {:?}", o.violations);
        }
    }
}

correct_node_only! {
    /// Regression (the liveness judge, issue 16): r0 crashed and came back
    /// while r1's writes to it were held; r1's sender stayed blocked on its
    /// connection to r0's previous incarnation for `WRITE_STALL` (10 s),
    /// while r0, which had re-dialled r1, waited for r1's replies and no
    /// leader could be elected: 8 calls waited past the judge's 3 s, the
    /// longest 5.1 s. A peer's re-dial now makes our link to it suspect
    /// (`SUSPECT_STALL` in impl/replica/src/node/peers.rs): longest wait
    /// after healing 40 ms.
    #[test]
    fn a_sender_blocked_on_a_restarted_peers_old_connection_redials() {
        let opts = Options { corruption: 0.01, damage: 0.2, ..Options::default() };
        let o = run(144, &opts).unwrap();
        assert_eq!(o.refused, vec![2], "seed 144 no longer meets its fault");
        assert!(o.violations.is_empty(), "seed 144: {:?}", o.violations);
    }
}

correct_node_only! {
    /// Issue 16: a corrupt record in the middle of the log is damage, not a
    /// torn tail. Reads here return a flipped byte one time in a hundred, and
    /// a restarting replica finds a byte of its files flipped for good one
    /// time in five. On main before the fix, 17 of seeds 0..100 at 1 %
    /// corruption alone ended in the core's invariant panic after recovery
    /// (seed 10: "slot 42 (last executed) is None in the log"; seed 16: "last
    /// executed 97 beyond the last index 96"): recovery had quietly dropped
    /// what it could not read. Now the log reads until two reads agree and a
    /// replica refuses to start on damage; refusing is allowed, a panic, a
    /// non-linearizable history, a lost acknowledged write or disagreeing
    /// digests are not. A majority refusing leaves the cluster unavailable,
    /// which is not a safety violation either.
    #[test]
    fn corrupted_reads_and_damaged_files_are_refused_never_voted_with() {
        let opts = Options { corruption: 0.01, damage: 0.2, ..Options::default() };
        let (mut refused, mut unavailable) = (0, 0);
        for seed in 0..CORRUPTION_SEEDS {
            let o = run(seed, &opts).unwrap_or_else(|e| panic!("seed {seed}: {e:#}"));
            assert!(o.violations.is_empty(), "seed {seed}: {:?}\nfaults: {:?}", o.violations, o.faults);
            refused += usize::from(!o.refused.is_empty());
            unavailable += usize::from(o.unavailable());
        }
        // Measured (seeds 0..100): 34 seeds with a replica refusing, 3 of
        // them with a majority refusing (unavailable).
        assert!(refused > 0, "no replica met damage in {CORRUPTION_SEEDS} seeds: the refusal path went untested");
        assert!(unavailable <= refused);
    }
}

correct_node_only! {
    const CORRUPTION_SEEDS: u64 = 100;
}

correct_node_only! {
    /// Found by validating the replicas' own traces against the spec: with
    /// `--damage 0.2`, a byte flipped for good in the last record of a segment
    /// passed for a torn tail and was cut off. At seeds 4 and 11 replica 1's
    /// only record, its synced promise, was damaged while it was down, and it
    /// came back with ballot 0 and voted again; at seed 51 the same happened
    /// to the leader's promise. The runs' own checks passed. The log's sync
    /// marks (impl/replica/src/wal/marks.rs) now tell such a record from a
    /// torn one: each of these replicas refuses to start.
    #[test]
    fn a_damaged_synced_last_record_is_refused_not_cut_off() {
        let opts = Options { corruption: 0.01, damage: 0.2, ..Options::default() };
        for (seed, refusing) in [(4, vec![1]), (11, vec![1]), (51, vec![0, 1, 2])] {
            let o = run(seed, &opts).unwrap_or_else(|e| panic!("seed {seed}: {e:#}"));
            assert!(o.violations.is_empty(), "seed {seed}: {:?}", o.violations);
            assert_eq!(o.refused, refusing, "seed {seed}: faults {:?}", o.faults);
        }
    }
}

/// Recovery replays records without checking their CRC. Torn writes
/// alone do not expose it (measured: seeds 0..100 with the default plan,
/// torn writes on 3 seeds in 4, all pass: a torn record's tail is zero
/// fill or stale bytes, which rarely decode, and stale records are below
/// the trim point). A byte flipped for good does, at `--damage 0.2`:
/// first measured as seeds 51 (not linearizable) and 64 (digests
/// disagree); since the session table's encoding changed (other bytes on
/// disk), seeds 0..120 give no violation, and seeds 71, 73, 76 and 116
/// end in an abort: bincode believes a damaged length and the allocation
/// fails, a replica crashing on a recoverable disk error, which the
/// correct node never does at those seeds (it refuses the damaged state).
/// So each seed runs in a process of its own (the layer's binary, its
/// address space capped at 4 GiB by `prlimit`), and a run that fails its
/// checks or dies is caught. Since clients register (`Op::Register`,
/// other bytes on disk again), seeds 0..80 pass with the bug; seed 114
/// (replicas did not converge: one executed a damaged record) and 151
/// (an abort) are caught, and the correct node refuses the damaged state
/// at both and passes. Hence 160 seeds.
#[cfg(feature = "node-bugs")]
#[test]
fn teeth_accept_torn_tail_is_caught() {
    require_bug(stutter_replica::node_bug::NodeBug::AcceptTornTail);
    let caught = (0..160).find(|seed| {
        let status = std::process::Command::new("prlimit")
            .args([
                "--as=4294967296",
                env!("CARGO_BIN_EXE_stutter-dsim-turmoil"),
                "run",
                "--seed",
                &seed.to_string(),
                "--damage",
                "0.2",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .expect("runs prlimit (util-linux)");
        !status.success()
    });
    assert!(caught.is_some(), "accept-torn-tail survived 160 seeds");
}

correct_node_only! {
    /// Five replicas: every fault kind, then corruption and damage, where a
    /// majority is three. Measured (release, seeds 0..500): 0 failing; with
    /// `--corruption 0.01 --damage 0.2`, seeds 0..200: 0 failing, 85 with a
    /// minority refusing, 5 unavailable. Seeds 133 and 142 (three of five
    /// refused) once failed: the two left had no quorum to converge with, and
    /// convergence is now required only while a majority runs. Since each
    /// request carries its retry flag (one byte more in every logged
    /// request), the damage lands elsewhere: seed 133 has two of five
    /// refusing, and 143 is the second seed with three (debug build, seeds
    /// 0..200: 7 unavailable — 12 20 97 142 143 150 163 — 0 failing).
    #[test]
    fn five_replicas_pass_with_faults_and_with_damage() {
        let opts = Options { replicas: 5, ..Options::default() };
        for seed in 0..60 {
            let o = run(seed, &opts).unwrap_or_else(|e| panic!("seed {seed}: {e:#}"));
            assert!(o.violations.is_empty(), "seed {seed}: {:?}\nfaults: {:?}", o.violations, o.faults);
        }
        // Regression: a power loss left r2's snapshot.bin ahead of its durable
        // log (written on its own, before the accepts of its batch were
        // synced); recovery refused it as damaged. It now trims the log to the
        // snapshot (`wal::settle`), and no replica refuses here.
        let o = run(1479, &Options { replicas: 5, text_clients: 2, ..Options::default() }).unwrap();
        assert!(o.refused.is_empty(), "seed 1479: {:?} refused", o.refused);
        assert!(o.violations.is_empty(), "seed 1479: {:?}", o.violations);
        let opts = Options { replicas: 5, corruption: 0.01, damage: 0.2, ..Options::default() };
        for seed in [142, 143] {
            let o = run(seed, &opts).unwrap_or_else(|e| panic!("seed {seed}: {e:#}"));
            assert!(o.unavailable(), "seed {seed}: three of five refused here: {:?}", o.refused);
            assert!(o.violations.is_empty(), "seed {seed}: {:?}\nfaults: {:?}", o.violations, o.faults);
        }
    }
}

correct_node_only! {
    /// Clients of the text protocol (docs/replica.md): the node's text parser
    /// and renderer, per-connection client ids, redirects by address; an
    /// unanswered request has an unknown outcome and is not sent again.
    /// Measured (release): 4 text clients, seeds 0..500, 0 failing; 2 text
    /// clients with 5 replicas, corruption and damage, seeds 0..100, 0 failing.
    #[test]
    fn text_protocol_clients_pass() {
        let opts = Options { text_clients: 4, ..Options::default() };
        let mut acknowledged = 0;
        for seed in 0..60 {
            let o = run(seed, &opts).unwrap_or_else(|e| panic!("seed {seed}: {e:#}"));
            assert!(o.violations.is_empty(), "seed {seed}: {:?}\nfaults: {:?}", o.violations, o.faults);
            acknowledged += o.acknowledged;
        }
        assert!(acknowledged > 60 * 300, "the text clients got few answers: {acknowledged}");
        let opts = Options { text_clients: 2, replicas: 5, corruption: 0.01, damage: 0.2, ..Options::default() };
        for seed in 0..20 {
            let o = run(seed, &opts).unwrap_or_else(|e| panic!("seed {seed}: {e:#}"));
            assert!(o.violations.is_empty(), "seed {seed}: {:?}\nfaults: {:?}", o.violations, o.faults);
        }
    }
}

/// A re-established peer link drops the first message of every batch to
/// that peer (impl/replica/src/node/peers.rs, `bug_drop_on_reconnect`).
/// Not a safety bug: Paxos tolerates lost messages, and the history stays
/// linearizable; what shows is a replica behind a near-silent link that
/// stays behind (convergence within 60 s of healing) and clients left
/// unanswered (the liveness judge). Measured: see docs/simulator-turmoil.md.
#[cfg(feature = "node-bugs")]
#[test]
fn teeth_drop_on_reconnect_is_caught() {
    require_bug(stutter_replica::node_bug::NodeBug::DropOnReconnect);
    let opts = Options::default();
    let caught = (0..DROP_ON_RECONNECT_SEEDS)
        .find(|seed| run(*seed, &opts).map_or(true, |o| !o.violations.is_empty()));
    assert!(
        caught.is_some(),
        "drop-on-reconnect survived {DROP_ON_RECONNECT_SEEDS} seeds"
    );
}

#[cfg(feature = "node-bugs")]
const DROP_ON_RECONNECT_SEEDS: u64 = 10;

/// A replica that redirected a client keeps no route for that client's
/// later requests (impl/replica/src/node/routes.rs,
/// `bug_lost_redirect_route`): once it leads, that client's requests are
/// executed and never answered. Every safety check passes (an unanswered
/// put has an unknown outcome; the replicas converge); only the liveness
/// judge sees it, so the test requires its verdict.
#[cfg(feature = "node-bugs")]
#[test]
fn teeth_lost_redirect_route_is_caught() {
    require_bug(stutter_replica::node_bug::NodeBug::LostRedirectRoute);
    let opts = Options::default();
    let caught = (0..LOST_REDIRECT_ROUTE_SEEDS).find(|seed| {
        run(*seed, &opts).is_ok_and(|o| o.violations.iter().any(|v| v.starts_with("liveness:")))
    });
    assert!(
        caught.is_some(),
        "lost-redirect-route survived {LOST_REDIRECT_ROUTE_SEEDS} seeds"
    );
}

#[cfg(feature = "node-bugs")]
const LOST_REDIRECT_ROUTE_SEEDS: u64 = 10;

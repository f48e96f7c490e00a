//! Collector constants measured on the real runtimes on a machine of this
//! kind, 2026-11-23 (`impl/gc/calibrate/run --repeat 2`; method, spread and
//! machine state in `docs/gc-calibration.md`; raw results in
//! `impl/gc/calibrate/results/gc-calibration-2026-11-23-full.json`).
//! CPU figures are OS CPU time (load-robust); pause figures are the CPU of
//! the parallel work, which the models divide over the cores.

use crate::Time;

/// Go 1.26, GOMAXPROCS=1: OS CPU of a whole forced cycle (mark and sweep)
/// per MiB of live heap, at 16, 64, 256 and 1024 MiB live (medians,
/// 2026-11-23) and 2048 MiB (median of 3, 2026-11-28, provisional: measured
/// with the machine's load average at 25-41, by
/// `impl/gc/calibrate/run --only go --tags mark-gib,goal-gib`; results in
/// `impl/gc/calibrate/results/gc-calibration-2026-11-28-full-go-mark-gib-goal-gib.*`).
pub const GO_MARK_US_PER_MIB: [(f64, f64); 5] = [
    (16.0, 210.0),
    (64.0, 359.0),
    (256.0, 689.0),
    (1024.0, 1272.0),
    (2048.0, 1659.0),
];
/// The same with the collector before Green Tea (`GOEXPERIMENT=nogreenteagc`,
/// the kind Go 1.19 had, which the seed paper ran), GOMAXPROCS=1; 2048 MiB
/// as above. Cheaper than Green Tea up to 1 GiB on this heap, dearer at 2.
pub const GO_MARK_CLASSIC_US_PER_MIB: [(f64, f64); 5] = [
    (16.0, 154.0),
    (64.0, 191.0),
    (256.0, 469.0),
    (1024.0, 1117.0),
    (2048.0, 2105.0),
];
/// Fixed marking per cycle: none measurable beside the per-MiB cost.
pub const GO_MARK_FIXED_US: f64 = 0.0;
/// Stop-the-world phases at GOMAXPROCS=1, medians (wall µs).
pub const GO_SWEEP_TERMINATION_US: Time = 16;
pub const GO_MARK_TERMINATION_US: Time = 4;
/// Heap at cycle start ÷ goal was 0.87–0.92 at 64 MiB and 0.85 at 256 MiB
/// with GOGC=100: a quarter of the runway left when a cycle starts.
pub const GO_TRIGGER_FRACTION: f64 = 0.75;
/// Heap goal ÷ GOMEMLIMIT, by the limit (MiB): 0.83–0.88 with 64 MiB live
/// (limits 80–128 MiB, 2026-11-23), 0.86–0.91 with 1 GiB live (limits
/// 1280–2048 MiB, 2026-11-28, provisional as above): the runtime's memory
/// that is not objects (stacks, metadata, free slots) weighs less in a
/// larger heap. Interpolated log-log, flat beyond the ends.
pub const GO_HEAP_SHARE_OF_LIMIT: [(f64, f64); 2] = [(100.0, 0.85), (1_500.0, 0.89)];
/// G1 (JDK 17), ParallelGCThreads=1, least squares over run windows
/// (R² 0.989): stop-the-world CPU per pause, per MiB copied, per MiB live
/// in a full collection.
pub const G1_YOUNG_FIXED_US: f64 = 1_270.0;
pub const G1_COPY_US_PER_MIB: f64 = 1_360.0;
pub const G1_FULL_FIXED_US: f64 = 1_270.0;
pub const G1_FULL_US_PER_MIB: f64 = 1_010.0;
/// Concurrent mark CPU per MiB of old live data (64–256 MiB live).
pub const G1_MARK_US_PER_MIB: f64 = 723.0;
/// Remark and cleanup pauses, medians (wall µs).
pub const G1_REMARK_US: Time = 2_300;
pub const G1_CLEANUP_US: Time = 120;
/// Concurrent refinement CPU per MiB allocated: median 156 [p10 6, p90
/// 653] over the steady runs (refinement threads' CPU ÷ MiB allocated).
pub const G1_REFINE_US_PER_MIB: f64 = 156.0;

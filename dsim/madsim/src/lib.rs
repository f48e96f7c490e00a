//! The madsim layer of stutter's deterministic simulation
//! (docs/simulator-madsim.md): three (or five) unchanged replicas
//! (node, write-ahead log, client protocols) and the real client library
//! run as madsim nodes on one thread, with madsim's simulated network,
//! clock and task scheduling. What this layer adds to the turmoil layer:
//! stop-the-world pauses of a whole node (`Handle::pause`: its tasks stop
//! while its timers and incoming messages pile up, as in a GC pause),
//! packet loss under TCP (retransmitted, so it is delay and reordering of
//! connection attempts), and a scheduler whose order of ready tasks is
//! drawn from the seed.
//!
//! The replicas' files are on the replica's own in-memory disk
//! (`impl/replica/src/platform/madsim_fs.rs`, the replica's `platform::fs` under the
//! `madsim` feature): a kill is a crash of the node's machine, which loses
//! what was not synced (bytes at `sync_all`/`sync_data`, names at the
//! directory's sync). madsim's own file system never loses unsynced data.
//!
//! The checkers are the turmoil layer's own (the crate `stutter-dsim-judge`,
//! dsim/judge): the same linearizability search, lost-write and digest
//! checks, and hash.
//!
//! `run(seed, &Options)` runs one seed and judges it; the same seed gives
//! the same [`Outcome::hash`], also inside a swarm.

pub mod cluster;
pub mod faults;
pub mod workload;

pub use stutter_dsim_judge::{check, history, node_traces};

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use madsim::runtime::{Handle, Runtime};
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::history::{Finals, History};
pub use stutter_replica::node::GcTally;

/// Simulated time after which a run is abandoned (a run that never ends).
pub const TIME_LIMIT: Duration = Duration::from_secs(900);

/// What a run does besides the seed.
#[derive(Clone, Debug)]
pub struct Options {
    /// Replicas in the cluster (3 or 5; any count from 2 runs).
    pub replicas: usize,
    /// Client nodes, each with one outstanding request at a time.
    pub clients: usize,
    /// Operations per client.
    pub ops: usize,
    /// Keys the operations spread over.
    pub keys: u64,
    /// Inject faults (pauses, kills, partitions, clogged links, loss).
    pub faults: bool,
    /// Negative control: the replicas never sync (`NodeOptions::
    /// unsafe_no_fsync`), so a kill loses acknowledged records on the
    /// simulated disk (a file system that kept unsynced data would hide it).
    pub no_fsync: bool,
    /// Write each replica's trace (`replica --trace`) to
    /// `trace-{i}.ndjson` in this directory of the real file system, for
    /// `spec/trace/merge.py` and `spec/validate` (pre-vote on, as in every
    /// run: the trace spec reads its steps).
    pub trace_dir: Option<PathBuf>,
    /// GC runs: every replica runs this collector model (`[gc]`), whose
    /// pauses, assists and marking stop it in virtual time; the plan's
    /// timer pauses become requests for a full collection instead
    /// (`gc r{i}`, the campaigns' SIGUSR1), every other fault stays.
    pub gc: Option<cluster::GcMode>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            replicas: cluster::DEFAULT_REPLICAS,
            clients: 4,
            ops: 150,
            keys: 5,
            faults: true,
            no_fsync: false,
            trace_dir: None,
            gc: None,
        }
    }
}

/// The result of one seed.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub seed: u64,
    /// Hash of everything the run observed: the history (operations,
    /// outcomes and simulated times), the faults applied and each
    /// replica's final status. Equal for two runs of the same seed.
    pub hash: u64,
    pub violations: Vec<String>,
    pub ops: usize,
    pub acknowledged: usize,
    pub faults: Vec<String>,
    pub sim_time: Duration,
    /// GC runs: what each replica's collector model did (all its
    /// incarnations), by replica.
    pub gc: Vec<GcTally>,
}

/// The network of a seed: latency 1 ms to 2-5 ms (drawn), no loss until
/// the fault plan adds some.
fn config(max_latency_ms: u64) -> madsim::Config {
    let mut c = madsim::Config::default();
    c.net.send_latency = Duration::from_millis(1)..Duration::from_millis(max_latency_ms.max(2));
    c
}

/// Runs seed `seed`. An `Err` is a run that could not finish (a panic of a
/// replica or of the harness, madsim's time limit): a failure as well.
///
/// Each run has an OS thread of its own, as madsim's `check_determinism`
/// gives each of its two runs: madsim makes std's hash keys follow the seed
/// only for the first runtime of a thread (later ones inherit the keys, and
/// the iteration order of madsim's own maps, from the runs before), and
/// tokio seeds the generator of `select!` once per thread, from a
/// process-wide counter. On a reused thread a seed replayed differently
/// (measured: seed 9, the second time), and on a fresh thread 4 seeds of
/// 0..60 run in one swarm differed from the same seeds run alone: each run
/// therefore also enters a tokio runtime seeded with the seed, which sets
/// that generator (tokio's `rng_seed`), and stays unconstrained by tokio's
/// cooperative budget (madsim polls everything inside one poll of it).
pub fn run(seed: u64, opts: &Options) -> anyhow::Result<Outcome> {
    let opts = opts.clone();
    let one = std::thread::Builder::new()
        .name(format!("seed-{seed}"))
        .spawn(move || run_here(seed, &opts))?;
    one.join()
        .map_err(|p| anyhow::anyhow!("seed {seed} panicked: {}", panic_message(&p)))?
}

fn run_here(seed: u64, opts: &Options) -> anyhow::Result<Outcome> {
    let plan = plan(seed, opts);
    let mut rt = Runtime::with_seed_and_config(seed, config(plan.max_latency_ms));
    rt.set_time_limit(TIME_LIMIT);
    let dir = DataDir::new()?;
    let opts = opts.clone();
    let path = dir.path().to_path_buf();
    let seeded = real_tokio::runtime::Builder::new_current_thread()
        .rng_seed(real_tokio::runtime::RngSeed::from_bytes(
            &seed.to_le_bytes(),
        ))
        .build()?;
    let out = seeded.block_on(real_tokio::task::unconstrained(async {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rt.block_on(simulate(seed, opts, plan, path))
        }))
    }));
    drop(rt);
    out.map_err(|p| anyhow::anyhow!("seed {seed} panicked: {}", panic_message(&p)))?
}

fn plan(seed: u64, opts: &Options) -> faults::Plan {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    if opts.faults {
        faults::Plan::draw(&mut rng, opts.replicas.max(2), opts.clients)
    } else {
        faults::Plan::none()
    }
}

/// One run inside the madsim runtime: the cluster, the clients and the
/// faults until the clients finish; then everything healed, the final
/// reads, and the verdict.
async fn simulate(
    seed: u64,
    opts: Options,
    plan: faults::Plan,
    dir: PathBuf,
) -> anyhow::Result<Outcome> {
    let handle = Handle::current();
    let replicas = opts.replicas.max(2);
    // The workload's draws come after the plan's, from the same seed.
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15);
    let cfg = cluster::config(replicas, opts.gc.as_ref())?;
    let nodes = cluster::start(
        &handle,
        &cfg,
        seed,
        &dir,
        opts.no_fsync,
        opts.trace_dir.as_deref(),
    )?;
    let replica_nodes = nodes.clone();
    let history: Arc<Mutex<History>> = Arc::default();
    let finals: Arc<Mutex<Finals>> = Arc::default();
    let (client_ids, clients) =
        workload::start(&handle, &cfg, &opts, rng.next_u64(), history.clone());
    let dirs = (0..replicas).map(|i| cluster::data_dir(&dir, i)).collect();
    let mut driver = faults::Driver::new(&plan, nodes, dirs, client_ids, opts.gc.is_some());
    while !clients.iter().all(|c| c.is_finished()) {
        driver.tick(&handle);
        madsim::time::sleep(faults::TICK).await;
    }
    driver.heal(&handle);
    let reader = workload::finish(&handle, &cfg, &opts, history.clone(), finals.clone());
    while !reader.is_finished() {
        // Only the supervisor runs now: a replica that stopped restarts.
        driver.supervise(&handle);
        madsim::time::sleep(faults::TICK).await;
    }
    let h = history.lock().unwrap_or_else(|p| p.into_inner());
    let f = finals.lock().unwrap_or_else(|p| p.into_inner());
    let mut violations = check::all(&h, &f);
    // The turmoil layer's liveness judge: after the last fault healed,
    // every call answered within 10 election timeouts.
    let bound = check::election_timeout() * check::LIVENESS_BOUND_ELECTION_TIMEOUTS;
    violations.extend(check::liveness(&h, driver.last_change, bound));
    let mut tally = stutter_replica::node::gc_tally();
    let gc: Vec<GcTally> = if opts.gc.is_some() {
        replica_nodes
            .iter()
            .map(|n| tally.remove(n).unwrap_or_default())
            .collect()
    } else {
        Vec::new()
    };
    let hash = gc_hash(check::hash(&h, &driver.applied, &f), &gc);
    Ok(Outcome {
        seed,
        hash,
        violations,
        ops: h.ops.len(),
        acknowledged: h.ops.iter().filter(|o| o.acknowledged()).count(),
        faults: driver.applied.clone(),
        sim_time: madsim::time::TimeHandle::current().elapsed(),
        gc,
    })
}

/// The run's hash with the collectors' tallies folded in (FNV-1a over
/// their counters): a replay must collect alike, too.
fn gc_hash(hash: u64, gc: &[GcTally]) -> u64 {
    let mut h = hash;
    for t in gc {
        for v in [
            t.starts,
            t.pauses,
            t.pause_us,
            t.max_pause_us,
            t.assist_us,
            t.slowed_us,
            t.due,
            t.granted,
            t.handoffs,
            t.requested,
            t.allocated,
            t.stops,
            t.stopped_us,
            t.resumed_early,
        ] {
            for b in v.to_le_bytes() {
                h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
    }
    h
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panic".into())
}

/// A directory of its own for one run's replica files on the simulated
/// disk (shared by the runs of the process), forgotten when the run ends.
struct DataDir(PathBuf);

impl DataDir {
    fn new() -> anyhow::Result<DataDir> {
        static RUNS: AtomicU64 = AtomicU64::new(0);
        let p = PathBuf::from(format!(
            "/madsim/run-{}",
            RUNS.fetch_add(1, Ordering::Relaxed)
        ));
        stutter_replica::platform::fs::create_dir_all(&p)?;
        Ok(DataDir(p))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for DataDir {
    fn drop(&mut self) {
        stutter_replica::platform::fs::forget(&self.0);
    }
}

//! `sim`: run, replay and swarm seeded simulations. See docs/simulator.md.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use stutter_core::Bug;
use stutter_sim::history::{self, Outcome};
use stutter_sim::scenario::Scenario;
use stutter_sim::world::RunOutput;

// A run allocates and frees a message, a request or a trace event per
// step: mimalloc does that in about half the instructions of glibc's
// malloc (docs/simulator.md, "Speed and CI"). Allocation addresses never
// reach the simulation, so runs stay the same.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    about = "Deterministic simulation of stutter's MultiPaxos core under faults and GC pauses"
)]
struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, ValueEnum)]
enum HistoryFormat {
    /// ndjson in the campaigns' format (checked by jepsen/cmd/check with Porcupine).
    Porcupine,
    /// Jepsen EDN with jepsen.independent tuples (for Knossos/Elle).
    Edn,
}

#[derive(Clone, Copy, ValueEnum, Debug)]
enum BugArg {
    SkipMerge,
    AcceptLowerBallot,
    ReplyBeforePersist,
    CommitWithoutMajority,
    FollowerCommitAnyBallot,
    LocalReads,
    SkipNoopFill,
    PromiseBeforePersist,
    WrongBallotReplay,
    ExecuteDuplicate,
    StaleSessionsOnInstall,
    FailedCasWrites,
    IgnoreRetryFlag,
    RegisteredNoExpiry,
    HandoffPromiseNotAdopted,
}

impl From<BugArg> for Bug {
    fn from(b: BugArg) -> Bug {
        match b {
            BugArg::SkipMerge => Bug::SkipMerge,
            BugArg::AcceptLowerBallot => Bug::AcceptLowerBallot,
            BugArg::ReplyBeforePersist => Bug::ReplyBeforePersist,
            BugArg::CommitWithoutMajority => Bug::CommitWithoutMajority,
            BugArg::FollowerCommitAnyBallot => Bug::FollowerCommitAnyBallot,
            BugArg::LocalReads => Bug::LocalReads,
            BugArg::SkipNoopFill => Bug::SkipNoopFill,
            BugArg::PromiseBeforePersist => Bug::PromiseBeforePersist,
            BugArg::WrongBallotReplay => Bug::WrongBallotReplay,
            BugArg::ExecuteDuplicate => Bug::ExecuteDuplicate,
            BugArg::StaleSessionsOnInstall => Bug::StaleSessionsOnInstall,
            BugArg::FailedCasWrites => Bug::FailedCasWrites,
            BugArg::IgnoreRetryFlag => Bug::IgnoreRetryFlag,
            BugArg::RegisteredNoExpiry => Bug::RegisteredNoExpiry,
            BugArg::HandoffPromiseNotAdopted => Bug::HandoffPromiseNotAdopted,
        }
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// Run one seed and print a summary.
    Run {
        #[arg(long)]
        seed: u64,
        /// A named scenario, optionally ending in `+legacy-clients`, or the
        /// name `swarm` printed for this seed (default: the one `swarm`
        /// derives from the seed).
        #[arg(long)]
        scenario: Option<String>,
        /// Write every trace event (ndjson) to this file.
        #[arg(long)]
        trace: Option<PathBuf>,
        /// Virtual seconds of client load.
        #[arg(long)]
        duration: Option<f64>,
        /// Offered client load, operations per virtual second.
        #[arg(long)]
        rate: Option<f64>,
        /// Validate the trace against the TLA+ spec with TLC (spec/validate);
        /// the trace goes to --trace, or to a temporary file.
        #[arg(long)]
        validate: bool,
        #[arg(long)]
        export_history: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = HistoryFormat::Porcupine)]
        format: HistoryFormat,
        /// Inject a known protocol bug (to see the checkers catch it).
        #[arg(long, value_enum)]
        bug: Option<BugArg>,
        /// Write the summary as JSON (with a latency CDF and a percentile table) to this file.
        #[arg(long)]
        summary_json: Option<PathBuf>,
        /// Turn on pre-vote and leader stickiness (Config::pre_vote; off
        /// by default in the simulator, docs/protocol.md).
        #[arg(long)]
        pre_vote: bool,
        /// Bound the session table (Config::session_limit; unbounded by
        /// default in the simulator): sessions are evicted and expire.
        #[arg(long)]
        session_limit: Option<usize>,
        /// Tombstones of evicted sessions kept (Config::session_tombstones).
        #[arg(long)]
        session_tombstones: Option<usize>,
        /// Clients (as `swarm --clients`, to replay a seed of a bounded swarm).
        #[arg(long)]
        clients: Option<usize>,
        /// The fast hand-off: Config::gc_handoff_promise, gc_handoff_eager
        /// and commit_on_accept.
        #[arg(long)]
        fast_handoff: bool,
        /// Config::gc_grant_after_grace (as `swarm --grant-after-grace`).
        #[arg(long)]
        grant_after_grace: bool,
        /// Legacy clients: unregistered ids below 2^63, tombstones and the
        /// retry flag, and the replicas serve them (by default clients
        /// register, Op::Register, and only registered ids are served).
        /// The same as the scenario suffix `+legacy-clients`.
        #[arg(long)]
        legacy_clients: bool,
    },
    /// Run one seed and print its full trace (ndjson) on stdout.
    Replay {
        #[arg(long)]
        seed: u64,
        #[arg(long)]
        scenario: Option<String>,
    },
    /// Run a range of seeds, each with the scenario derived from it.
    Swarm {
        /// `A..B` (B excluded).
        #[arg(long)]
        seeds: String,
        #[arg(long, value_enum)]
        bug: Option<BugArg>,
        /// Stop at the first failing seed.
        #[arg(long)]
        fail_fast: bool,
        /// Virtual seconds of client load per run.
        #[arg(long)]
        duration: Option<f64>,
        /// Threads, each running whole seeds (default: every core). The
        /// output is the same whatever the number.
        #[arg(long)]
        jobs: Option<usize>,
        /// Bound every seed's session table (Config::session_limit), with
        /// at least `--clients` clients, so that sessions expire.
        #[arg(long)]
        session_limit: Option<usize>,
        /// Tombstones of evicted sessions kept (Config::session_tombstones).
        #[arg(long)]
        session_tombstones: Option<usize>,
        /// Clients per seed (with --session-limit: more than the bound).
        #[arg(long)]
        clients: Option<usize>,
        /// The fast hand-off on every seed: Config::gc_handoff_promise,
        /// gc_handoff_eager and commit_on_accept (the last applies to
        /// every seed, coordinated or not).
        #[arg(long)]
        fast_handoff: bool,
        /// Config::gc_grant_after_grace on every seed.
        #[arg(long)]
        grant_after_grace: bool,
        /// Legacy clients on every seed (as `run --legacy-clients`); the
        /// scenario names printed end in `+legacy-clients`.
        #[arg(long)]
        legacy_clients: bool,
    },
    /// Runs per second of 10-virtual-second runs with load and GC pauses
    /// (legacy clients, so that the figures stay comparable).
    Bench {
        #[arg(long, default_value_t = 200)]
        runs: u64,
        /// Threads, each running whole seeds (default 1: the figure per core).
        #[arg(long, default_value_t = 1)]
        jobs: usize,
    },
    /// List the named scenarios.
    Scenarios,
    /// The GC study's measurements (docs/gc-study.md, scripts/gc-study).
    Study {
        #[command(subcommand)]
        what: StudyCmd,
    },
}

#[derive(Subcommand)]
enum StudyCmd {
    /// The highest offered rate whose p99 latency (from the intended
    /// start) stays under the SLO; one JSON line on stdout.
    Max {
        #[command(flatten)]
        setup: SetupArgs,
        #[arg(long, default_value_t = 20.0)]
        slo_ms: f64,
        /// First rate tried (ops/s); doubled until the SLO is missed.
        #[arg(long, default_value_t = 2_000.0)]
        start: f64,
        /// Relative precision of the bisection.
        #[arg(long, default_value_t = 0.03)]
        precision: f64,
        /// Runs (seeds) a rate gets before it counts as missing the SLO.
        #[arg(long, default_value_t = 1)]
        attempts: u64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// One offered rate: latency (from the intended start and from the
    /// send) and the busiest collector's CPU share over time; one JSON
    /// line on stdout.
    Run {
        #[command(flatten)]
        setup: SetupArgs,
        #[arg(long)]
        rate: f64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// One offered rate with coordination: the latency of the operations
    /// in flight during each hand-off, each collection and the rest
    /// (`stutter_sim::tail`); a table on stderr, one JSON line on stdout.
    Split {
        #[command(flatten)]
        setup: SetupArgs,
        #[arg(long)]
        rate: f64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

#[derive(clap::Args)]
struct SetupArgs {
    /// none (Rust, C++), go (Go-like) or g1 (Java's G1-like); with
    /// --profile, the profile's runtime's by default.
    #[arg(long)]
    model: Option<String>,
    /// An allocation profile (sim/profiles/NAME.toml, or a path): the
    /// replicas allocate, keep and spend per operation what it measured
    /// (docs/gc-models.md).
    #[arg(long)]
    profile: Option<String>,
    /// Keys in the data set (default: as many as --dataset-mib holds).
    #[arg(long, default_value_t = 0)]
    keys: u64,
    /// The Go-like model's marking cost: green-tea (Go 1.26) or classic
    /// (GOEXPERIMENT=nogreenteagc, the seed paper's Go).
    #[arg(long, default_value = "green-tea")]
    go_mark: String,
    /// The three replicas and the load generator share one host of this
    /// many cores (0: each replica has --cores of its own).
    #[arg(long, default_value_t = 0.0)]
    host_cores: f64,
    /// With --host-cores: the load generator's CPU µs per operation.
    #[arg(long, default_value_t = 0.0)]
    load_us_per_op: f64,
    /// Memory limit over data (GOMEMLIMIT or -Xmx over the data size).
    #[arg(long, default_value_t = 8.0)]
    ratio: f64,
    #[arg(long, default_value_t = 1)]
    cores: u32,
    /// Data each replica holds, MiB.
    #[arg(long, default_value_t = 64)]
    dataset_mib: u64,
    /// Virtual seconds of load per run, the first `warmup` not measured.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// YCSB workload: a (50 % reads) or b (95 % reads).
    #[arg(long, default_value = "a")]
    workload: String,
    /// GC coordination in the manner of Blade (docs/protocol.md).
    #[arg(long)]
    blade: bool,
    /// With --blade: the old leader's grace after a hand-off, ms, in which
    /// its clients are redirected before it collects.
    #[arg(long, default_value_t = stutter_sim::study::Setup::GRACE_MS)]
    grace_ms: f64,
    /// With --blade: a leader elected by a hand-off lets the old leader
    /// ask for its grant when its grace ends (Config::gc_grant_after_grace).
    #[arg(long)]
    grant_after_grace: bool,
    /// With --blade, the hand-off (docs/gc-study.md, "The fast
    /// hand-off"): `fast` (Config::gc_handoff_promise, gc_handoff_eager
    /// and commit_on_accept), `wait` (none: the target first accepts the
    /// slots in flight, then runs a full election), or a comma-separated
    /// list of `promise`, `eager` (with promise) and `commit`.
    #[arg(long, value_delimiter = ',', default_value = "fast")]
    handoff: Vec<String>,
    /// Share of a core each replica gets while it has work (1: cores of
    /// its own; docs/calibration.md).
    #[arg(long, default_value_t = 1.0)]
    speed: f64,
    /// One-way network delay: minimum and mean of the exponential part, µs.
    #[arg(long, default_value_t = stutter_sim::study::Setup::NET_DISK_DEFAULT.0)]
    net_min_us: u64,
    #[arg(long, default_value_t = stutter_sim::study::Setup::NET_DISK_DEFAULT.1)]
    net_extra_us: f64,
    /// Persist latency, uniform in [min, max] µs.
    #[arg(long, default_value_t = stutter_sim::study::Setup::NET_DISK_DEFAULT.2)]
    disk_min_us: u64,
    #[arg(long, default_value_t = stutter_sim::study::Setup::NET_DISK_DEFAULT.3)]
    disk_max_us: u64,
    /// Persist latency drawn from these quantiles (µs, at evenly spaced
    /// probabilities, comma separated) instead.
    #[arg(long, value_delimiter = ',')]
    disk_quantiles_us: Vec<u64>,
    /// Open-loop clients, each with one operation outstanding: enough that
    /// the replicas' CPU, not the clients, bounds the throughput.
    #[arg(long, default_value_t = 256)]
    clients: u32,
}

impl SetupArgs {
    fn setup(&self) -> Result<stutter_sim::study::Setup> {
        let read_fraction = match self.workload.as_str() {
            "a" => 0.5,
            "b" => 0.95,
            w => bail!("unknown workload {w}: a or b"),
        };
        if self.disk_quantiles_us.windows(2).any(|w| w[1] < w[0]) {
            bail!("--disk-quantiles-us must not decrease");
        }
        if self.clients == 0 {
            bail!("--clients must be at least 1");
        }
        if !(self.grace_ms >= 0.0 && self.grace_ms <= 10_000.0) {
            bail!("--grace-ms {} must be in [0, 10000]", self.grace_ms);
        }
        if !(self.speed > 0.0 && self.speed <= 100.0) {
            bail!("--speed {} must be in (0, 100]", self.speed);
        }
        let profile = match &self.profile {
            Some(name) => Some(stutter_sim::profile::Profile::load(
                name,
                &stutter_sim::profile::Profile::dir(),
            )?),
            None => None,
        };
        let model = match (&self.model, &profile) {
            (Some(m), _) => m.clone(),
            (None, Some(p)) => p.model().to_string(),
            (None, None) => "none".to_string(),
        };
        if !["none", "go", "g1"].contains(&model.as_str()) {
            bail!("unknown model {model}: none, go or g1");
        }
        if !["green-tea", "classic"].contains(&self.go_mark.as_str()) {
            bail!("unknown --go-mark {}: green-tea or classic", self.go_mark);
        }
        if !(self.host_cores >= 0.0 && self.host_cores <= 1024.0 && self.load_us_per_op >= 0.0) {
            bail!("--host-cores must be in [0, 1024] and --load-us-per-op >= 0");
        }
        let mut handoff: Vec<&str> = Vec::new();
        for h in &self.handoff {
            match h.as_str() {
                "fast" => handoff.extend(["promise", "eager", "commit"]),
                "wait" => {}
                "promise" | "eager" | "commit" => handoff.push(h.as_str()),
                other => bail!("unknown --handoff {other}: fast, wait, promise, eager or commit"),
            }
        }
        Ok(stutter_sim::study::Setup {
            model,
            ratio: self.ratio,
            cores: self.cores,
            dataset: self.dataset_mib << 20,
            duration: self.duration,
            warmup: self.warmup,
            read_fraction,
            coordinated: self.blade,
            grace_ms: self.grace_ms,
            grant_after_grace: self.grant_after_grace,
            handoff_promise: handoff.contains(&"promise"),
            eager_handoff: handoff.contains(&"eager"),
            commit_on_accept: handoff.contains(&"commit"),
            speed: self.speed,
            net_min_us: self.net_min_us,
            net_extra_us: self.net_extra_us,
            disk_min_us: self.disk_min_us,
            disk_max_us: self.disk_max_us,
            disk_quantiles_us: self.disk_quantiles_us.clone(),
            clients: self.clients,
            runtime: stutter_sim::study::Runtime {
                profile,
                keys: self.keys,
                go_mark: self.go_mark.clone(),
                host_cores: self.host_cores,
                load_us_per_op: self.load_us_per_op,
            },
        })
    }
}

fn scenario(name: &Option<String>, seed: u64) -> Result<Scenario> {
    match name {
        None => Ok(Scenario::from_seed(seed)),
        Some(n) => Scenario::parse(n, seed).with_context(|| {
            format!("unknown scenario {n} for seed {seed}; try `sim scenarios` (a name may end in +legacy-clients; `swarm` is the seed's swarm scenario)")
        }),
    }
}

fn summary(seed: u64, s: &Scenario, out: &RunOutput, wall: f64) {
    let ok = out.history.iter().filter(|o| o.is_ok()).count();
    let fail = out
        .history
        .iter()
        .filter(|o| matches!(o.outcome, Outcome::Fail(_)))
        .count();
    let info = out
        .history
        .iter()
        .filter(|o| o.outcome == Outcome::Pending)
        .count();
    let expired = out
        .history
        .iter()
        .filter(|o| matches!(o.outcome, Outcome::Unknown(_)))
        .count();
    let mut lat = out.latencies.clone();
    lat.sort_unstable();
    let ms = |q| stutter_sim::percentile(&lat, q) as f64 / 1000.0;
    println!("seed {seed}  scenario {}", s.name);
    println!(
        "  ops       {} ok, {} fail, {} info, {} session expired ({} invoked)",
        ok,
        fail,
        info,
        expired,
        out.history.len()
    );
    println!(
        "  latency   p50 {:.2} ms  p99 {:.2} ms  p99.9 {:.2} ms  max {:.2} ms (virtual, from intended start)",
        ms(0.5),
        ms(0.99),
        ms(0.999),
        lat.last().copied().unwrap_or(0) as f64 / 1000.0
    );
    let f = &out.faults;
    let windows = if f.windows > 0 {
        format!(" ({} of them aimed at windows)", f.windows)
    } else {
        String::new()
    };
    println!(
        "  faults    {} pauses ({} ms stopped), {} crashes, {} partitions, {} messages dropped, {} duplicated{windows}",
        f.pauses, f.pause_ms_total, f.crashes, f.partitions, f.dropped_messages, f.duplicated_messages
    );
    for (r, g) in &out.gc {
        println!(
            "  gc        replica {r} ({}): {} cycles, {} pauses (max {:.2} ms, {:.0} ms in all), collector CPU {:.1} % of {} core(s), active {:.0} % of the time, {} MiB allocated",
            s.memory.gc.name(),
            g.cycles,
            g.pause_count(),
            g.max_pause() as f64 / 1000.0,
            g.pause_us / 1000.0,
            100.0 * g.cpu_share(s.cores as f64),
            s.cores,
            100.0 * g.active_share(),
            g.allocated >> 20
        );
    }
    println!(
        "  leaders   {} elections won ({} leader changes after the first), pre-vote {}",
        out.elections,
        out.elections.saturating_sub(1),
        if s.pre_vote { "on" } else { "off" }
    );
    println!(
        "  executed  last slot per replica {:?}",
        out.final_last_executed
    );
    println!(
        "  trace     hash {:016x}, {} simulator events, {:.1} virtual s in {:.3} s",
        out.trace_hash,
        out.events,
        out.end as f64 / 1e6,
        wall
    );
    if out.violations.is_empty() {
        println!("  checks    ok: agreement, prefixes, ballots, linearizability, lost writes, sessions, liveness, convergence");
    } else {
        for v in &out.violations {
            println!("  VIOLATION {}: {}", v.check, v.detail);
        }
    }
}

fn summary_value(seed: u64, s: &Scenario, out: &RunOutput) -> serde_json::Value {
    let mut lat = out.latencies.clone();
    lat.sort_unstable();
    let qs = [
        0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9999, 1.0,
    ];
    let cdf: Vec<(f64, f64)> = qs
        .iter()
        .map(|q| (*q, stutter_sim::percentile(&lat, *q) as f64 / 1000.0))
        .collect();
    serde_json::json!({
        "seed": seed,
        "scenario": s.name,
        "pause_profile": s.pauses.name,
        "ok": out.history.iter().filter(|o| o.is_ok()).count(),
        "fail": out.history.iter().filter(|o| matches!(o.outcome, Outcome::Fail(_))).count(),
        "info": out.history.iter().filter(|o| o.outcome == Outcome::Pending).count(),
        "session_expired": out.history.iter().filter(|o| matches!(o.outcome, Outcome::Unknown(_))).count(),
        "latency_cdf_ms": cdf,
        "latency_percentiles_ms": stutter_sim::percentiles::Percentiles::of_sorted_us_as_ms(&lat),
        "faults": out.faults,
        "elections": out.elections,
        "pre_vote": s.pre_vote,
        "trace_hash": format!("{:016x}", out.trace_hash),
        "violations": out.violations,
    })
}

/// Runs `spec/validate` on a trace: Ok(true) accepted, Ok(false) rejected.
fn validate_trace(trace: &std::path::Path) -> Result<bool> {
    let script = std::env::var_os("STUTTER_VALIDATE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../spec/validate"));
    let status = std::process::Command::new(&script)
        .arg(trace)
        .status()
        .with_context(|| {
            format!(
                "run {} (set STUTTER_VALIDATE to its path)",
                script.display()
            )
        })?;
    match status.code() {
        Some(0) => Ok(true),
        Some(1) => Ok(false),
        _ => bail!(
            "{} failed on {}: {status}",
            script.display(),
            trace.display()
        ),
    }
}

fn study(what: StudyCmd) -> Result<()> {
    use stutter_sim::study;
    match what {
        StudyCmd::Max {
            setup,
            slo_ms,
            start,
            precision,
            attempts,
            seed,
        } => {
            let setup = setup.setup()?;
            let t = Instant::now();
            let found = study::max_rate(&setup, slo_ms, start, precision, attempts, seed)
                .context("study setup")?;
            if let Some(p) = found.probes.iter().find(|p| !p.safety.is_empty()) {
                bail!(
                    "a study run broke safety at {} ops/s: {:?}",
                    p.rate,
                    p.safety
                );
            }
            eprintln!(
                "{} ratio {} cores {}: max {:.0} ops/s at p99 <= {slo_ms} ms ({} runs, {:.1} s)",
                setup.model,
                setup.ratio,
                setup.cores,
                found.max_rate,
                found.probes.len(),
                t.elapsed().as_secs_f64()
            );
            println!("{}", serde_json::to_string(&found)?);
        }
        StudyCmd::Run { setup, rate, seed } => {
            let setup = setup.setup()?;
            let (p, tl) = study::probe_and_timeline(&setup, rate, seed).context("study setup")?;
            if !p.safety.is_empty() {
                bail!("the run broke safety: {:?}", p.safety);
            }
            eprintln!(
                "{}{} ratio {} cores {} at {rate} ops/s: p99 {:.2} ms (from send {:.2} ms), max {:.2} ms, collector CPU {:.1} %, active {:.0} %, {} pauses, max pause {:.2} ms",
                setup.model,
                if setup.coordinated { "+blade" } else { "" },
                setup.ratio,
                setup.cores,
                p.p99,
                p.p99_from_send,
                p.max,
                100.0 * p.gc_share,
                100.0 * p.gc_active,
                p.gc_pauses,
                p.gc_max_pause_ms
            );
            println!("{}", serde_json::json!({ "probe": p, "timeline": tl }));
        }
        StudyCmd::Split { setup, rate, seed } => {
            let setup = setup.setup()?;
            let t = stutter_sim::tail::split(&setup, rate, seed).context("study setup")?;
            eprintln!(
                "{}{} at {rate} ops/s: p99 {:.2} / p99.9 {:.2} / p99.99 {:.2} / max {:.2} ms, {} hand-offs (transfer {:.2} + election {:.2} ms)",
                setup.model,
                if setup.coordinated { "+blade" } else { "" },
                t.p99,
                t.p999,
                t.p9999,
                t.max,
                t.hand_offs,
                t.transfer_ms,
                t.election_ms
            );
            eprintln!(
                "{:<22} {:>7} {:>9} {:>8} {:>7} {:>7} {:>7} {:>7} {:>6} {:>7}",
                "class",
                "windows",
                "mean ms",
                "ops",
                "p50",
                "p99",
                "p99.9",
                "max",
                ">p99.9",
                ">p99.99"
            );
            for c in &t.classes {
                eprintln!(
                    "{:<22} {:>7} {:>9.1} {:>8} {:>7.2} {:>7.2} {:>7.2} {:>7.2} {:>6} {:>7}",
                    c.name,
                    c.windows,
                    c.mean_window_ms,
                    c.ops,
                    c.p50,
                    c.p99,
                    c.p999,
                    c.max,
                    c.above_p999,
                    c.above_p9999
                );
            }
            println!("{}", serde_json::to_string(&t)?);
        }
    }
    Ok(())
}

fn parse_range(s: &str) -> Result<(u64, u64)> {
    let (a, b) = s.split_once("..").context("seeds must be A..B")?;
    Ok((a.trim().parse()?, b.trim().parse()?))
}

fn main() -> Result<()> {
    let args = Args::parse();
    match args.cmd {
        Cmd::Run {
            seed,
            scenario: name,
            trace,
            duration,
            rate,
            validate,
            export_history,
            format,
            bug,
            summary_json,
            pre_vote,
            session_limit,
            session_tombstones,
            clients,
            fast_handoff,
            grant_after_grace,
            legacy_clients,
        } => {
            let mut s = scenario(&name, seed)?;
            s.gc_grant_after_grace |= grant_after_grace;
            s.pre_vote |= pre_vote;
            if legacy_clients {
                s.set_legacy_clients();
            }
            if fast_handoff {
                s.gc_handoff_promise = true;
                s.gc_handoff_eager = true;
                s.commit_on_accept = true;
            }
            if let Some(c) = clients {
                s.workload.clients = c.max(1);
            }
            if let Some(l) = session_limit {
                s.session_limit = l.max(1);
            }
            if let Some(t) = session_tombstones {
                s.session_tombstones = t;
            }
            if let Some(d) = duration {
                s.duration = (d * 1e6) as u64;
            }
            if let Some(r) = rate {
                s.workload.rate = r;
            }
            let tmp_trace =
                std::env::temp_dir().join(format!("sim-{seed}-{}.ndjson", std::process::id()));
            let trace = match (trace, validate) {
                (None, true) => Some(tmp_trace.clone()),
                (t, _) => t,
            };
            s.bug = bug.map(Bug::from);
            let t = Instant::now();
            let out = match &trace {
                Some(p) => {
                    let f = std::fs::File::create(p)
                        .with_context(|| format!("create {}", p.display()))?;
                    stutter_sim::run_traced(s.clone(), seed, Box::new(std::io::BufWriter::new(f)))
                }
                None => stutter_sim::run(s.clone(), seed),
            };
            summary(seed, &s, &out, t.elapsed().as_secs_f64());
            if let Some(p) = export_history {
                let mut f = std::io::BufWriter::new(std::fs::File::create(&p)?);
                match format {
                    HistoryFormat::Porcupine => history::write_ndjson(&mut f, &out.history)?,
                    HistoryFormat::Edn => history::write_edn(&mut f, &out.history)?,
                }
                f.flush()?;
            }
            if let Some(p) = summary_json {
                std::fs::write(
                    &p,
                    serde_json::to_vec_pretty(&summary_value(seed, &s, &out))?,
                )?;
            }
            let verdict = match (&trace, validate) {
                (Some(p), true) => Some(validate_trace(p)?),
                _ => None,
            };
            let _ = std::fs::remove_file(&tmp_trace);
            if !out.violations.is_empty() {
                bail!("seed {seed}: {} violation(s)", out.violations.len());
            }
            if verdict == Some(false) {
                bail!("seed {seed}: the trace does not conform to the spec");
            }
        }
        Cmd::Replay {
            seed,
            scenario: name,
        } => {
            let s = scenario(&name, seed)?;
            let out = stutter_sim::run_traced(
                s,
                seed,
                Box::new(std::io::BufWriter::new(std::io::stdout())),
            );
            eprintln!(
                "trace hash {:016x}, {} violation(s)",
                out.trace_hash,
                out.violations.len()
            );
        }
        Cmd::Swarm {
            seeds,
            bug,
            fail_fast,
            duration,
            jobs,
            session_limit,
            session_tombstones,
            clients,
            fast_handoff,
            grant_after_grace,
            legacy_clients,
        } => {
            let (a, b) = parse_range(&seeds)?;
            let jobs = jobs
                .unwrap_or_else(stutter_sim::parallel::default_jobs)
                .max(1);
            let t = Instant::now();
            let mut failing = Vec::new();
            let run = |seed: u64| {
                let mut s = Scenario::from_seed(seed);
                s.bug = bug.map(Bug::from);
                if let Some(l) = session_limit {
                    s.session_limit = l.max(1);
                    s.name += &format!("+sessions{l}");
                }
                if let Some(t) = session_tombstones {
                    s.session_tombstones = t;
                }
                if let Some(c) = clients {
                    s.workload.clients = c.max(1);
                }
                if let Some(d) = duration {
                    s.duration = (d * 1e6) as u64;
                }
                if fast_handoff {
                    s.gc_handoff_promise = true;
                    s.gc_handoff_eager = true;
                    s.commit_on_accept = true;
                    s.name += "+fast-handoff";
                }
                if grant_after_grace {
                    s.gc_grant_after_grace = true;
                    s.name += "+grant-after-grace";
                }
                if legacy_clients {
                    s.set_legacy_clients();
                }
                let out = stutter_sim::run(s.clone(), seed);
                out.violations
                    .first()
                    .map(|v| format!("{} ({}): {} — {}", seed, s.name, v.check, v.detail))
            };
            let runs = stutter_sim::parallel::in_order(a, b, jobs, run, |seed, fail| {
                let Some(line) = fail else { return true };
                println!("FAIL seed {line}");
                failing.push(seed);
                !fail_fast
            });
            let secs = t.elapsed().as_secs_f64();
            let rate = runs as f64 / secs.max(1e-9);
            println!(
                "swarm {a}..{b}: {runs} runs, {} failing, {rate:.1} runs/s = {:.0} runs/min on {jobs} thread(s)",
                failing.len(),
                rate * 60.0
            );
            if !failing.is_empty() {
                println!("failing seeds: {failing:?}");
                bail!("{} failing seed(s)", failing.len());
            }
        }
        Cmd::Bench { runs, jobs } => {
            // Legacy clients, as every figure of this bench before
            // registration became the default (docs/simulator.md, "Speed
            // and CI"): the series stays comparable.
            let s = Scenario::parse("gc-memory-pressure+legacy-clients", 0).context("preset")?;
            let t = Instant::now();
            let mut events = 0;
            stutter_sim::parallel::in_order(
                0,
                runs,
                jobs,
                |seed| stutter_sim::run(s.clone(), seed).events,
                |_, e| {
                    events += e;
                    true
                },
            );
            let secs = t.elapsed().as_secs_f64();
            println!(
                "{runs} runs of 10 virtual s (3 replicas, 2000 ops/s, memory-pressure GC pauses, legacy clients) on {jobs} thread(s) in {secs:.2} s: {:.1} runs/s = {:.0} runs/min, {:.0} events/s",
                runs as f64 / secs,
                runs as f64 / secs * 60.0,
                events as f64 / secs
            );
        }
        Cmd::Study { what } => study(what)?,
        Cmd::Scenarios => {
            for n in Scenario::names() {
                println!("{n}");
            }
        }
    }
    Ok(())
}

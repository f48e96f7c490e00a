//! `sim study`: the GC study's measurements (docs/gc-study-simulated.md,
//! scripts/gc-study), each printed as one JSON line.

use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Subcommand;

#[derive(Subcommand)]
pub enum StudyCmd {
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
pub struct SetupArgs {
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
    /// GC coordination in the manner of Blade (docs/protocol-gc-coordination.md).
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
    /// With --blade, the hand-off (docs/gc-study-blade.md, "The fast
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

pub fn study(what: StudyCmd) -> Result<()> {
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

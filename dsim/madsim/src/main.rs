//! `stutter-dsim-madsim`: runs seeds of the madsim layer.
//!
//! ```text
//! stutter-dsim-madsim run --seed 7             # one seed, its verdict and hash
//! stutter-dsim-madsim run --seed 7 --log       # the same run with the replicas' logs
//! stutter-dsim-madsim swarm --seeds 0..500
//! stutter-dsim-madsim swarm --seeds 0..100 --replicas 5
//! stutter-dsim-madsim swarm --seeds 0..250 --gc g1 --memory-ratio 1.25 --blade
//! ```

use std::ops::Range;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use stutter_dsim_madsim::cluster::GcMode;
use stutter_dsim_madsim::{run, Options, Outcome};

#[derive(Parser)]
struct Args {
    #[command(subcommand)]
    cmd: Cmd,
    /// Replicas in the cluster.
    #[arg(long, default_value_t = stutter_dsim_madsim::cluster::DEFAULT_REPLICAS, global = true)]
    replicas: usize,
    /// Client nodes.
    #[arg(long, default_value_t = 4, global = true)]
    clients: usize,
    /// Operations per client.
    #[arg(long, default_value_t = 150, global = true)]
    ops: usize,
    /// No faults (a baseline).
    #[arg(long, global = true)]
    no_faults: bool,
    /// Negative control: the replicas never sync their log.
    #[arg(long, global = true)]
    unsafe_no_fsync: bool,
    /// GC runs: every replica runs this collector model (go or g1) in
    /// virtual time; the plan's timer pauses become full collections
    /// asked of it.
    #[arg(long, global = true, value_parser = ["go", "g1"])]
    gc: Option<String>,
    /// GC runs: the memory limit (GOMEMLIMIT, -Xmx) over the data set
    /// (default: go 1.19, g1 1.15; `GcMode::tight`).
    #[arg(long, global = true)]
    memory_ratio: Option<f64>,
    /// GC runs: the data set each modelled heap holds, MiB (default: go
    /// 64, g1 8).
    #[arg(long, global = true)]
    dataset_mib: Option<u64>,
    /// GC runs: GC coordination (Blade) on.
    #[arg(long, global = true)]
    blade: bool,
}

#[derive(Subcommand)]
enum Cmd {
    /// Runs one seed; exit status 1 if it fails.
    Run {
        #[arg(long)]
        seed: u64,
        /// Print the logs (RUST_LOG filters them; default info).
        #[arg(long)]
        log: bool,
        /// Write the replicas' traces to DIR/trace-{i}.ndjson (pre-vote
        /// off), to merge with spec/trace/merge.py and validate with
        /// spec/validate.
        #[arg(long)]
        trace_dir: Option<std::path::PathBuf>,
    },
    /// Runs the seeds `A..B`; prints each failing seed.
    Swarm {
        #[arg(long, default_value = "0..100", value_parser = parse_range)]
        seeds: Range<u64>,
        /// Print every seed's hash (to compare with `run --seed`).
        #[arg(long)]
        hashes: bool,
    },
}

fn parse_range(s: &str) -> Result<Range<u64>> {
    let (a, b) = s.split_once("..").context("expected A..B")?;
    Ok(a.parse()?..b.parse()?)
}

fn print(o: &Outcome) {
    for f in &o.faults {
        println!("fault {f}");
    }
    println!(
        "seed {} ops {} acknowledged {} sim {:.1}s hash {:016x} violations {}",
        o.seed,
        o.ops,
        o.acknowledged,
        o.sim_time.as_secs_f64(),
        o.hash,
        o.violations.len()
    );
    for (i, g) in o.gc.iter().enumerate() {
        println!(
            "gc r{i}: {} pauses ({:.1} ms, longest {:.1} ms), assists {:.1} ms, marking slowed {:.1} ms, {} due, {} granted, {} hand-offs, {} asked, {:.2} MiB allocated, stopped {} times for {:.1} ms",
            g.pauses,
            g.pause_us as f64 / 1e3,
            g.max_pause_us as f64 / 1e3,
            g.assist_us as f64 / 1e3,
            g.slowed_us as f64 / 1e3,
            g.due,
            g.granted,
            g.handoffs,
            g.requested,
            g.allocated as f64 / (1u64 << 20) as f64,
            g.stops,
            g.stopped_us as f64 / 1e3
        );
    }
    for v in &o.violations {
        println!("VIOLATION {v}");
    }
}

/// Per-run collector counts of a GC swarm.
#[derive(Default)]
struct GcSummary {
    runs: u64,
    pauses: Vec<u64>,
    handoffs: Vec<u64>,
    granted: u64,
    longest_us: u64,
}

impl GcSummary {
    fn add(&mut self, o: &Outcome) {
        if o.gc.is_empty() {
            return;
        }
        self.runs += 1;
        self.pauses.push(o.gc.iter().map(|g| g.pauses).sum());
        self.handoffs.push(o.gc.iter().map(|g| g.handoffs).sum());
        self.granted += o.gc.iter().map(|g| g.granted).sum::<u64>();
        self.longest_us = self
            .longest_us
            .max(o.gc.iter().map(|g| g.max_pause_us).max().unwrap_or(0));
    }

    fn line(&self) -> Option<String> {
        if self.runs == 0 {
            return None;
        }
        let stats = |v: &[u64]| {
            let mut v = v.to_vec();
            v.sort_unstable();
            let with = v.iter().filter(|x| **x > 0).count();
            format!(
                "{with} runs with any, per run min {} median {} max {}",
                v[0],
                v[v.len() / 2],
                v[v.len() - 1]
            )
        };
        Some(format!(
            "gc: pauses {}; hand-offs {}; {} coordinated collections; longest pause {:.1} ms",
            stats(&self.pauses),
            stats(&self.handoffs),
            self.granted,
            self.longest_us as f64 / 1e3
        ))
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    if !(2..=9).contains(&args.replicas) {
        anyhow::bail!("--replicas {} must be from 2 to 9", args.replicas);
    }
    let gc = args.gc.as_deref().map(|model| {
        let tight = GcMode::tight(model, args.blade);
        GcMode {
            memory_ratio: args.memory_ratio.unwrap_or(tight.memory_ratio),
            dataset_mib: args.dataset_mib.unwrap_or(tight.dataset_mib),
            ..tight
        }
    });
    if let Some(g) = &gc {
        if !(g.memory_ratio > 1.0 && g.memory_ratio <= 64.0) || g.dataset_mib == 0 {
            anyhow::bail!("--memory-ratio must be in (1, 64] and --dataset-mib positive");
        }
    }
    let opts = Options {
        replicas: args.replicas,
        clients: args.clients,
        ops: args.ops,
        faults: !args.no_faults,
        no_fsync: args.unsafe_no_fsync,
        gc,
        ..Options::default()
    };
    match args.cmd {
        Cmd::Run {
            seed,
            log,
            trace_dir,
        } => {
            if log {
                let filter = tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| "info".into());
                tracing_subscriber::fmt()
                    .with_env_filter(filter)
                    .with_writer(std::io::stderr)
                    .with_ansi(false)
                    .init();
            }
            if let Some(d) = &trace_dir {
                std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
            }
            let o = run(
                seed,
                &Options {
                    trace_dir: trace_dir.clone(),
                    ..opts
                },
            )?;
            if let Some(d) = &trace_dir {
                stutter_dsim_madsim::node_traces::join(d, args.replicas)?;
            }
            print(&o);
            if !o.violations.is_empty() {
                std::process::exit(1);
            }
        }
        Cmd::Swarm { seeds, hashes } => {
            let started = Instant::now();
            let count = seeds.end.saturating_sub(seeds.start);
            let mut failed = Vec::new();
            let mut gc = GcSummary::default();
            for seed in seeds {
                let r = run(seed, &opts);
                if let Ok(o) = &r {
                    gc.add(o);
                }
                if let (true, Ok(o)) = (hashes, &r) {
                    println!("seed {seed} hash {:016x}", o.hash);
                }
                match r {
                    Ok(o) if o.violations.is_empty() => {}
                    Ok(o) => {
                        println!("seed {seed} FAILED: {}", o.violations.join("; "));
                        failed.push(seed);
                    }
                    Err(e) => {
                        println!("seed {seed} ERROR: {e:#}");
                        failed.push(seed);
                    }
                }
            }
            let secs = started.elapsed().as_secs_f64();
            println!(
                "{count} seeds, {} failed {failed:?}; {secs:.1} s wall, {:.0} runs/min",
                failed.len(),
                count as f64 * 60.0 / secs.max(1e-9)
            );
            if let Some(l) = gc.line() {
                println!("{l}");
            }
            if !failed.is_empty() {
                std::process::exit(1);
            }
        }
    }
    Ok(())
}

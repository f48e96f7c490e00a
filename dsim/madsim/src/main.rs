//! `stutter-dsim-madsim`: runs seeds of the madsim layer.
//!
//! ```text
//! stutter-dsim-madsim run --seed 7             # one seed, its verdict and hash
//! stutter-dsim-madsim run --seed 7 --log       # the same run with the replicas' logs
//! stutter-dsim-madsim swarm --seeds 0..500
//! stutter-dsim-madsim swarm --seeds 0..100 --replicas 5
//! ```

use std::ops::Range;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
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
    for v in &o.violations {
        println!("VIOLATION {v}");
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    if !(2..=9).contains(&args.replicas) {
        anyhow::bail!("--replicas {} must be from 2 to 9", args.replicas);
    }
    let opts = Options { replicas: args.replicas, clients: args.clients, ops: args.ops, faults: !args.no_faults, no_fsync: args.unsafe_no_fsync, ..Options::default() };
    match args.cmd {
        Cmd::Run { seed, log, trace_dir } => {
            if log {
                let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
                tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(false).init();
            }
            if let Some(d) = &trace_dir {
                std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
            }
            let o = run(seed, &Options { trace_dir: trace_dir.clone(), ..opts })?;
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
            for seed in seeds {
                let r = run(seed, &opts);
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
            if !failed.is_empty() {
                std::process::exit(1);
            }
        }
    }
    Ok(())
}

//! `stutter-dsim-turmoil`: runs seeds of the turmoil layer.
//!
//! ```text
//! stutter-dsim-turmoil run --seed 7          # one seed, its verdict and hash
//! stutter-dsim-turmoil run --seed 7 --log    # the same run with the replicas' and turmoil's logs
//! stutter-dsim-turmoil swarm --from 0 --count 500
//! stutter-dsim-turmoil swarm --count 100 --corruption 0.01 --damage 0.2
//! ```
//!
//! A replica that refuses to start on damaged acceptor state is allowed;
//! the swarm counts such seeds, and those where a majority refused
//! ("unavailable (damaged majority)") apart from failures.

use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use stutter_dsim_turmoil::{run, Options};

#[derive(Parser)]
struct Args {
    #[command(subcommand)]
    cmd: Cmd,
    /// Replicas in the cluster.
    #[arg(long, default_value_t = stutter_dsim_turmoil::cluster::DEFAULT_REPLICAS, global = true)]
    replicas: usize,
    /// How many of the 4 client hosts speak the text protocol (the rest
    /// use the framed client library).
    #[arg(long, default_value_t = 0, global = true)]
    text_clients: usize,
    /// Operations per client.
    #[arg(long, default_value_t = 150, global = true)]
    ops: usize,
    /// No faults (a baseline).
    #[arg(long, global = true)]
    no_faults: bool,
    /// Probability of a corrupted read of the simulated disk.
    #[arg(long, default_value_t = 0.0, global = true)]
    corruption: f64,
    /// Probability that a restarting replica finds a byte of its data
    /// files flipped for good.
    #[arg(long, default_value_t = 0.0, global = true)]
    damage: f64,
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
    /// Runs `count` seeds from `from`; prints each failing seed.
    Swarm {
        #[arg(long, default_value_t = 0)]
        from: u64,
        #[arg(long, default_value_t = 100)]
        count: u64,
    },
}

fn main() -> Result<()> {
    let args = Args::parse();
    if !(2..=9).contains(&args.replicas) {
        anyhow::bail!("--replicas {} must be from 2 to 9", args.replicas);
    }
    let opts = Options {
        replicas: args.replicas,
        text_clients: args.text_clients,
        ops: args.ops,
        faults: !args.no_faults,
        corruption: args.corruption,
        damage: args.damage,
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
                    .without_time()
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
                stutter_dsim_turmoil::node_traces::join(d, args.replicas)?;
            }
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
            println!(
                "healed at {} ms; longest wait after it {} ms",
                o.healed.as_millis(),
                o.longest_wait_after_heal.as_millis()
            );
            if !o.refused.is_empty() {
                println!(
                    "refused: damaged state {:?}{}",
                    o.refused,
                    if o.unavailable() {
                        "; unavailable (damaged majority)"
                    } else {
                        ""
                    }
                );
            }
            for v in &o.violations {
                println!("VIOLATION {v}");
            }
            if !o.violations.is_empty() {
                std::process::exit(1);
            }
        }
        Cmd::Swarm { from, count } => {
            let started = Instant::now();
            let mut failed = Vec::new();
            let (mut refused, mut unavailable) = (Vec::new(), Vec::new());
            // The longest wait after healing among passing seeds, and its
            // seed: how close the correct node comes to the liveness bound.
            let mut longest = (std::time::Duration::ZERO, 0);
            for seed in from..from + count {
                // A panic (a replica's or the harness's) fails the seed, not
                // the swarm.
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(seed, &opts)))
                    .unwrap_or_else(|_| {
                        Err(anyhow::anyhow!(
                            "panicked (run the seed alone for the message)"
                        ))
                    });
                if let Ok(o) = &r {
                    if o.unavailable() {
                        println!(
                            "seed {seed} unavailable (damaged majority): {:?} refused",
                            o.refused
                        );
                        unavailable.push(seed);
                    } else if !o.refused.is_empty() {
                        println!("seed {seed} refused: damaged state {:?}", o.refused);
                        refused.push(seed);
                    }
                }
                match r {
                    Ok(o) if o.violations.is_empty() => {
                        longest = longest.max((o.longest_wait_after_heal, seed));
                    }
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
                "{count} seeds, {} failed {failed:?}; {} with a minority refusing on damaged state, {} unavailable (damaged majority); longest wait after healing {} ms (seed {}); {secs:.1} s wall, {:.0} runs/min",
                failed.len(),
                refused.len(),
                unavailable.len(),
                longest.0.as_millis(),
                longest.1,
                count as f64 * 60.0 / secs.max(1e-9)
            );
            if !failed.is_empty() {
                std::process::exit(1);
            }
        }
    }
    Ok(())
}

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

#[derive(Parser)]
#[command(about = "Deterministic simulation of stutter's MultiPaxos core under faults and GC pauses")]
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
        }
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// Run one seed and print a summary.
    Run {
        #[arg(long)]
        seed: u64,
        /// A named scenario (default: the one `swarm` derives from the seed).
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
        /// Write the summary as JSON (with a latency CDF) to this file.
        #[arg(long)]
        summary_json: Option<PathBuf>,
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
    },
    /// Runs per second of 10-virtual-second runs with load and GC pauses.
    Bench {
        #[arg(long, default_value_t = 200)]
        runs: u64,
    },
    /// List the named scenarios.
    Scenarios,
}

fn scenario(name: &Option<String>, seed: u64) -> Result<Scenario> {
    match name {
        None => Ok(Scenario::from_seed(seed)),
        Some(n) => Scenario::named(n).with_context(|| format!("unknown scenario {n}; try `sim scenarios`")),
    }
}

fn summary(seed: u64, s: &Scenario, out: &RunOutput, wall: f64) {
    let ok = out.history.iter().filter(|o| o.is_ok()).count();
    let fail = out.history.iter().filter(|o| matches!(o.outcome, Outcome::Fail(_))).count();
    let info = out.history.iter().filter(|o| o.outcome == Outcome::Pending).count();
    let mut lat = out.latencies.clone();
    lat.sort_unstable();
    let ms = |q| stutter_sim::percentile(&lat, q) as f64 / 1000.0;
    println!("seed {seed}  scenario {}", s.name);
    println!("  ops       {} ok, {} fail, {} info ({} invoked)", ok, fail, info, out.history.len());
    println!(
        "  latency   p50 {:.2} ms  p99 {:.2} ms  p99.9 {:.2} ms  max {:.2} ms (virtual, from intended start)",
        ms(0.5),
        ms(0.99),
        ms(0.999),
        lat.last().copied().unwrap_or(0) as f64 / 1000.0
    );
    let f = &out.faults;
    println!(
        "  faults    {} pauses ({} ms stopped), {} crashes, {} partitions, {} messages dropped, {} duplicated",
        f.pauses, f.pause_ms_total, f.crashes, f.partitions, f.dropped_messages, f.duplicated_messages
    );
    println!("  executed  last slot per replica {:?}", out.final_last_executed);
    println!("  trace     hash {:016x}, {} simulator events, {:.1} virtual s in {:.3} s", out.trace_hash, out.events, out.end as f64 / 1e6, wall);
    if out.violations.is_empty() {
        println!("  checks    ok: agreement, prefixes, ballots, linearizability, lost writes, liveness, convergence");
    } else {
        for v in &out.violations {
            println!("  VIOLATION {}: {}", v.check, v.detail);
        }
    }
}

fn summary_value(seed: u64, s: &Scenario, out: &RunOutput) -> serde_json::Value {
    let mut lat = out.latencies.clone();
    lat.sort_unstable();
    let qs = [0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9999, 1.0];
    let cdf: Vec<(f64, f64)> = qs.iter().map(|q| (*q, stutter_sim::percentile(&lat, *q) as f64 / 1000.0)).collect();
    serde_json::json!({
        "seed": seed,
        "scenario": s.name,
        "pause_profile": s.pauses.name,
        "ok": out.history.iter().filter(|o| o.is_ok()).count(),
        "fail": out.history.iter().filter(|o| matches!(o.outcome, Outcome::Fail(_))).count(),
        "info": out.history.iter().filter(|o| o.outcome == Outcome::Pending).count(),
        "latency_cdf_ms": cdf,
        "faults": out.faults,
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
        .with_context(|| format!("run {} (set STUTTER_VALIDATE to its path)", script.display()))?;
    match status.code() {
        Some(0) => Ok(true),
        Some(1) => Ok(false),
        _ => bail!("{} failed on {}: {status}", script.display(), trace.display()),
    }
}

fn parse_range(s: &str) -> Result<(u64, u64)> {
    let (a, b) = s.split_once("..").context("seeds must be A..B")?;
    Ok((a.trim().parse()?, b.trim().parse()?))
}

fn main() -> Result<()> {
    let args = Args::parse();
    match args.cmd {
        Cmd::Run { seed, scenario: name, trace, duration, rate, validate, export_history, format, bug, summary_json } => {
            let mut s = scenario(&name, seed)?;
            if let Some(d) = duration {
                s.duration = (d * 1e6) as u64;
            }
            if let Some(r) = rate {
                s.workload.rate = r;
            }
            let tmp_trace = std::env::temp_dir().join(format!("sim-{seed}-{}.ndjson", std::process::id()));
            let trace = match (trace, validate) {
                (None, true) => Some(tmp_trace.clone()),
                (t, _) => t,
            };
            s.bug = bug.map(Bug::from);
            let t = Instant::now();
            let out = match &trace {
                Some(p) => {
                    let f = std::fs::File::create(p).with_context(|| format!("create {}", p.display()))?;
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
                std::fs::write(&p, serde_json::to_vec_pretty(&summary_value(seed, &s, &out))?)?;
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
        Cmd::Replay { seed, scenario: name } => {
            let s = scenario(&name, seed)?;
            let out = stutter_sim::run_traced(s, seed, Box::new(std::io::BufWriter::new(std::io::stdout())));
            eprintln!("trace hash {:016x}, {} violation(s)", out.trace_hash, out.violations.len());
        }
        Cmd::Swarm { seeds, bug, fail_fast, duration } => {
            let (a, b) = parse_range(&seeds)?;
            let t = Instant::now();
            let mut failing = Vec::new();
            let mut runs = 0u64;
            for seed in a..b {
                runs += 1;
                let mut s = Scenario::from_seed(seed);
                s.bug = bug.map(Bug::from);
                if let Some(d) = duration {
                    s.duration = (d * 1e6) as u64;
                }
                let out = stutter_sim::run(s.clone(), seed);
                if !out.violations.is_empty() {
                    println!("FAIL seed {seed} ({}): {} — {}", s.name, out.violations[0].check, out.violations[0].detail);
                    failing.push(seed);
                    if fail_fast {
                        break;
                    }
                }
            }
            let secs = t.elapsed().as_secs_f64();
            println!("swarm {a}..{b}: {runs} runs, {} failing, {:.1} runs/s", failing.len(), runs as f64 / secs.max(1e-9));
            if !failing.is_empty() {
                println!("failing seeds: {failing:?}");
                bail!("{} failing seed(s)", failing.len());
            }
        }
        Cmd::Bench { runs } => {
            let t = Instant::now();
            let mut events = 0;
            for seed in 0..runs {
                let s = Scenario::named("gc-memory-pressure").context("preset")?;
                let out = stutter_sim::run(s, seed);
                events += out.events;
            }
            let secs = t.elapsed().as_secs_f64();
            println!(
                "{runs} runs of 10 virtual s (3 replicas, 2000 ops/s, memory-pressure GC pauses) in {secs:.2} s: {:.1} runs/s = {:.0} runs/min, {:.0} events/s",
                runs as f64 / secs,
                runs as f64 / secs * 60.0,
                events as f64 / secs
            );
        }
        Cmd::Scenarios => {
            for n in Scenario::names() {
                println!("{n}");
            }
        }
    }
    Ok(())
}

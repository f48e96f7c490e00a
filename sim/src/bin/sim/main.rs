//! `sim`: run, replay and swarm seeded simulations. See docs/simulator.md.
//!
//! This file reads the command line and runs `run`, `replay`, `swarm`,
//! `bench` and `scenarios`; `report.rs` prints and writes what a run gives
//! (the summary, its JSON, the trace's validation); `study.rs` is the GC
//! study's subcommand (`sim study`).

mod alloc;
mod report;
mod study;

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use stutter_core::Bug;
use stutter_sim::history;
use stutter_sim::scenario::Scenario;

use report::{summary, summary_value, validate_trace};
use study::{study, StudyCmd};

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
        /// A named scenario, or the name `swarm` printed for this seed
        /// (default: the one `swarm` derives from the seed).
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
    },
    /// Runs per second of 10-virtual-second runs with load and GC pauses.
    Bench {
        #[arg(long, default_value_t = 200)]
        runs: u64,
        /// Threads, each running whole seeds (default 1: the figure per core).
        #[arg(long, default_value_t = 1)]
        jobs: usize,
    },
    /// List the named scenarios.
    Scenarios,
    /// The GC study's measurements (docs/gc-study-simulated.md, scripts/gc-study).
    Study {
        #[command(subcommand)]
        what: StudyCmd,
    },
}

fn scenario(name: &Option<String>, seed: u64) -> Result<Scenario> {
    match name {
        None => Ok(Scenario::from_seed(seed)),
        Some(n) => Scenario::parse(n, seed).with_context(|| {
            format!("unknown scenario {n} for seed {seed}; try `sim scenarios` (`swarm` is the seed's swarm scenario)")
        }),
    }
}

fn parse_range(s: &str) -> Result<(u64, u64)> {
    let (a, b) = s.split_once("..").context("seeds must be A..B")?;
    Ok((a.trim().parse()?, b.trim().parse()?))
}

fn main() -> Result<()> {
    alloc::keep_freed_memory();
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
            clients,
            fast_handoff,
            grant_after_grace,
        } => {
            let mut s = scenario(&name, seed)?;
            s.gc_grant_after_grace |= grant_after_grace;
            s.pre_vote |= pre_vote;
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
            clients,
            fast_handoff,
            grant_after_grace,
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
            let s = Scenario::named("gc-memory-pressure").context("preset")?;
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
                "{runs} runs of 10 virtual s (3 replicas, 2000 ops/s, memory-pressure GC pauses) on {jobs} thread(s) in {secs:.2} s: {:.1} runs/s = {:.0} runs/min, {:.0} events/s",
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

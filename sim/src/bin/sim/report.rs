//! What `sim run` prints and writes of a run: the summary on stdout, the
//! same as JSON (`--summary-json`, with a latency CDF), and the verdict of
//! the TLA+ trace spec on its trace (`--validate`).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use stutter_sim::history::Outcome;
use stutter_sim::scenario::Scenario;
use stutter_sim::world::RunOutput;

pub fn summary(seed: u64, s: &Scenario, out: &RunOutput, wall: f64) {
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

pub fn summary_value(seed: u64, s: &Scenario, out: &RunOutput) -> serde_json::Value {
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
pub fn validate_trace(trace: &std::path::Path) -> Result<bool> {
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

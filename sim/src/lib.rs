//! stutter's deterministic simulator: the protocol core under seeded
//! network, disk, CPU and GC-pause faults, checked on every run.

pub mod check;
pub mod history;
pub mod rng;
pub mod scenario;
pub mod trace_value;
pub mod world;

use scenario::Scenario;
use world::{RunOutput, World};

/// Runs one scenario with one seed.
pub fn run(scenario: Scenario, seed: u64) -> RunOutput {
    World::new(scenario, seed, None).run()
}

/// Runs one scenario with one seed, writing every trace event as ndjson.
pub fn run_traced(scenario: Scenario, seed: u64, out: Box<dyn std::io::Write>) -> RunOutput {
    World::new(scenario, seed, Some(out)).run()
}

/// Latency percentile (µs) of a sorted slice.
pub fn percentile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

//! stutter's deterministic simulator: the protocol core under seeded
//! network, disk, CPU, memory and fault models, checked on every run.
//!
//! One file per simulated component: `network`, `disk`, `cpu`, `memory`
//! (a collector model from `stutter_gc` per replica), `node` (a replica
//! process), `clients`, `faults` (and `windows`, faults aimed at narrow
//! windows); `world` moves events between them.
//! Checkers are in `check/`, one file per property. `parallel` runs many
//! seeds on several threads, each run single-threaded.

pub mod calibration;
pub mod check;
pub mod clients;
pub mod cpu;
pub mod disk;
pub mod faults;
pub mod history;
pub mod host;
pub mod memory;
pub mod network;
pub mod node;
pub mod parallel;
pub mod percentiles;
pub mod profile;
pub mod queue;
pub mod rng;
pub mod scenario;
pub mod study;
pub mod tail;
pub mod trace_hash;
pub mod trace_value;
pub mod windows;
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

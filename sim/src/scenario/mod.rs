//! What a run simulates: cluster and network parameters, the workload, and
//! an explicit fault schedule. Times are virtual microseconds.
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | [`Scenario`] and [`Workload`]: every parameter of a run, and the defaults |
//! | `named.rs` | the named scenarios (`sim scenarios`), and reading a name a run printed back |
//! | `swarm.rs` | how a seed becomes a scenario (`sim swarm`), faults aimed at windows included |
//! | `plan.rs` | a scenario's fault rates drawn into the schedule of one run |
//! | `pauses.rs` | the timer-driven pause profiles (frequent-short, rare-long, ...) |
//! | `fault.rs` | the faults a schedule holds |

mod fault;
mod named;
mod pauses;
mod plan;
mod swarm;

use serde::{Deserialize, Serialize};
use stutter_core::{Bug, Time};

use crate::cpu::ServiceTable;
use crate::memory::MemoryModel;
use crate::rng::Rng;

pub use fault::Fault;
pub use pauses::PauseProfile;
pub use swarm::{WINDOW_RECIPES, WINDOW_SHARE};

pub const MS: Time = 1_000;
pub const SEC: Time = 1_000_000;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    pub clients: usize,
    /// Offered load, operations per virtual second (open loop).
    pub rate: f64,
    pub read_fraction: f64,
    pub cas_fraction: f64,
    pub keys: u64,
    /// Zipfian skew of key popularity (0.99 as in YCSB; 0 = uniform).
    pub zipf_theta: f64,
    /// Bytes of a written value as the memory model counts it (values
    /// themselves stay short numbers).
    #[serde(default)]
    pub value_size: u64,
}

impl Workload {
    /// YCSB-A-like: 50 % reads, the rest writes (and a few cas).
    pub fn ycsb_a() -> Workload {
        Workload {
            clients: 20,
            rate: 2_000.0,
            read_fraction: 0.5,
            cas_fraction: 0.05,
            keys: 50,
            zipf_theta: 0.99,
            value_size: 0,
        }
    }

    /// YCSB-B-like: 95 % reads, the rest writes (and a few cas).
    pub fn ycsb_b() -> Workload {
        Workload {
            read_fraction: 0.95,
            cas_fraction: 0.01,
            ..Workload::ycsb_a()
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    pub name: String,
    pub n: usize,
    pub duration: Time,
    /// Faults happen in `[fault_start, fault_end)`; then a quiet period
    /// during which every request must complete (liveness).
    pub fault_start: Time,
    pub fault_end: Time,
    pub net_delay_min: Time,
    pub net_delay_mean_extra: f64,
    pub loss: f64,
    pub duplication: f64,
    pub disk_min: Time,
    pub disk_max: Time,
    pub pauses: PauseProfile,
    pub crash_rate: f64,
    pub partition_rate: f64,
    pub workload: Workload,
    pub client_timeout: Time,
    pub liveness_bound: Time,
    pub bug: Option<Bug>,
    pub trim_every: u64,
    /// Explicit faults, in addition to (or, for shrinking, instead of) the
    /// ones drawn from the rates above.
    pub schedule: Vec<(Time, Fault)>,
    /// Cores of each replica's processor.
    #[serde(default = "one")]
    pub cores: u32,
    /// CPU µs per input.
    #[serde(default)]
    pub service: ServiceTable,
    /// Each replica's heap and collector.
    #[serde(default)]
    pub memory: MemoryModel,
    /// Replicas sharing one host's cores with a load generator
    /// (`crate::host`); none: each replica has `cores` of its own.
    #[serde(default)]
    pub host: Option<crate::host::Host>,
    /// The core's pipeline window and batch size (Config::window, max_batch).
    #[serde(default = "default_window")]
    pub window: usize,
    #[serde(default = "default_batch")]
    pub max_batch: usize,
    /// Config::trim_bytes (0 = trim by slots only).
    #[serde(default)]
    pub trim_bytes: u64,
    /// A measured persist latency (µs) instead of the uniform
    /// `[disk_min, disk_max]`: its quantiles at evenly spaced
    /// probabilities 0, 1/(n−1), …, 1, interpolated (docs/calibration.md).
    #[serde(default)]
    pub disk_quantiles: Vec<Time>,
    /// Config::pre_vote. Off by default, so that the runs (and trace
    /// hashes) of every seed stay as they were before pre-vote existed;
    /// `sim run --pre-vote` and the `bridge` test turn it on.
    #[serde(default)]
    pub pre_vote: bool,
    /// Config::gc_handoff_grace. 40 ms by default, what every seed ran
    /// with before it was a setting of its own (it was the transfer wait),
    /// so that trace hashes stay; `sim study` sets its own
    /// (docs/gc-study-blade.md, "Hand-off grace").
    #[serde(default = "default_handoff_grace")]
    pub gc_handoff_grace: Time,
    /// Config::gc_grant_after_grace. Off by default (trace hashes stay);
    /// `sim study --grant-after-grace` turns it on.
    #[serde(default)]
    pub gc_grant_after_grace: bool,
    /// Config::gc_handoff_promise. Off by default (trace hashes stay);
    /// `sim study --blade` turns it on (`--handoff`), and `sim run`/`sim swarm --fast-handoff`.
    #[serde(default)]
    pub gc_handoff_promise: bool,
    /// Config::gc_handoff_eager (`sim study --handoff eager`).
    #[serde(default)]
    pub gc_handoff_eager: bool,
    /// Config::commit_on_accept (`sim study --handoff commit`).
    #[serde(default)]
    pub commit_on_accept: bool,
    /// Config::session_limit. Unbounded by default, so that no session is
    /// evicted and the runs (and trace hashes) of every seed stay as they
    /// were before sessions expired; the `sessions` scenario and
    /// `sim swarm --session-limit` bound it.
    #[serde(default = "unbounded")]
    pub session_limit: usize,
}

fn unbounded() -> usize {
    usize::MAX
}

fn one() -> u32 {
    1
}
fn default_handoff_grace() -> Time {
    40 * MS
}
fn default_window() -> usize {
    8
}
fn default_batch() -> usize {
    16
}

impl Scenario {
    pub fn base(name: &str) -> Scenario {
        Scenario {
            name: name.to_string(),
            n: 3,
            duration: 10 * SEC,
            fault_start: SEC,
            fault_end: 7 * SEC,
            net_delay_min: 100,
            net_delay_mean_extra: 150.0,
            loss: 0.0,
            duplication: 0.0,
            disk_min: 100,
            disk_max: 1_000,
            pauses: PauseProfile::preset("none").unwrap_or_else(|| unreachable!()),
            crash_rate: 0.0,
            partition_rate: 0.0,
            workload: Workload::ycsb_a(),
            client_timeout: 500 * MS,
            liveness_bound: 3 * SEC,
            bug: None,
            trim_every: 64,
            schedule: Vec::new(),
            cores: 1,
            service: ServiceTable::default(),
            memory: MemoryModel::default(),
            host: None,
            window: default_window(),
            max_batch: default_batch(),
            trim_bytes: 0,
            disk_quantiles: Vec::new(),
            pre_vote: false,
            gc_handoff_grace: default_handoff_grace(),
            gc_grant_after_grace: false,
            gc_handoff_promise: false,
            gc_handoff_eager: false,
            commit_on_accept: false,
            session_limit: unbounded(),
        }
    }

    /// A persist's latency: uniform in `[disk_min, disk_max]`, or drawn
    /// from `disk_quantiles` when given.
    pub fn disk_latency(&self, rng: &mut Rng) -> Time {
        let q = &self.disk_quantiles;
        if q.len() < 2 {
            return rng.range(self.disk_min, self.disk_max);
        }
        let x = rng.f64() * (q.len() - 1) as f64;
        let i = (x as usize).min(q.len() - 2);
        let (a, b) = (q[i] as f64, q[i + 1] as f64);
        (a + (b - a) * (x - i as f64)).round() as Time
    }
}

#[cfg(test)]
mod tests;

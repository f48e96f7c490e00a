//! The GC study's measurements, in virtual time: latency at a given
//! offered load, and the highest load whose p99 stays under an SLO, the
//! seed paper's method (open loop, latency from the intended start, a
//! search over the offered rate) — for a replica modelled with no
//! collector, a Go-like or a G1-like one, under a memory limit and a
//! number of cores.

use serde::Serialize;
use stutter_core::Time;

use crate::history::Outcome;
use crate::host::Host;
use crate::memory::{LogTrim, MemoryModel};
use crate::percentiles::Percentiles;
use crate::profile::{Profile, STUTTER_TRIM_BYTES};
use crate::scenario::{Scenario, Workload, MS, SEC};

/// One configuration of the study's grid.
#[derive(Clone, Debug, Serialize)]
pub struct Setup {
    /// `none`, `go` or `g1`.
    pub model: String,
    /// Memory limit over data (the paper's memory/data ratio).
    pub ratio: f64,
    pub cores: u32,
    /// Bytes of data each replica holds.
    pub dataset: u64,
    /// Virtual seconds of load per probe, and how many of the first are
    /// not measured.
    pub duration: f64,
    pub warmup: f64,
    /// Workload A (50 % reads) or B (95 %).
    pub read_fraction: f64,
    /// GC coordination (Blade) on.
    #[serde(default)]
    pub coordinated: bool,
    /// With coordination, the old leader's grace after a hand-off
    /// (Config::gc_handoff_grace), ms.
    pub grace_ms: f64,
    /// With coordination: Config::gc_grant_after_grace.
    #[serde(default)]
    pub grant_after_grace: bool,
    /// With coordination: Config::gc_handoff_promise.
    #[serde(default)]
    pub handoff_promise: bool,
    /// With coordination: Config::gc_handoff_eager.
    #[serde(default)]
    pub eager_handoff: bool,
    /// With coordination: Config::commit_on_accept.
    #[serde(default)]
    pub commit_on_accept: bool,
    /// The share of a core each replica gets while it has work (the
    /// calibrated costs' `speed`): 1 for cores of its own; less to stand
    /// for replicas sharing cores with each other and a load generator,
    /// as the real cluster of the calibration does (docs/calibration.md).
    pub speed: f64,
    /// One-way network delay: a minimum plus an exponential of this mean,
    /// µs; and the disk's latency from a persist request to its
    /// durability, uniform in `[disk_min_us, disk_max_us]`. The defaults
    /// (`Setup::NET_DISK_DEFAULT`) are the simulator's usual ones; the
    /// calibration sets those of the machine it compares with.
    pub net_min_us: Time,
    pub net_extra_us: f64,
    pub disk_min_us: Time,
    pub disk_max_us: Time,
    /// A measured persist latency distribution instead (quantiles at even
    /// probabilities, µs; `Scenario::disk_quantiles`).
    pub disk_quantiles_us: Vec<Time>,
    /// Open-loop clients, one operation outstanding each. With 64, the
    /// calibrated no-collector replica topped out at the clients' limit
    /// (64 / latency), not its CPU's, which hid the collector's CPU tax.
    pub clients: u32,
    /// What is modelled: an implementation's profile, the key count, the
    /// Go collector's generation, a shared host.
    #[serde(flatten)]
    pub runtime: Runtime,
}

/// The modelled implementation and machine of a [`Setup`].
#[derive(Clone, Debug, Default, Serialize)]
pub struct Runtime {
    /// An allocation profile (`crate::profile`): its bytes and CPU per
    /// operation and live bytes per key instead of stutter's node's.
    pub profile: Option<Profile>,
    /// Keys in the data set (0: as many as `dataset` holds of the
    /// workload's keys and values, 23 + 500 bytes each).
    pub keys: u64,
    /// The Go-like collector's marking cost: `green-tea` (Go 1.26's
    /// default) or `classic` (`GOEXPERIMENT=nogreenteagc`, the seed
    /// paper's Go 1.19). Empty: green tea.
    pub go_mark: String,
    /// The replicas and the load generator on one host of this many
    /// cores (0: each replica has `cores` of its own).
    pub host_cores: f64,
    /// The load generator's CPU µs per operation, taken off the host.
    pub load_us_per_op: f64,
}

/// Bytes of a key and a value of the study's workload (YCSB's 23-byte keys,
/// 500-byte values).
const KEY_BYTES: u64 = 23;
const VALUE_BYTES: u64 = 500;

impl Setup {
    /// `(net_min_us, net_extra_us, disk_min_us, disk_max_us)` of
    /// `Scenario::base`.
    pub const NET_DISK_DEFAULT: (Time, f64, Time, Time) = (100, 150.0, 100, 1_000);

    /// The hand-off grace of `sim study --blade`, ms: below the study's
    /// election timeout (150 ms), long enough that almost every client of
    /// the old leader sends a request during it and is redirected
    /// (docs/gc-study-blade.md, "Hand-off grace").
    pub const GRACE_MS: f64 = 120.0;

    pub fn scenario(&self, rate: f64) -> Option<Scenario> {
        let mut s = Scenario::base(&format!(
            "study/{}@{}x{}c",
            self.model, self.ratio, self.cores
        ));
        // No faults: what is measured is the collector.
        s.fault_start = 0;
        s.fault_end = 0;
        s.duration = (self.duration * SEC as f64) as Time;
        s.liveness_bound = 2 * SEC;
        s.client_timeout = 2 * SEC;
        s.cores = self.cores;
        s.net_delay_min = self.net_min_us;
        s.net_delay_mean_extra = self.net_extra_us;
        s.disk_min = self.disk_min_us;
        s.disk_max = self.disk_max_us.max(self.disk_min_us);
        s.disk_quantiles = self.disk_quantiles_us.clone();
        s.service = crate::calibration::service();
        if let Some(c) = s.service.steps.as_mut() {
            c.speed = self.speed;
        }
        // The real node's protocol settings (examples/local-3.toml).
        s.window = 16;
        s.max_batch = 256;
        s.trim_every = 1 << 20;
        s.trim_bytes = 16 << 20;
        let rt = &self.runtime;
        let (key_bytes, value_bytes) = rt
            .profile
            .as_ref()
            .map_or((KEY_BYTES, VALUE_BYTES), |p| (p.key_bytes, p.value_bytes));
        let keys = match rt.keys {
            0 => (self.dataset / (key_bytes + value_bytes)).max(1),
            k => k,
        };
        s.workload = Workload {
            clients: self.clients as usize,
            rate,
            read_fraction: self.read_fraction,
            cas_fraction: 0.0,
            keys,
            zipf_theta: 0.99,
            value_size: value_bytes,
        };
        s.memory = match self.model.as_str() {
            "none" => MemoryModel::none(self.dataset),
            "go" => MemoryModel::go(self.dataset, self.ratio),
            "g1" => MemoryModel::g1(self.dataset, self.ratio),
            _ => return None,
        };
        if let stutter_gc::GcModel::Go(g) = &mut s.memory.gc {
            g.mark_us_per_mib = match rt.go_mark.as_str() {
                "" | "green-tea" => stutter_gc::GoParams::green_tea_mark(),
                "classic" => stutter_gc::GoParams::classic_mark(),
                _ => return None,
            };
        }
        // stutter's node trims its log every 16 MiB executed; the
        // simulator's own values are short, so the memory model counts
        // that in the modelled bytes.
        s.memory.log_trim = LogTrim::Bytes {
            bytes: STUTTER_TRIM_BYTES,
        };
        if let Some(p) = &rt.profile {
            s.memory.per_op = Some(p.per_op(keys, self.read_fraction));
            s.memory.log_trim = p.log_trim();
            if let Some(c) = p.op_costs(self.speed, self.read_fraction) {
                s.service.per_op = Some(c);
            }
            s.name += &format!("+{}", p.name);
        }
        if rt.host_cores > 0.0 {
            s.host = Some(Host {
                cores: rt.host_cores,
                load_cores: rate * rt.load_us_per_op / 1e6,
            });
            s.cores = rt.host_cores.ceil() as u32;
            s.name += &format!("+host{}", rt.host_cores);
        }
        s.memory.coordinated = self.coordinated;
        if self.coordinated {
            s.name += "+blade";
            s.gc_handoff_grace = (self.grace_ms * MS as f64) as Time;
            s.gc_grant_after_grace = self.grant_after_grace;
            s.gc_handoff_promise = self.handoff_promise;
            s.gc_handoff_eager = self.eager_handoff;
            s.commit_on_accept = self.commit_on_accept;
        }
        Some(s)
    }
}

/// What one run at one offered rate gave.
#[derive(Clone, Debug, Serialize)]
pub struct Probe {
    pub rate: f64,
    /// Operations completed per virtual second in the measured window.
    pub throughput: f64,
    /// Latency from the intended start, ms (operations never completed
    /// count as lasting until the end of the run).
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
    pub p9999: f64,
    pub max: f64,
    /// The whole distribution of the same latencies, as a percentile table.
    pub percentiles: Percentiles,
    /// The same percentiles measured from the moment each operation was
    /// sent: what a closed-loop client reports (coordinated omission).
    pub p99_from_send: f64,
    pub max_from_send: f64,
    pub incomplete: usize,
    /// The busiest replica's collector: CPU share, time active, pauses.
    pub gc_share: f64,
    pub gc_active: f64,
    pub gc_pauses: u64,
    /// Collection cycles (Go: cycles; G1: young, mixed and full
    /// collections and concurrent marks).
    #[serde(default)]
    pub gc_cycles: u64,
    pub gc_max_pause_ms: f64,
    /// Safety violations (anything but liveness): must be none.
    pub safety: Vec<String>,
}

fn pct(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

pub fn probe(setup: &Setup, rate: f64, seed: u64) -> Option<Probe> {
    let s = setup.scenario(rate)?;
    let out = crate::run(s.clone(), seed);
    Some(probe_of(setup, rate, &s, &out))
}

/// One run at one rate: its probe and its timeline (`sim study run`).
pub fn probe_and_timeline(setup: &Setup, rate: f64, seed: u64) -> Option<(Probe, Timeline)> {
    let s = setup.scenario(rate)?;
    let out = crate::run(s.clone(), seed);
    Some((
        probe_of(setup, rate, &s, &out),
        timeline_of(setup, rate, s.memory.window, &out),
    ))
}

fn probe_of(setup: &Setup, rate: f64, s: &Scenario, out: &crate::world::RunOutput) -> Probe {
    let from = (setup.warmup * SEC as f64) as Time;
    let until = s.duration;
    let mut lat = Vec::new();
    let mut lat_send = Vec::new();
    let mut incomplete = 0;
    let mut completed = 0usize;
    for op in out
        .history
        .iter()
        .filter(|o| o.intended >= from && o.intended < until)
    {
        match (op.complete, &op.outcome) {
            (Some(c), Outcome::Ok { .. }) => {
                lat.push((c - op.intended) as f64 / MS as f64);
                lat_send.push((c - op.invoke) as f64 / MS as f64);
                completed += 1;
            }
            (_, Outcome::Fail(_)) => {}
            _ => {
                incomplete += 1;
                lat.push((out.end.saturating_sub(op.intended)) as f64 / MS as f64);
            }
        }
    }
    lat.sort_by(f64::total_cmp);
    lat_send.sort_by(f64::total_cmp);
    let busiest = out
        .gc
        .iter()
        .max_by(|a, b| a.1.gc_cpu_us().total_cmp(&b.1.gc_cpu_us()));
    let cores = setup.cores as f64;
    Probe {
        rate,
        throughput: completed as f64 / ((until - from) as f64 / SEC as f64),
        p50: pct(&lat, 0.5),
        p99: pct(&lat, 0.99),
        p999: pct(&lat, 0.999),
        p9999: pct(&lat, 0.9999),
        max: lat.last().copied().unwrap_or(0.0),
        percentiles: Percentiles::of_sorted(&lat),
        p99_from_send: pct(&lat_send, 0.99),
        max_from_send: lat_send.last().copied().unwrap_or(0.0),
        incomplete,
        gc_share: busiest.map_or(0.0, |g| g.1.cpu_share(cores)),
        gc_active: busiest.map_or(0.0, |g| g.1.active_share()),
        gc_pauses: busiest.map_or(0, |g| g.1.pause_count()),
        gc_cycles: busiest.map_or(0, |g| g.1.cycles),
        gc_max_pause_ms: busiest.map_or(0.0, |g| g.1.max_pause() as f64 / MS as f64),
        safety: out
            .violations
            .iter()
            .filter(|v| v.check != "liveness" && v.check != "convergence")
            .map(|v| format!("{}: {}", v.check, v.detail))
            .collect(),
    }
}

/// Served below this share of the offered rate, a run misses the SLO
/// whatever its latencies: the load was not carried. Above Poisson's
/// spread for the shortest runs the searches make (a few hundred
/// operations in the measured window).
pub const SERVED_SHARE: f64 = 0.8;

impl Probe {
    /// Whether this run meets the SLO: p99 from the intended start within
    /// it, every operation in the measured window completed, and the
    /// offered load carried. The last matters where the replicas never
    /// serve at all (a collector that never lets a step run): no
    /// operation is then invoked in the window, so none is late or
    /// incomplete, and without it such a run would pass at any rate.
    pub fn meets(&self, slo_p99_ms: f64) -> bool {
        self.p99 <= slo_p99_ms
            && self.incomplete == 0
            && self.throughput >= SERVED_SHARE * self.rate
    }
}

/// The result of a search for the highest rate meeting the SLO.
#[derive(Clone, Debug, Serialize)]
pub struct Search {
    pub setup: Setup,
    pub slo_p99_ms: f64,
    /// The highest rate that met the SLO (0 if none did), and its probe.
    pub max_rate: f64,
    pub at_max: Option<Probe>,
    pub probes: Vec<Probe>,
}

/// Doubles the rate from `start` until it misses the SLO, then bisects to
/// `precision` (relative). A rate misses when each of `attempts` runs
/// (seeds `seed`, `seed + 1`, ...) misses, as `bench --find-max` does; the
/// probe kept for a passing rate is its first passing run.
pub fn max_rate(
    setup: &Setup,
    slo_p99_ms: f64,
    start: f64,
    precision: f64,
    attempts: u64,
    seed: u64,
) -> Option<Search> {
    let mut probes = Vec::new();
    let run = |rate: f64, probes: &mut Vec<Probe>| -> Option<Option<Probe>> {
        for a in 0..attempts.max(1) {
            let p = probe(setup, rate, seed + a)?;
            probes.push(p.clone());
            if p.meets(slo_p99_ms) {
                return Some(Some(p));
            }
        }
        Some(None)
    };
    let (mut lo, mut hi): (f64, f64) = (0.0, 0.0);
    let mut best: Option<Probe> = None;
    let mut rate = start;
    // Doubling.
    while rate < 5_000_000.0 {
        match run(rate, &mut probes)? {
            Some(p) => {
                lo = rate;
                best = Some(p);
                rate *= 2.0;
            }
            None => {
                hi = rate;
                break;
            }
        }
    }
    if lo == 0.0 {
        // Even the starting rate missed: try lower, down to 1 % of it.
        let mut r = start / 2.0;
        while r >= start / 100.0 {
            if let Some(p) = run(r, &mut probes)? {
                lo = r;
                best = Some(p);
                break;
            }
            hi = r;
            r /= 2.0;
        }
        if lo == 0.0 {
            return Some(Search {
                setup: setup.clone(),
                slo_p99_ms,
                max_rate: 0.0,
                at_max: None,
                probes,
            });
        }
    }
    // Bisection between the last pass and the first miss.
    while hi > 0.0 && (hi - lo) / lo > precision {
        let mid = (lo + hi) / 2.0;
        match run(mid, &mut probes)? {
            Some(p) => {
                lo = mid;
                best = Some(p);
            }
            None => hi = mid,
        }
    }
    Some(Search {
        setup: setup.clone(),
        slo_p99_ms,
        max_rate: lo,
        at_max: best,
        probes,
    })
}

/// The collector's CPU share over time at one load, for one replica (the
/// busiest), in windows of the memory model's window length.
#[derive(Clone, Debug, Serialize)]
pub struct Timeline {
    pub setup: Setup,
    pub rate: f64,
    pub window_ms: f64,
    /// Collector CPU share of the replica's cores per window.
    pub share: Vec<f64>,
    /// `(start ms, duration ms, phase)` of each pause.
    pub pauses: Vec<(f64, f64, &'static str)>,
    /// Latencies (ms) from the intended start and from the send, sorted.
    pub latency: Vec<f64>,
    pub latency_from_send: Vec<f64>,
}

pub fn timeline(setup: &Setup, rate: f64, seed: u64) -> Option<Timeline> {
    let s = setup.scenario(rate)?;
    let window = s.memory.window;
    let out = crate::run(s, seed);
    Some(timeline_of(setup, rate, window, &out))
}

fn timeline_of(setup: &Setup, rate: f64, window: Time, out: &crate::world::RunOutput) -> Timeline {
    let cores = setup.cores as f64;
    let busiest = out
        .gc
        .iter()
        .max_by(|a, b| a.1.gc_cpu_us().total_cmp(&b.1.gc_cpu_us()));
    let share = busiest.map_or_else(Vec::new, |g| {
        g.1.windows
            .iter()
            .map(|w| w / (window as f64 * cores))
            .collect()
    });
    let pauses = busiest.map_or_else(Vec::new, |g| {
        g.1.pauses
            .iter()
            .map(|(t, d, p)| (*t as f64 / MS as f64, *d as f64 / MS as f64, p.name()))
            .collect()
    });
    let mut latency: Vec<f64> = Vec::new();
    let mut latency_from_send: Vec<f64> = Vec::new();
    for op in out.history.iter().filter(|o| o.is_ok()) {
        if let Some(c) = op.complete {
            latency.push((c - op.intended) as f64 / MS as f64);
            latency_from_send.push((c - op.invoke) as f64 / MS as f64);
        }
    }
    latency.sort_by(f64::total_cmp);
    latency_from_send.sort_by(f64::total_cmp);
    Timeline {
        setup: setup.clone(),
        rate,
        window_ms: window as f64 / MS as f64,
        share,
        pauses,
        latency,
        latency_from_send,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(rate: f64, throughput: f64, p99: f64, incomplete: usize) -> Probe {
        Probe {
            rate,
            throughput,
            p50: p99 / 2.0,
            p99,
            p999: p99,
            p9999: p99,
            max: p99,
            percentiles: Percentiles::of_sorted(&[]),
            p99_from_send: p99,
            max_from_send: p99,
            incomplete,
            gc_share: 0.0,
            gc_active: 0.0,
            gc_pauses: 0,
            gc_cycles: 0,
            gc_max_pause_ms: 0.0,
            safety: Vec::new(),
        }
    }

    #[test]
    fn a_run_that_served_nothing_does_not_meet_the_slo() {
        // Regression: a Go-like replica at memory/data 1.25 with the
        // replicant-go profile at 256 MiB never served; no operation was
        // invoked in the window, so none was late or incomplete, and the
        // search climbed to 4,096,000 ops/s.
        assert!(!probe(4_096_000.0, 0.0, 0.0, 0).meets(20.0));
        assert!(
            !probe(2_000.0, 1_000.0, 3.0, 0).meets(20.0),
            "half the load carried"
        );
        assert!(probe(2_000.0, 1_950.0, 3.0, 0).meets(20.0));
        assert!(!probe(2_000.0, 2_000.0, 21.0, 0).meets(20.0), "late");
        assert!(
            !probe(2_000.0, 2_000.0, 3.0, 1).meets(20.0),
            "an operation never completed"
        );
    }
}

//! What a run simulates: cluster and network parameters, the workload, and
//! an explicit fault schedule. Named scenarios are presets; `swarm` derives a
//! scenario from each seed. Times are virtual microseconds.

use serde::{Deserialize, Serialize};
use stutter_core::{Bug, ReplicaId, Time};

use crate::cpu::ServiceTable;
use crate::memory::MemoryModel;
use crate::rng::Rng;

pub const MS: Time = 1_000;
pub const SEC: Time = 1_000_000;

/// Share of the swarm's seeds whose scenario adds faults aimed at windows.
pub const WINDOW_SHARE: f64 = 0.3;
/// The recipes of faults aimed at windows (`Scenario::window_faults`).
pub const WINDOW_RECIPES: [&str; 5] = [
    "deposed",
    "churn",
    "churn-pauses",
    "late-accepts",
    "election-pauses",
];

/// The suffix of a scenario name that says its clients are legacy
/// (`Scenario::legacy_clients`).
pub const LEGACY_SUFFIX: &str = "+legacy-clients";

/// How often replicas stop the world, and for how long.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PauseProfile {
    pub name: String,
    /// Mean time between pauses of one replica (exponential).
    pub mean_interval: Time,
    pub min_pause: Time,
    pub max_pause: Time,
    /// Chance that a pause is a long one (`long_min..=long_max`).
    pub long_chance: f64,
    pub long_min: Time,
    pub long_max: Time,
    /// Pauses hit all replicas at about the same time (they execute the same
    /// commands, so their heaps grow together).
    pub correlated: bool,
}

impl PauseProfile {
    pub fn preset(name: &str) -> Option<PauseProfile> {
        let p =
            |mean_interval, min_pause, max_pause, long_chance, long_min, long_max| PauseProfile {
                name: name.to_string(),
                mean_interval,
                min_pause,
                max_pause,
                long_chance,
                long_min,
                long_max,
                correlated: false,
            };
        Some(match name {
            "none" => p(0, 0, 0, 0.0, 0, 0),
            // Young-generation collections: a few ms every few hundred ms.
            "frequent-short" => p(300 * MS, 2 * MS, 8 * MS, 0.0, 0, 0),
            // Full collections of a large heap: rare, hundreds of ms to seconds.
            "rare-long" => p(3 * SEC, 200 * MS, 1_500 * MS, 0.0, 0, 0),
            // Both, worse: short pauses more often and some long ones.
            "memory-pressure" => p(150 * MS, 5 * MS, 30 * MS, 0.05, 300 * MS, 2 * SEC),
            "correlated" => PauseProfile {
                correlated: true,
                ..p(400 * MS, 5 * MS, 20 * MS, 0.05, 200 * MS, SEC)
            },
            _ => return None,
        })
    }

    pub fn names() -> [&'static str; 5] {
        [
            "none",
            "frequent-short",
            "rare-long",
            "memory-pressure",
            "correlated",
        ]
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Fault {
    /// Stop-the-world pause of a replica.
    Pause { replica: ReplicaId, duration: Time },
    /// Crash (losing unsynced writes), restart after `down_for`.
    Crash { replica: ReplicaId, down_for: Time },
    /// Cut both directions between `a` and the others, or only `a`'s
    /// outgoing links when `one_way`.
    Isolate {
        replica: ReplicaId,
        one_way: bool,
        duration: Time,
    },
    /// Cut the link between two replicas only (non-transitive partition).
    CutLink {
        a: ReplicaId,
        b: ReplicaId,
        duration: Time,
    },

    // Faults aimed at a window (as FoundationDB's buggify and TigerBeetle's
    // swarm aim theirs): armed at their time, each fires when the world
    // sees its window open (`sim/src/windows.rs`) and is dropped unfired at
    // the end of the fault window. "The leader" is the replica leading at
    // the highest ballot when the fault fires; if none leads, the fault
    // waits for the next one elected.
    /// Stop the leader (`nth` = 0), or the `nth` replica elected after the
    /// fault was armed right after its election, for `duration`.
    PauseLeader { nth: u8, duration: Time },
    /// Crash the leader (`nth` = 0), or the `nth` replica elected after the
    /// fault was armed, `after` its election; restart after `down_for`.
    CrashLeader {
        nth: u8,
        after: Time,
        down_for: Time,
    },
    /// Stop the next replica to start an election right after that step
    /// (its prepares wait for its ballot to be durable, so they wait for
    /// the end of the pause), for `duration`.
    PauseCandidate { duration: Time },
    /// Isolate the leader (`nth` = 0), or the `nth` replica elected after
    /// the fault was armed right after its election, for `duration`: its
    /// outgoing links only when `one_way` (it still hears the others and
    /// takes client requests it cannot commit).
    IsolateLeader {
        nth: u8,
        one_way: bool,
        duration: Time,
    },
    /// Cut the link between the leader and one of its followers, both
    /// ways, for `duration`: the other follower elects a new leader while
    /// the old one still leads on its side of the cut.
    CutLeader { duration: Time },
    /// Delay everything the leader sends one follower by `extra` (in
    /// order) for `duration`: accepts of a leader deposed meanwhile arrive
    /// late.
    SlowLeaderLink { extra: Time, duration: Time },
    /// Crash the next replica to adopt a higher ballot (a follower answering
    /// a prepare, or hearing from a new leader) inside that persist window:
    /// after its ballot record went to disk, before it is durable; restart
    /// after `down_for`.
    CrashInBallotPersist { down_for: Time },
    /// A bridge partition: cut both directions between the leader of the
    /// moment and its lowest-numbered follower, which still reaches the
    /// others (nothing if no replica leads).
    CutFromLeader { duration: Time },
}

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
    /// (docs/gc-study.md, "Hand-off grace").
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
    /// Config::session_tombstones (0: 4 × the limit).
    #[serde(default)]
    pub session_tombstones: usize,
    /// Legacy clients: unregistered ids below 2^63 (`REGISTERED_BASE`),
    /// whose at-most-once rests on tombstones, the retry flag and a
    /// message-delay bound; the replicas then serve them
    /// (Config::registered_clients_only off). Off by default: clients
    /// register (`Op::Register`) and use the id the log assigns
    /// (`clients.rs`), as the real client library does, and the replicas
    /// serve registered clients only. `sim run/swarm --legacy-clients`
    /// and the scenario suffix `+legacy-clients` (`Scenario::parse`) turn
    /// it on; seeds pinned before registration was the default replay
    /// with it (traces/seeds.txt).
    #[serde(default)]
    pub legacy_clients: bool,
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
            session_tombstones: 0,
            legacy_clients: false,
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

    pub fn names() -> [&'static str; 16] {
        [
            "calm",
            "gc-frequent-short",
            "gc-rare-long",
            "gc-memory-pressure",
            "gc-correlated",
            "gc-go",
            "gc-g1",
            "gc-go-blade",
            "gc-g1-blade",
            "partitions",
            "crashes",
            "lossy",
            "chaos",
            "ycsb-b",
            "bridge",
            "sessions",
        ]
    }

    pub fn named(name: &str) -> Option<Scenario> {
        let mut s = Scenario::base(name);
        match name {
            "calm" => {}
            "gc-frequent-short" => s.pauses = PauseProfile::preset("frequent-short")?,
            "gc-rare-long" => s.pauses = PauseProfile::preset("rare-long")?,
            "gc-memory-pressure" => s.pauses = PauseProfile::preset("memory-pressure")?,
            "gc-correlated" => s.pauses = PauseProfile::preset("correlated")?,
            // Collector models: 16 MiB of data per replica, 500-byte values;
            // pauses and CPU tax come from allocation. Go-like at memory/data
            // 1.5; G1-like at 1.25, where it ends in full collections (at 1.5
            // a 24 MiB heap is collected concurrently, with young pauses of
            // a few ms, as G1 sizes eden for its pause goal).
            "gc-go" => {
                s.workload.value_size = 500;
                s.memory = MemoryModel::go(16 << 20, 1.5);
            }
            "gc-g1" => {
                s.workload.value_size = 500;
                s.memory = MemoryModel::g1(16 << 20, 1.25);
            }
            // The same with GC coordination (Blade): grants, hand-offs.
            "gc-go-blade" => {
                s.workload.value_size = 500;
                s.memory = MemoryModel::go(16 << 20, 1.5);
                s.memory.coordinated = true;
            }
            "gc-g1-blade" => {
                s.workload.value_size = 500;
                s.memory = MemoryModel::g1(16 << 20, 1.25);
                s.memory.coordinated = true;
            }
            "partitions" => s.partition_rate = 0.8,
            // One follower cut from the leader only, for 3 s, then back
            // (issue 17): with pre-vote off it unseats the leader, with it
            // on it does not (`sim run --scenario bridge [--pre-vote]`).
            "bridge" => {
                s.fault_end = s.fault_start;
                s.schedule = vec![(2 * SEC, Fault::CutFromLeader { duration: 3 * SEC })];
            }
            // Sessions expire (issue 17): 40 clients share a table of 4
            // sessions, under crashes, partitions, loss and pauses, so that
            // sessions are evicted, tombstones rotate out (2,048 of them,
            // after about a quarter of the run) and expired replies meet
            // retries and installed snapshots. With 16 tombstones (4 × the
            // limit) a client's resent first request outlived its
            // tombstone and executed twice in about one seed in five until
            // clients flagged their retries (docs/protocol.md, "Session
            // expiry"); it is expired now. Those are legacy clients'
            // (`sessions+legacy-clients`); registering clients (the
            // default) need no tombstones: an evicted registered id is
            // expired.
            "sessions" => {
                s.session_limit = 4;
                s.session_tombstones = 2_048;
                s.workload.clients = 40;
                s.pauses = PauseProfile::preset("frequent-short")?;
                s.crash_rate = 0.3;
                s.partition_rate = 0.3;
                s.loss = 0.02;
                s.duplication = 0.02;
                s.trim_every = 16;
            }
            "crashes" => s.crash_rate = 0.6,
            "lossy" => {
                s.loss = 0.05;
                s.duplication = 0.05;
            }
            "ycsb-b" => {
                s.workload = Workload::ycsb_b();
                s.pauses = PauseProfile::preset("frequent-short")?;
            }
            "chaos" => {
                s.pauses = PauseProfile::preset("memory-pressure")?;
                s.crash_rate = 0.4;
                s.partition_rate = 0.4;
                s.loss = 0.02;
                s.duplication = 0.02;
            }
            _ => return None,
        }
        Some(s)
    }

    /// A scenario by the name a run printed or a corpus line gives: a
    /// named scenario (`Scenario::named`), `swarm` (`from_seed`) or the
    /// full name `sim swarm` printed for that seed, each optionally
    /// followed by `+legacy-clients` (`legacy_clients`). Settings a swarm
    /// flag appended otherwise (`+sessionsN`, `+fast-handoff`,
    /// `+grant-after-grace`) are not read back: pass the flags.
    pub fn parse(name: &str, seed: u64) -> Option<Scenario> {
        let (base, legacy) = match name.strip_suffix(LEGACY_SUFFIX) {
            Some(b) => (b, true),
            None => (name, false),
        };
        let mut s = if base == "swarm" {
            Scenario::from_seed(seed)
        } else if base.starts_with("swarm/") {
            let s = Scenario::from_seed(seed);
            if s.name != base {
                return None;
            }
            s
        } else {
            Scenario::named(base)?
        };
        if legacy {
            s.set_legacy_clients();
        }
        Some(s)
    }

    /// Legacy clients (`legacy_clients`), said in the name.
    pub fn set_legacy_clients(&mut self) {
        if !self.legacy_clients {
            self.legacy_clients = true;
            self.name += LEGACY_SUFFIX;
        }
    }

    /// A scenario drawn from a seed, for swarm testing: every fault kind
    /// appears across seeds, in random combinations and intensities.
    pub fn from_seed(seed: u64) -> Scenario {
        let mut r = Rng::new(seed ^ 0x5ce7_a210);
        let mut s = Scenario::base("swarm");
        let profile = r.pick(&PauseProfile::names()).unwrap_or("none");
        s.pauses = PauseProfile::preset(profile).unwrap_or_else(|| unreachable!());
        s.name = format!("swarm/{profile}");
        if r.chance(0.5) {
            s.crash_rate = r.f64() * 0.8;
            s.name += "+crash";
        }
        if r.chance(0.5) {
            s.partition_rate = r.f64() * 0.8;
            s.name += "+partition";
        }
        if r.chance(0.3) {
            s.loss = r.f64() * 0.08;
            s.duplication = r.f64() * 0.05;
            s.name += "+lossy";
        }
        s.net_delay_mean_extra = 50.0 + r.f64() * 1_000.0;
        if r.chance(0.3) {
            // A slow disk: fsync of a busy device or a cloud volume.
            s.disk_min = 2 * MS;
            s.disk_max = 40 * MS;
            s.name += "+slowdisk";
        } else {
            s.disk_max = 200 + r.range(0, 3_000);
        }
        if r.chance(0.3) {
            s.workload = Workload::ycsb_b();
            s.name += "+ycsb-b";
        }
        s.workload.rate = 500.0 + r.f64() * 3_000.0;
        s.workload.keys = r.range(3, 60);
        s.workload.zipf_theta = if r.chance(0.2) { 0.0 } else { 0.99 };
        s.trim_every = r.range(8, 256);
        // A collector model in a third of the seeds, from a stream of its
        // own so that the rest of the scenario a seed derives stays as it
        // was before collector models existed.
        let mut g = Rng::new(seed ^ 0x6c_0de1);
        if g.chance(0.33) {
            let dataset = g.range(4, 32) << 20;
            let ratio = [8.0, 2.0, 1.5, 1.25][g.range(0, 3) as usize];
            s.workload.value_size = g.range(16, 1_024);
            s.cores = g.range(1, 4) as u32;
            let go = g.chance(0.5);
            s.memory = if go {
                MemoryModel::go(dataset, ratio)
            } else {
                MemoryModel::g1(dataset, ratio)
            };
            s.memory.coordinated = g.chance(0.5);
            s.name += &format!(
                "+{}@{ratio}x{}c{}",
                if go { "go" } else { "g1" },
                s.cores,
                if s.memory.coordinated { "+blade" } else { "" }
            );
            if s.memory.coordinated {
                s.draw_handoff(seed);
            }
        }
        // Faults aimed at windows in a share of the seeds, from a third
        // stream: the scenario the other seeds derive stays as it was.
        let mut w = Rng::new(seed ^ 0x3d0_b1a5);
        if w.chance(WINDOW_SHARE) {
            let (faults, kinds) = Scenario::window_faults(&mut w, s.fault_start, s.fault_end);
            s.schedule.extend(faults);
            s.name += &format!("+windows({})", kinds.join(","));
        }
        s
    }

    /// How a coordinating seed hands leadership off, from a stream of the
    /// seed's own (seeds that do not coordinate draw nothing from it and
    /// run as before): half the seeds the fast hand-off (promise in
    /// `TimeoutNow`, no transfer wait, commit on `Accept`), the other half
    /// each of the three switches at even odds (the waiting hand-off, a
    /// promise alone, a promise without the wait, commit on `Accept`
    /// alone, ...); and in half the seeds, whatever the mode, the old
    /// leader asks for its grant when its grace ends
    /// (`gc_grant_after_grace`). The name says which: `+handoff(...)`,
    /// `+grace-grant`.
    fn draw_handoff(&mut self, seed: u64) {
        let mut h = Rng::new(seed ^ 0x4a_d0ff);
        if h.chance(0.5) {
            self.gc_handoff_promise = true;
            self.gc_handoff_eager = true;
            self.commit_on_accept = true;
        } else {
            self.gc_handoff_promise = h.chance(0.5);
            self.gc_handoff_eager = self.gc_handoff_promise && h.chance(0.5);
            self.commit_on_accept = h.chance(0.5);
        }
        self.gc_grant_after_grace = h.chance(0.5);
        let mode: Vec<&str> = [
            (self.gc_handoff_promise, "promise"),
            (self.gc_handoff_eager, "eager"),
            (self.commit_on_accept, "commit"),
        ]
        .iter()
        .filter_map(|(on, m)| on.then_some(*m))
        .collect();
        if !mode.is_empty() {
            self.name += &format!("+handoff({})", mode.join(","));
        }
        if self.gc_grant_after_grace {
            self.name += "+grace-grant";
        }
    }

    /// One to four recipes of faults aimed at windows, each at a time drawn
    /// in `[start, end − 1 s)`; returns the faults and the recipes' names.
    pub fn window_faults(
        r: &mut Rng,
        start: Time,
        end: Time,
    ) -> (Vec<(Time, Fault)>, Vec<&'static str>) {
        let mut faults = Vec::new();
        let mut kinds = Vec::new();
        for _ in 0..r.range(1, 4) {
            let t = r.range(start, end.saturating_sub(SEC).max(start));
            let kind = WINDOW_RECIPES[r.range(0, WINDOW_RECIPES.len() as u64 - 1) as usize];
            let mut at = |f: Fault| faults.push((t, f));
            match kind {
                // A leader cut from one follower; the other follower, asked
                // by the new candidate, crashes before its promise is
                // durable and comes back while the old leader still sends.
                "deposed" => {
                    at(Fault::CutLeader {
                        duration: r.range(300 * MS, 1_500 * MS),
                    });
                    at(Fault::CrashInBallotPersist {
                        down_for: r.range(MS, 60 * MS),
                    });
                }
                // Three leaders in quick succession, each deposed with
                // requests of its own only it accepted: the leader's
                // outgoing links cut; the next cut off right after its
                // election; the third crashes just after its own and
                // restarts soon.
                "churn" => {
                    at(Fault::IsolateLeader {
                        nth: 0,
                        one_way: true,
                        duration: r.range(250 * MS, 500 * MS),
                    });
                    at(Fault::PauseLeader {
                        nth: 1,
                        duration: r.range(100 * MS, 400 * MS),
                    });
                    at(Fault::IsolateLeader {
                        nth: 1,
                        one_way: false,
                        duration: r.range(300 * MS, 700 * MS),
                    });
                    at(Fault::CrashLeader {
                        nth: 2,
                        after: r.range(5 * MS, 60 * MS),
                        down_for: r.range(5 * MS, 100 * MS),
                    });
                }
                // The same with stop-the-world pauses: the leader stops, the
                // next is stopped right after its election, the third
                // crashes just after its own and restarts soon.
                "churn-pauses" => {
                    at(Fault::PauseLeader {
                        nth: 0,
                        duration: r.range(200 * MS, 800 * MS),
                    });
                    at(Fault::PauseLeader {
                        nth: 1,
                        duration: r.range(200 * MS, 800 * MS),
                    });
                    at(Fault::CrashLeader {
                        nth: 2,
                        after: r.range(2 * MS, 40 * MS),
                        down_for: r.range(5 * MS, 150 * MS),
                    });
                }
                // The leader's messages to one follower slowed, then the
                // leader stopped: its last accepts arrive after a new
                // leader was elected.
                "late-accepts" => {
                    at(Fault::SlowLeaderLink {
                        extra: r.range(20 * MS, 300 * MS),
                        duration: r.range(300 * MS, 1_500 * MS),
                    });
                    at(Fault::PauseLeader {
                        nth: 0,
                        duration: r.range(200 * MS, 1_000 * MS),
                    });
                }
                // An election forced by a stopped leader, with the candidate
                // stopped during its election and the winner right after it.
                _ => {
                    at(Fault::PauseLeader {
                        nth: 0,
                        duration: r.range(200 * MS, 600 * MS),
                    });
                    at(Fault::PauseCandidate {
                        duration: r.range(20 * MS, 400 * MS),
                    });
                    at(Fault::PauseLeader {
                        nth: 1,
                        duration: r.range(5 * MS, 200 * MS),
                    });
                }
            }
            kinds.push(kind);
        }
        faults.sort_by_key(|(t, _)| *t);
        (faults, kinds)
    }

    /// Draws the fault schedule from the rates (pauses per replica, crashes,
    /// partitions), appended to the explicit `schedule`.
    pub fn plan(&self, r: &mut Rng) -> Vec<(Time, Fault)> {
        let mut out = self.schedule.clone();
        let window = self.fault_end.saturating_sub(self.fault_start);
        if window == 0 {
            return out;
        }
        let p = &self.pauses;
        let pause_len = |r: &mut Rng| {
            if r.chance(p.long_chance) {
                r.range(p.long_min, p.long_max)
            } else {
                r.range(p.min_pause, p.max_pause)
            }
        };
        if p.mean_interval > 0 {
            if p.correlated {
                let mut t = self.fault_start + r.exp(p.mean_interval as f64);
                while t < self.fault_end {
                    let d = pause_len(r);
                    for id in 0..self.n {
                        let skew = r.range(0, 20 * MS);
                        out.push((
                            t + skew,
                            Fault::Pause {
                                replica: id as ReplicaId,
                                duration: d,
                            },
                        ));
                    }
                    t += d + r.exp(p.mean_interval as f64);
                }
            } else {
                for id in 0..self.n {
                    let mut t = self.fault_start + r.exp(p.mean_interval as f64);
                    while t < self.fault_end {
                        let d = pause_len(r);
                        out.push((
                            t,
                            Fault::Pause {
                                replica: id as ReplicaId,
                                duration: d,
                            },
                        ));
                        t += d + r.exp(p.mean_interval as f64);
                    }
                }
            }
        }
        let events = |rate: f64, r: &mut Rng| -> Vec<Time> {
            let mut ts = Vec::new();
            if rate <= 0.0 {
                return ts;
            }
            let mut t = self.fault_start + r.exp(SEC as f64 / rate);
            while t < self.fault_end {
                ts.push(t);
                t += r.exp(SEC as f64 / rate);
            }
            ts
        };
        for t in events(self.crash_rate, r) {
            // Mostly one replica; sometimes a majority, sometimes all of them
            // at once (a power loss: only what was synced survives anywhere).
            let first = r.range(0, self.n as u64 - 1);
            let count = match r.range(0, 9) {
                0 | 1 => self.n as u64,
                2 | 3 => self.n as u64 / 2 + 1,
                _ => 1,
            };
            for k in 0..count {
                let replica = ((first + k) % self.n as u64) as ReplicaId;
                out.push((
                    t,
                    Fault::Crash {
                        replica,
                        down_for: r.range(50 * MS, 1_500 * MS),
                    },
                ));
            }
        }
        for t in events(self.partition_rate, r) {
            let duration = r.range(100 * MS, 2 * SEC);
            let a = r.range(0, self.n as u64 - 1) as ReplicaId;
            let fault = match r.range(0, 2) {
                0 => Fault::Isolate {
                    replica: a,
                    one_way: false,
                    duration,
                },
                1 => Fault::Isolate {
                    replica: a,
                    one_way: true,
                    duration,
                },
                _ => {
                    let b =
                        ((a as u64 + r.range(1, self.n as u64 - 1)) % self.n as u64) as ReplicaId;
                    Fault::CutLink { a, b, duration }
                }
            };
            out.push((t, fault));
        }
        out.sort_by_key(|(t, _)| *t);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_latency_is_uniform_by_default_and_follows_given_quantiles() {
        let mut s = Scenario::base("t");
        let (mut a, mut b) = (Rng::new(3), Rng::new(3));
        for _ in 0..100 {
            // The default draws exactly what it always drew.
            assert_eq!(s.disk_latency(&mut a), b.range(s.disk_min, s.disk_max));
        }
        s.disk_quantiles = vec![100, 200, 200, 1_000];
        let draws: Vec<Time> = (0..3_000).map(|_| s.disk_latency(&mut a)).collect();
        assert!(draws.iter().all(|d| (100..=1_000).contains(d)));
        // A third of the draws falls in each segment between quantiles.
        let low = draws.iter().filter(|d| **d < 200).count() as f64 / 3_000.0;
        let high = draws.iter().filter(|d| **d > 200).count() as f64 / 3_000.0;
        assert!(
            (low - 1.0 / 3.0).abs() < 0.05 && (high - 1.0 / 3.0).abs() < 0.05,
            "{low} {high}"
        );
    }

    #[test]
    fn every_named_scenario_and_profile_exists() {
        for n in Scenario::names() {
            assert!(Scenario::named(n).is_some(), "{n}");
        }
        for p in PauseProfile::names() {
            assert!(PauseProfile::preset(p).is_some(), "{p}");
        }
    }

    #[test]
    fn clients_register_by_default_and_a_name_suffix_makes_them_legacy() {
        for n in Scenario::names() {
            let s = Scenario::named(n).unwrap_or_else(|| unreachable!());
            assert!(!s.legacy_clients, "{n}");
            assert_eq!(Scenario::parse(n, 1), Some(s.clone()), "{n}");
            let l = Scenario::parse(&format!("{n}{LEGACY_SUFFIX}"), 1)
                .unwrap_or_else(|| unreachable!());
            assert!(l.legacy_clients, "{n}");
            assert_eq!(l.name, format!("{n}{LEGACY_SUFFIX}"));
            assert_eq!(
                Scenario {
                    legacy_clients: false,
                    name: s.name.clone(),
                    ..l
                },
                s,
                "{n}: nothing else differs"
            );
        }
        assert!(!Scenario::from_seed(5).legacy_clients && !Scenario::base("t").legacy_clients);
        assert_eq!(Scenario::parse("swarm", 5), Some(Scenario::from_seed(5)));
        // What `sim swarm [--legacy-clients]` prints for a seed names that
        // seed's scenario, and no other seed's.
        let mut l = Scenario::from_seed(5);
        l.set_legacy_clients();
        l.set_legacy_clients();
        assert!(
            l.name.ends_with(LEGACY_SUFFIX) && !l.name.ends_with("+legacy-clients+legacy-clients"),
            "{}",
            l.name
        );
        assert_eq!(Scenario::parse(&l.name, 5), Some(l.clone()));
        assert_eq!(Scenario::parse("swarm+legacy-clients", 5), Some(l.clone()));
        let other = (6..100)
            .find(|s| Scenario::from_seed(*s).name != Scenario::from_seed(5).name)
            .unwrap_or(6);
        assert_eq!(Scenario::parse(&l.name, other), None);
        assert_eq!(Scenario::parse("no-such+legacy-clients", 1), None);
    }

    #[test]
    fn plans_stay_in_the_fault_window_and_depend_only_on_the_seed() {
        let s = Scenario::named("chaos").unwrap_or_else(|| unreachable!());
        let a = s.plan(&mut Rng::new(9));
        assert_eq!(a, s.plan(&mut Rng::new(9)));
        assert!(!a.is_empty());
        assert!(a
            .iter()
            .all(|(t, _)| *t >= s.fault_start && *t < s.fault_end + 20 * MS));
        let kinds: std::collections::BTreeSet<&str> = a
            .iter()
            .map(|(_, f)| match f {
                Fault::Pause { .. } => "pause",
                Fault::Crash { .. } => "crash",
                Fault::Isolate { .. } => "isolate",
                Fault::CutLink { .. } | Fault::CutFromLeader { .. } => "cut",
                _ => "aimed at a window",
            })
            .collect();
        assert!(
            kinds.contains("pause") && kinds.contains("crash"),
            "{kinds:?}"
        );
        assert!(
            !kinds.contains("aimed at a window"),
            "named scenarios draw no window faults"
        );
    }

    #[test]
    fn a_share_of_the_swarm_draws_faults_aimed_at_windows_inside_the_fault_window() {
        let mut windowed = 0;
        for seed in 0..1_000 {
            let s = Scenario::from_seed(seed);
            let armed: Vec<&(Time, Fault)> =
                s.schedule.iter().filter(|(_, f)| f.is_armed()).collect();
            assert_eq!(
                s.name.contains("+windows("),
                !armed.is_empty(),
                "seed {seed}: {}",
                s.name
            );
            assert!(
                armed
                    .iter()
                    .all(|(t, _)| *t >= s.fault_start && *t < s.fault_end),
                "seed {seed}: {armed:?}"
            );
            windowed += usize::from(!armed.is_empty());
        }
        // WINDOW_SHARE of 1,000 seeds, give or take the draw.
        assert!((240..360).contains(&windowed), "{windowed} of 1,000 seeds");
    }
}

//! The fault schedule of a seed and the loop that applies it while the
//! simulation runs: a replica link held, a replica isolated from the
//! others, a client cut from a replica, a replica's crash (unsynced writes
//! lost, torn at 512-byte blocks when the plan says so) and restart, a
//! power loss of the whole cluster, and a supervisor that restarts a
//! replica that stopped itself (a disk error is fail-stop) unless it
//! refused to start on damaged acceptor state (left down, as an operator
//! would until it is rebuilt).
//!
//! Why links between replicas are held rather than cut: turmoil's TCP drops
//! the segments a partition meets without breaking the connection, and has
//! no retransmission, so the connection stalls for good once the partition
//! heals. Real TCP retransmits: to the replicas, a partition shorter than
//! TCP's give-up time (minutes) is data that arrives late, which is what a
//! hold is. Client links are cut for real: the client library's
//! per-attempt timeout drops a stalled connection and retries the same
//! `(client, seq)` elsewhere, which is the path under test there.

use std::time::Duration;

use rand_core::RngCore;
use rand_xoshiro::Xoshiro256PlusPlus;
use turmoil::Sim;

use crate::cluster::{host, Refused};

#[derive(Clone, Debug)]
pub enum Fault {
    /// Cut both directions between a replica and a client.
    Partition(String, String),
    /// Hold messages between two replicas (delivered on release).
    Hold(String, String),
    /// Hold every message between replica `i` and the other replicas.
    Isolate(usize),
    /// Crash replica `i` (unsynced writes lost).
    Crash(usize),
    /// Crash every replica at once.
    PowerLoss,
}

#[derive(Clone, Debug)]
pub struct Event {
    pub at: Duration,
    pub fault: Fault,
    /// How long until it is undone (repair, release, restart).
    pub lasts: Duration,
}

#[derive(Clone, Debug)]
pub struct Plan {
    pub events: Vec<Event>,
    pub torn_writes: bool,
    /// turmoil's injected I/O errors carry no OS error code
    /// (`io::Error::other`), so the replica's group commit treats them as
    /// fail-stop, not as the storage alarm's retryable ENOSPC/EDQUOT/EIO:
    /// the supervisor restarts the replica, as before the alarm existed.
    pub io_error_probability: f64,
    pub max_latency_ms: u64,
}

fn below(rng: &mut Xoshiro256PlusPlus, n: u64) -> u64 {
    rng.next_u64() % n.max(1)
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

impl Plan {
    pub fn none() -> Plan {
        Plan {
            events: Vec::new(),
            torn_writes: false,
            io_error_probability: 0.0,
            max_latency_ms: 5,
        }
    }

    /// Draws a plan: 2-8 faults in the first 5 s, each lasting 50 ms to
    /// 2 s; torn writes on most seeds; rare I/O errors on some.
    pub fn draw(rng: &mut Xoshiro256PlusPlus, replicas: usize) -> Plan {
        let replicas = replicas.max(2) as u64;
        let mut events = Vec::new();
        let n = 2 + below(rng, 7);
        for _ in 0..n {
            let at = ms(200 + below(rng, 5000));
            let lasts = ms(50 + below(rng, 1950));
            let a = below(rng, replicas) as usize;
            let b = (a + 1 + below(rng, replicas - 1) as usize) % replicas as usize;
            let fault = match below(rng, 10) {
                0..=1 => Fault::Isolate(a),
                2..=3 => Fault::Partition(host(a), format!("c{}", below(rng, 3))),
                4..=5 => Fault::Hold(host(a), host(b)),
                6..=8 => Fault::Crash(a),
                _ => Fault::PowerLoss,
            };
            events.push(Event { at, fault, lasts });
        }
        events.sort_by_key(|e| e.at);
        let torn_writes = below(rng, 4) != 0;
        let io_error_probability = if below(rng, 4) == 0 { 0.0002 } else { 0.0 };
        let max_latency_ms = 2 + below(rng, 4);
        Plan {
            events,
            torn_writes,
            io_error_probability,
            max_latency_ms,
        }
    }
}

/// What has to be undone, and when.
enum Undo {
    Repair(String, String),
    Release(String, String),
    Restart(Vec<usize>),
}

/// Applies faults and undoes them on time.
pub struct Driver {
    pending: Vec<Event>,
    undo: Vec<(Duration, Undo)>,
    /// Replicas crashed by the plan (the supervisor leaves them down).
    down: Vec<bool>,
    /// Replicas that refused to start on damaged state: never restarted
    /// (by the supervisor or the plan); `reported` once logged.
    refused: Refused,
    reported: Vec<bool>,
    pub applied: Vec<String>,
    /// When the cluster last changed (a fault applied or undone, a
    /// supervisor restart, a refusal noted): after [`Driver::heal`], the
    /// moment from which the liveness judge (`check::liveness`) counts.
    pub last_change: Duration,
}

impl Driver {
    pub fn new(plan: &Plan, refused: Refused) -> Driver {
        let mut pending = plan.events.clone();
        pending.reverse();
        let n = refused.borrow().len();
        Driver {
            pending,
            undo: Vec::new(),
            down: vec![false; n],
            refused,
            reported: vec![false; n],
            applied: Vec::new(),
            last_change: Duration::ZERO,
        }
    }

    fn refused(&self, i: usize) -> bool {
        self.refused.borrow()[i]
    }

    fn log(&mut self, now: Duration, what: String) {
        tracing::info!(target: "dsim", at_ms = now.as_millis() as u64, "{what}");
        self.applied.push(format!("{}ms {what}", now.as_millis()));
        self.last_change = now;
    }

    /// Called after every step: applies due faults and undoes expired ones.
    pub fn tick(&mut self, sim: &mut Sim<'_>, inject: bool) {
        let now = sim.elapsed();
        while inject && self.pending.last().is_some_and(|e| e.at <= now) {
            let Some(e) = self.pending.pop() else { break };
            let until = now + e.lasts;
            match e.fault {
                Fault::Partition(a, b) => {
                    sim.partition(a.as_str(), b.as_str());
                    self.log(now, format!("partition {a} {b}"));
                    self.undo.push((until, Undo::Repair(a, b)));
                }
                Fault::Hold(a, b) => {
                    sim.hold(a.as_str(), b.as_str());
                    self.log(now, format!("hold {a} {b}"));
                    self.undo.push((until, Undo::Release(a, b)));
                }
                Fault::Isolate(i) => {
                    self.log(now, format!("isolate r{i}"));
                    for j in (0..self.down.len()).filter(|j| *j != i) {
                        sim.hold(host(i).as_str(), host(j).as_str());
                        self.undo.push((until, Undo::Release(host(i), host(j))));
                    }
                }
                Fault::Crash(i) => {
                    if !self.down[i] {
                        sim.crash(host(i).as_str());
                        self.down[i] = true;
                        self.log(now, format!("crash r{i}"));
                        self.undo.push((until, Undo::Restart(vec![i])));
                    }
                }
                Fault::PowerLoss => {
                    let up: Vec<usize> = (0..self.down.len()).filter(|i| !self.down[*i]).collect();
                    for &i in &up {
                        sim.crash(host(i).as_str());
                        self.down[i] = true;
                    }
                    self.log(now, format!("power loss {up:?}"));
                    self.undo.push((until, Undo::Restart(up)));
                }
            }
        }
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.undo)
            .into_iter()
            .partition(|(t, _)| *t <= now || !inject);
        self.undo = later;
        for (_, u) in due {
            self.undo_one(sim, now, u);
        }
        // The supervisor: a replica that stopped itself restarts after a
        // second (checked once per 100 ms of simulated time).
        if now.as_millis() % 100 == 0 {
            for i in 0..self.down.len() {
                if self.refused(i) {
                    if !self.reported[i] {
                        self.reported[i] = true;
                        self.log(now, format!("r{i} refused: damaged state"));
                    }
                    continue;
                }
                if !self.down[i] && !sim.is_host_running(host(i).as_str()) {
                    sim.bounce(host(i).as_str());
                    self.log(now, format!("supervisor restarts r{i}"));
                }
            }
        }
    }

    fn undo_one(&mut self, sim: &mut Sim<'_>, now: Duration, u: Undo) {
        match u {
            Undo::Repair(a, b) => {
                sim.repair(a.as_str(), b.as_str());
                self.log(now, format!("repair {a} {b}"));
            }
            Undo::Release(a, b) => {
                sim.release(a.as_str(), b.as_str());
                self.log(now, format!("release {a} {b}"));
            }
            Undo::Restart(rs) => {
                for i in rs {
                    self.down[i] = false;
                    if self.refused(i) {
                        continue;
                    }
                    sim.bounce(host(i).as_str());
                    self.log(now, format!("restart r{i}"));
                }
            }
        }
    }

    /// Undoes every fault still in force: the network heals and every
    /// replica runs.
    pub fn heal(&mut self, sim: &mut Sim<'_>) {
        self.tick(sim, false);
    }
}

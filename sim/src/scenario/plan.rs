//! A scenario's fault rates drawn into the schedule of one run: pauses per
//! replica (or correlated), crashes (one replica, a majority or all),
//! partitions (isolation, one-way, one link), added to its explicit
//! schedule.

use stutter_core::{ReplicaId, Time};

use super::{Fault, Scenario, MS, SEC};
use crate::rng::Rng;

impl Scenario {
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

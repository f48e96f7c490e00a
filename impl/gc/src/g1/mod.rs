//! A G1-like collector: generational and region-based, as Java's default
//! (OpenJDK 17's G1, whose rules `policy.rs` follows).
//!
//! New objects go to eden. When eden reaches the size the policy chose,
//! the world stops for a young collection: what is still reachable in the
//! young generation is copied (the cost grows with the bytes copied,
//! shared by the parallel GC threads, one per core) into survivor space
//! one age older, or into the old generation once old enough or when
//! survivor space overflows (`survivors.rs`). What became unreachable
//! before the collection is not copied. The policy then sizes the next
//! eden: the largest whose predicted pause fits the pause-time goal,
//! within what the old generation and the reserve leave.
//!
//! Old objects that die (an overwritten value, trimmed log entries) stay
//! in the old generation as garbage until it is marked: once old occupancy
//! passes the initiating threshold (adaptive IHOP), a concurrent mark runs
//! on the concurrent GC threads, ended by two short pauses (remark,
//! cleanup); the following young collections are mixed, each also
//! evacuating a share of the old garbage found. When the free space cannot
//! hold even the minimum young generation (the old generation filled
//! faster than marking and mixed collections could reclaim it), the world
//! stops for a full collection that compacts the whole live heap.
//! Concurrent refinement (the remembered sets' upkeep as old objects are
//! written) costs CPU in proportion to what is allocated; it is charged to
//! the allocating work.
//!
//! What is left out: region granularity beyond the region size (eden and
//! the generations are byte counts), humongous objects, the MMU tracker's
//! lower bound on eden, and mixed collections' per-region choice (each
//! reclaims an equal share of the garbage marked).

mod policy;
mod predict;
mod survivors;

use serde::{Deserialize, Serialize};

use crate::stats::Stats;
use crate::{cost, Alloc, Event, Phase, Time};
use policy::{Costs, HeapState, Ihop, Policy};
use survivors::Young;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct G1Params {
    /// The maximum heap (-Xmx), bytes.
    pub heap_size: u64,
    /// Young generation bounds as shares of the heap (G1NewSizePercent,
    /// G1MaxNewSizePercent: 5 % and 60 %).
    pub young_min: f64,
    pub young_max: f64,
    /// Heap kept free for evacuation (G1ReservePercent).
    pub reserve: f64,
    /// The pause-time goal the young generation is sized for
    /// (MaxGCPauseMillis), µs.
    pub max_pause_us: Time,
    /// The predictions' margin, in deviations (G1ConfidencePercent / 100).
    pub confidence: f64,
    /// Old occupancy, as a share of the heap, that starts a concurrent
    /// mark before adaptive IHOP has samples, or always without it
    /// (InitiatingHeapOccupancyPercent).
    pub ihop: f64,
    /// G1UseAdaptiveIHOP.
    pub adaptive_ihop: bool,
    /// Heap the adaptive IHOP never plans to fill (G1HeapWastePercent).
    pub heap_waste: f64,
    /// Survivor space as a share of the young generation (1 /
    /// SurvivorRatio), and the share of it the tenuring threshold aims to
    /// fill (TargetSurvivorRatio).
    pub survivor_share: f64,
    pub target_survivor: f64,
    /// Young collection: fixed CPU µs, and CPU µs per MiB copied (measured).
    pub young_fixed_us: f64,
    pub copy_us_per_mib: f64,
    /// Concurrent mark CPU µs per MiB of old live data (measured).
    pub mark_us_per_mib: f64,
    /// Remark and cleanup pauses, wall µs (measured).
    pub remark_us: Time,
    pub cleanup_us: Time,
    /// Mixed collections after a mark (G1MixedGCCountTarget), and the
    /// live share above which an old region is not worth evacuating
    /// (G1MixedGCLiveThresholdPercent).
    pub mixed_count: u32,
    pub mixed_live_threshold: f64,
    /// Full collection: fixed CPU µs and CPU µs per MiB live (measured).
    pub full_fixed_us: f64,
    pub full_us_per_mib: f64,
    /// Concurrent refinement: CPU µs per MiB allocated (measured).
    pub refine_us_per_mib: f64,
    /// Coordinated mode: the share of the young target eden reaches when
    /// a young collection is announced as due. The rest of eden is the
    /// time the service has to grant it before eden fills and the runtime
    /// collects on its own.
    pub young_due: f64,
}

impl Default for G1Params {
    fn default() -> Self {
        use crate::calibration as c;
        G1Params {
            heap_size: 1 << 30,
            young_min: 0.05,
            young_max: 0.60,
            reserve: 0.10,
            max_pause_us: 200_000,
            confidence: 0.5,
            ihop: 0.45,
            adaptive_ihop: true,
            heap_waste: 0.05,
            survivor_share: 1.0 / 8.0,
            target_survivor: 0.5,
            young_fixed_us: c::G1_YOUNG_FIXED_US,
            copy_us_per_mib: c::G1_COPY_US_PER_MIB,
            mark_us_per_mib: c::G1_MARK_US_PER_MIB,
            remark_us: c::G1_REMARK_US,
            cleanup_us: c::G1_CLEANUP_US,
            mixed_count: 8,
            mixed_live_threshold: 0.85,
            full_fixed_us: c::G1_FULL_FIXED_US,
            full_us_per_mib: c::G1_FULL_US_PER_MIB,
            refine_us_per_mib: c::G1_REFINE_US_PER_MIB,
            young_due: 0.75,
        }
    }
}

enum Old {
    Idle,
    /// Concurrent mark: CPU µs left.
    Marking {
        remaining: f64,
        started: Time,
    },
    /// Mixed collections left, and old garbage each reclaims.
    Mixed {
        left: u32,
        per_gc: f64,
    },
}

pub(crate) struct G1Heap {
    p: G1Params,
    cores: f64,
    /// Bytes allocated in eden since the last young collection.
    eden: f64,
    /// Eden bytes the policy allows before the next young collection.
    young_target: f64,
    /// The eden the pause goal alone would allow (adaptive IHOP's buffer).
    unrestrained: f64,
    young: Young,
    /// Bytes reachable only because requests are being handled now.
    in_flight: f64,
    /// Old generation occupancy: old live data and old garbage.
    old_used: f64,
    /// Long-lived bytes reachable now (the driver's account of its state).
    live: f64,
    old: Old,
    policy: Policy,
    ihop: Ihop,
    /// End of the last collection (mutator time runs from there).
    last_gc_end: Time,
    /// Refinement µs not yet charged (fractions of a µs add up).
    refine_carry: f64,
    pub(crate) pending: Vec<Event>,
    last: Time,
    /// Coordinated mode, and whether a full or a young collection is due
    /// (announced, not yet granted).
    pub(crate) coordinated: bool,
    due: bool,
    young_due: bool,
    /// Share of a core each of the process's threads gets (1 unless its
    /// host's cores are shared with other processes).
    pub(crate) share: f64,
}

impl G1Heap {
    pub(crate) fn new(p: G1Params, cores: f64, live: u64, now: Time) -> G1Heap {
        let ihop = Ihop::new(
            p.ihop,
            p.adaptive_ihop,
            p.reserve,
            p.heap_waste,
            p.confidence,
        );
        let mut h = G1Heap {
            p,
            cores,
            eden: 0.0,
            young_target: 0.0,
            unrestrained: 0.0,
            young: Young::new(),
            in_flight: 0.0,
            // The initial data was loaded long ago: it is old.
            old_used: live as f64,
            live: live as f64,
            old: Old::Idle,
            policy: Policy::new(),
            ihop,
            last_gc_end: now,
            refine_carry: 0.0,
            pending: Vec::new(),
            last: now,
            coordinated: false,
            due: false,
            young_due: false,
            share: 1.0,
        };
        h.size_young();
        h
    }

    fn heap_size(&self) -> f64 {
        self.p.heap_size as f64
    }

    fn min_young(&self) -> f64 {
        self.p.young_min * self.heap_size()
    }

    /// Free space beyond the minimum young generation; negative when the
    /// old generation leaves less than the minimum (a full collection).
    fn young_room(&self) -> f64 {
        self.heap_size() - self.old_used - self.young.survivors() - self.min_young()
    }

    fn size_young(&mut self) {
        let h = HeapState {
            heap: self.heap_size(),
            old_used: self.old_used,
            survivors: self.young.survivors(),
            threads: self.cores.round().max(1.0),
        };
        let c = Costs {
            fixed_us: self.p.young_fixed_us,
            copy_us_per_mib: self.p.copy_us_per_mib,
            max_pause_us: self.p.max_pause_us as f64,
            young_min: self.p.young_min,
            young_max: self.p.young_max,
            reserve: self.p.reserve,
            sigma: self.p.confidence,
        };
        let s = self
            .policy
            .size(&h, &c, matches!(self.old, Old::Mixed { .. }));
        self.young_target = s.eden;
        self.unrestrained = s.unrestrained;
    }

    /// Young collections so far (the age of young bytes counts in them).
    pub(crate) fn epoch(&self) -> u64 {
        self.young.epoch
    }

    /// Eden bytes the policy allows before the next young collection.
    pub(crate) fn young_target(&self) -> u64 {
        self.young_target as u64
    }

    pub(crate) fn set_in_flight(&mut self, bytes: u64) {
        self.in_flight = bytes as f64;
    }

    /// Concurrent GC threads (ConcGCThreads = max((ParallelGCThreads + 2) / 4, 1)).
    fn conc_threads(&self) -> f64 {
        ((self.cores.round() + 2.0) / 4.0).floor().max(1.0)
    }

    pub(crate) fn mutator_cores(&self) -> f64 {
        match self.old {
            // With as many runnable threads as cores, the scheduler shares
            // the cores: the mutator keeps cores - conc when it can, and at
            // least its fair share of the time otherwise.
            Old::Marking { .. } => {
                let conc = self.conc_threads();
                (self.cores - conc).max(self.cores * self.cores / (self.cores + conc))
            }
            _ => self.cores,
        }
    }

    /// Cores the concurrent mark keeps busy now.
    pub(crate) fn concurrent_cores(&self) -> f64 {
        match self.old {
            Old::Marking { .. } => (self.cores - self.mutator_cores()) * self.share,
            _ => 0.0,
        }
    }

    pub(crate) fn live(&self) -> u64 {
        self.live as u64
    }

    pub(crate) fn heap(&self) -> u64 {
        (self.old_used + self.eden + self.young.survivors()) as u64
    }

    pub(crate) fn next_wakeup(&self) -> Option<Time> {
        let Old::Marking { remaining, .. } = self.old else {
            return None;
        };
        let rate = self.concurrent_cores();
        Some(self.last + (remaining / rate).ceil().max(1.0) as Time)
    }

    fn pause(&mut self, now: Time, duration: Time, phase: Phase, stats: &mut Stats) {
        self.pending.push(Event::Pause { duration, phase });
        stats.pause(now, duration, phase, self.cores);
    }

    /// Parallel work of `cpu` µs over every core, as a pause.
    fn parallel(&self, cpu: f64) -> Time {
        (cpu / self.cores.max(1.0)).ceil() as Time
    }

    pub(crate) fn advance(&mut self, now: Time, _mutator_busy: f64, stats: &mut Stats) {
        if now <= self.last {
            return;
        }
        if let Old::Marking { remaining, started } = self.old {
            let rate = self.concurrent_cores();
            let dt = (now - self.last) as f64;
            if rate * dt < remaining {
                self.old = Old::Marking {
                    remaining: remaining - rate * dt,
                    started,
                };
                stats.background_us += rate * dt;
                stats.spread(self.last, now, rate * dt);
            } else {
                let end = (self.last + (remaining / rate).ceil() as Time).clamp(self.last + 1, now);
                stats.background_us += remaining;
                stats.spread(self.last, end, remaining);
                stats.active_us += end.saturating_sub(started) as f64;
                self.ihop
                    .marking(end.saturating_sub(started) as f64 / 1_000_000.0);
                self.finish_mark(end, stats);
            }
        }
        self.last = now;
    }

    fn finish_mark(&mut self, now: Time, stats: &mut Stats) {
        self.pause(now, self.p.remark_us, Phase::Remark, stats);
        self.pause(now, self.p.cleanup_us, Phase::Cleanup, stats);
        // Mixed collections take only regions whose live share is below
        // G1MixedGCLiveThresholdPercent, and none at all when what they
        // could reclaim is below G1HeapWastePercent of the heap. Old
        // garbage here is spread over the old regions (overwritten values
        // of keys written at random), so every region's live share is the
        // old generation's.
        let garbage = (self.old_used - self.old_live()).max(0.0);
        let live_share = if self.old_used > 0.0 {
            self.old_live() / self.old_used
        } else {
            1.0
        };
        let n = self.p.mixed_count.max(1);
        self.old = if live_share < self.p.mixed_live_threshold
            && garbage >= self.p.heap_waste * self.heap_size()
        {
            Old::Mixed {
                left: n,
                per_gc: garbage / n as f64,
            }
        } else {
            Old::Idle
        };
        self.size_young();
    }

    /// Long-lived data in the old generation: everything live but what is
    /// still young.
    fn old_live(&self) -> f64 {
        (self.live - self.young.eden_live - self.young.long_lived()).max(0.0)
    }

    /// Long-lived bytes born at young epoch `born` became unreachable.
    pub(crate) fn release(&mut self, bytes: u64, born: Option<u64>) {
        self.live = (self.live - bytes as f64).max(0.0);
        // What was young is simply not copied; the rest is old garbage,
        // which stays in `old_used` until marked and reclaimed.
        if let Some(born) = born {
            self.young.release(bytes as f64, born);
        }
    }

    pub(crate) fn allocate(&mut self, now: Time, a: Alloc, stats: &mut Stats) -> Time {
        self.live = (self.live + a.retained as f64 - a.released as f64).max(0.0);
        self.young.eden_live += a.retained as f64;
        self.eden += a.bytes as f64;
        // Refinement: cards the allocation's stores dirtied are refined
        // by the allocating threads and the refinement threads alike.
        let refine = cost(a.bytes as f64, self.p.refine_us_per_mib);
        stats.refine_us += refine;
        stats.at(now, refine);
        let charged = (refine + self.refine_carry).floor();
        self.refine_carry += refine - charged;
        if self.eden >= self.young_target {
            self.young_collection(now, stats);
        } else if self.coordinated
            && !self.due
            && !self.young_due
            && self.eden >= self.p.young_due * self.young_target
        {
            // A young pause is tens of milliseconds at this heap's copy
            // cost: worth a round trip to schedule (Blade coordinates any
            // collection longer than the service's tolerance).
            self.young_due = true;
            self.pending.push(Event::Due {
                headroom: (self.young_target - self.eden) as u64,
            });
        }
        charged as Time
    }

    /// A young (or mixed) collection forced by a full eden.
    fn young_collection(&mut self, now: Time, stats: &mut Stats) {
        self.young_collection_as(now, false, stats)
    }

    /// A young (or mixed) collection; `granted`: inside a pause the
    /// service granted, so a full collection the old generation makes due
    /// runs at once in the same pause instead of being announced (a Due
    /// raised while the service still counts this one as collecting would
    /// not be heard).
    fn young_collection_as(&mut self, now: Time, granted: bool, stats: &mut Stats) {
        // Whether granted or forced by a full eden, the due one is done.
        self.young_due = false;
        stats.cycles += 1;
        let mixed = matches!(self.old, Old::Mixed { .. });
        // Survivor space is a share of the young generation G1 planned.
        let young_len = self.young_target + self.young.survivors();
        let capacity = young_len * self.p.survivor_share;
        let ev = self
            .young
            .collect(self.in_flight, capacity, capacity * self.p.target_survivor);
        let mut cpu = self.p.young_fixed_us + cost(ev.copied, self.p.copy_us_per_mib);
        stats.copied += ev.copied;
        stats.promoted += ev.promoted;
        self.old_used += ev.promoted;
        self.policy.observe(self.eden, ev.from_eden);
        self.eden = 0.0;
        let mut phase = Phase::Young;
        if let Old::Mixed { left, per_gc } = self.old {
            // The regions chosen hold `per_gc` of garbage; their live part
            // is copied, in the proportion old data is live.
            let old_live = self.old_live();
            let live_ratio = if self.old_used > 0.0 {
                (old_live / self.old_used).min(0.95)
            } else {
                0.0
            };
            let copied = per_gc * live_ratio / (1.0 - live_ratio);
            cpu += cost(copied, self.p.copy_us_per_mib);
            stats.copied += copied;
            self.old_used = (self.old_used - per_gc).max(old_live);
            self.old = if left > 1 {
                Old::Mixed {
                    left: left - 1,
                    per_gc,
                }
            } else {
                Old::Idle
            };
            phase = Phase::Mixed;
        }
        let pause = self.parallel(cpu);
        self.pause(now, pause, phase, stats);
        stats.active_us += pause as f64;
        let at = now + pause;
        if !mixed {
            // Adaptive IHOP learns the old generation's growth from the
            // young-only collections.
            let secs = now.saturating_sub(self.last_gc_end) as f64 / 1_000_000.0;
            self.ihop.young_only(secs, ev.promoted, self.unrestrained);
        }
        self.last_gc_end = at;
        let threshold = self.ihop.threshold(self.heap_size());
        let start_mark = matches!(self.old, Old::Idle) && self.old_used >= threshold;
        if self.young_room() < 0.0 {
            self.due = false;
            self.full_collection(at, stats);
        } else if granted && start_mark {
            self.due = false;
            self.full_collection_as(at, Phase::Coordinated, stats);
        } else if self.coordinated && start_mark {
            // Instead of a concurrent cycle, a full collection when the
            // service allows, before the old generation forces one.
            if !self.due {
                self.due = true;
                self.pending.push(Event::Due {
                    headroom: self.young_room().max(0.0) as u64,
                });
            }
        } else if start_mark {
            stats.cycles += 1;
            let remaining = cost(self.old_live(), self.p.mark_us_per_mib);
            self.old = Old::Marking {
                remaining,
                started: at,
            };
        }
        self.size_young();
    }

    /// The coordinated collection: a full one on every core when the old
    /// generation is due (it empties eden too), else the young one.
    pub(crate) fn collect_now(&mut self, now: Time, stats: &mut Stats) -> bool {
        if std::mem::take(&mut self.due) {
            self.young_due = false;
            self.full_collection_as(now, Phase::Coordinated, stats);
            self.size_young();
            return true;
        }
        if self.young_due {
            self.young_collection_as(now, true, stats);
            return true;
        }
        false
    }

    /// A full collection asked for (`Collector::request_full`).
    pub(crate) fn request_full(&mut self, now: Time, stats: &mut Stats) -> bool {
        if self.coordinated {
            if !self.due {
                self.due = true;
                self.pending.push(Event::Due {
                    headroom: self.young_room().max(0.0) as u64,
                });
            }
            return true;
        }
        self.young_due = false;
        self.full_collection(now, stats);
        self.size_young();
        true
    }

    fn full_collection(&mut self, now: Time, stats: &mut Stats) {
        self.full_collection_as(now, Phase::Full, stats)
    }

    fn full_collection_as(&mut self, now: Time, phase: Phase, stats: &mut Stats) {
        stats.cycles += 1;
        let cpu = self.p.full_fixed_us + cost(self.live, self.p.full_us_per_mib);
        let pause = self.parallel(cpu);
        self.pause(now, pause, phase, stats);
        stats.active_us += pause as f64;
        self.old_used = self.live;
        self.eden = 0.0;
        self.young.clear();
        self.old = Old::Idle;
        self.last_gc_end = now + pause;
    }
}
#[cfg(test)]
mod tests;

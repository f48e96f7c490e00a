//! A Go-like collector: concurrent mark-sweep, paced.
//!
//! After a cycle has marked `marked` bytes live, the heap may grow to a goal
//! of `marked × (1 + GOGC/100)`, or to the soft memory limit if that is
//! lower. The pacer starts the next cycle part-way there (the trigger), so
//! that marking can finish before the goal. A cycle is a short
//! stop-the-world phase (sweep termination), concurrent marking of the live
//! heap, and a second short stop-the-world phase (mark termination).
//! Marking is done by dedicated workers holding a quarter of the cores, by
//! otherwise idle cores, and by the mutator itself: work that allocates
//! while marking is behind must mark in proportion to what it allocates
//! (an assist), so that marking finishes before the heap overruns its hard
//! goal. Near the memory limit the goal sits at the live heap: cycles run
//! back to back and assists take over the mutator (the death spiral the
//! seed paper saw at 5 GiB), until a CPU limiter (a leaky bucket, as in Go
//! since 1.19) turns assists off when the collector has taken more than
//! half the CPU for a while, letting the heap overrun the limit instead.
//!
//! What is left out: sweeping (cheap and concurrent), goroutine stacks and
//! globals as roots (in `mark_fixed_us`), the pacer's feedback loop (the
//! trigger is a fixed fraction of the runway), and scavenging.

use serde::{Deserialize, Serialize};

use crate::stats::Stats;
use crate::{cost, Alloc, Event, Phase, Time};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GoParams {
    /// GOGC: the heap may grow by this percentage of the marked live heap
    /// between cycles; `None` is GOGC=off (only the memory limit paces).
    pub gogc: Option<u32>,
    /// GOMEMLIMIT: a soft limit on the heap, bytes.
    pub memory_limit: Option<u64>,
    /// The smallest goal growth at GOGC=100 (Go: 4 MiB).
    pub heap_minimum: u64,
    /// Where between the marked heap and the goal a cycle starts.
    pub trigger_fraction: f64,
    /// Share of the cores taken by dedicated mark workers (Go: 25 %).
    pub background_utilization: f64,
    /// CPU µs to mark (and sweep) one MiB of live heap, by live heap size:
    /// `(MiB live, µs per MiB)` points, interpolated log-log (measured: the
    /// cost per MiB grows with the heap, as marking misses caches more).
    pub mark_us_per_mib: Vec<(f64, f64)>,
    /// CPU µs of marking per cycle whatever the heap (roots, stacks).
    pub mark_fixed_us: f64,
    /// Stop-the-world phases, wall µs (measured).
    pub sweep_termination_us: Time,
    pub mark_termination_us: Time,
    /// Above this share of the CPU for a while, assists stop (Go: 50 %).
    pub cpu_limit: f64,
    /// How long ("a while") in CPU µs per core the collector may exceed
    /// `cpu_limit` before the limiter acts (Go: one CPU-second per P).
    pub limiter_capacity_us: f64,
    /// The heap may overrun the goal by this factor while marking (Go: 1.1).
    pub hard_goal_factor: f64,
    /// Share of the memory limit the heap goal may use, by the limit:
    /// `(MiB of limit, share)` points, interpolated log-log; the rest is the
    /// runtime's memory that is not objects (measured: 0.85 at 100 MiB,
    /// 0.89 at 1.5 GiB).
    pub heap_share_of_limit: Vec<(f64, f64)>,
}

impl Default for GoParams {
    fn default() -> Self {
        GoParams {
            gogc: Some(100),
            memory_limit: None,
            heap_minimum: 4 << 20,
            trigger_fraction: crate::calibration::GO_TRIGGER_FRACTION,
            background_utilization: 0.25,
            mark_us_per_mib: crate::calibration::GO_MARK_US_PER_MIB.to_vec(),
            mark_fixed_us: crate::calibration::GO_MARK_FIXED_US,
            sweep_termination_us: crate::calibration::GO_SWEEP_TERMINATION_US,
            mark_termination_us: crate::calibration::GO_MARK_TERMINATION_US,
            cpu_limit: 0.5,
            limiter_capacity_us: 1_000_000.0,
            hard_goal_factor: 1.1,
            heap_share_of_limit: crate::calibration::GO_HEAP_SHARE_OF_LIMIT.to_vec(),
        }
    }
}

impl GoParams {
    /// The marking cost of the collector before Green Tea
    /// (`GOEXPERIMENT=nogreenteagc`; Go up to 1.25, the seed paper's 1.19).
    pub fn classic_mark() -> Vec<(f64, f64)> {
        crate::calibration::GO_MARK_CLASSIC_US_PER_MIB.to_vec()
    }

    /// The marking cost of Go 1.26's default collector (Green Tea).
    pub fn green_tea_mark() -> Vec<(f64, f64)> {
        crate::calibration::GO_MARK_US_PER_MIB.to_vec()
    }
}

struct Mark {
    /// CPU µs of marking left.
    remaining: f64,
    /// Bytes allocated since the cycle began: they survive it (allocated
    /// black), so the next cycle finds them as garbage.
    allocated: f64,
    /// Marking done by the collector's workers and not yet set against
    /// the mutator's allocation: an allocation owes marking in proportion
    /// to its bytes, and only what this credit does not cover is assisted.
    credit: f64,
    started: Time,
}

pub(crate) struct GoHeap {
    p: GoParams,
    cores: f64,
    /// Bytes in the heap: live and not yet collected.
    heap: f64,
    /// Bytes reachable now (the driver's account of its state).
    live: f64,
    goal: f64,
    trigger: f64,
    mark: Option<Mark>,
    pub(crate) pending: Vec<Event>,
    last: Time,
    /// Cores the mutator kept busy since `last`.
    busy: f64,
    /// The CPU limiter's bucket: collector CPU above `cpu_limit`, µs.
    bucket: f64,
    /// Coordinated mode (`Collector::set_coordinated`), and whether a
    /// collection is due and waiting for the service.
    pub(crate) coordinated: bool,
    due: bool,
    /// Share of a core each of the process's threads gets (1 unless its
    /// host's cores are shared with other processes).
    pub(crate) share: f64,
}

impl GoHeap {
    pub(crate) fn new(p: GoParams, cores: f64, live: u64, now: Time) -> GoHeap {
        let mut h = GoHeap {
            p,
            cores,
            heap: live as f64,
            live: live as f64,
            goal: 0.0,
            trigger: 0.0,
            mark: None,
            pending: Vec::new(),
            last: now,
            busy: 0.0,
            bucket: 0.0,
            coordinated: false,
            due: false,
            share: 1.0,
        };
        h.pace(live as f64);
        h
    }

    /// The heap the memory limit leaves for objects.
    fn heap_limit(&self, limit: u64) -> f64 {
        let share = crate::interpolate_log(&self.p.heap_share_of_limit, limit as f64 / crate::MIB);
        limit as f64 * share
    }

    /// Sets goal and trigger after a cycle that found `marked` bytes live.
    fn pace(&mut self, marked: f64) {
        let growth = match self.p.gogc {
            Some(g) => {
                (marked * g as f64 / 100.0).max(self.p.heap_minimum as f64 * g as f64 / 100.0)
            }
            None => f64::INFINITY,
        };
        let mut goal = marked + growth;
        if let Some(limit) = self.p.memory_limit {
            goal = goal.min(self.heap_limit(limit));
        }
        self.goal = goal;
        self.trigger = marked + self.p.trigger_fraction * (goal - marked).max(0.0);
    }

    fn dedicated(&self) -> f64 {
        self.p.background_utilization * self.cores
    }

    fn limited(&self) -> bool {
        self.bucket >= self.p.limiter_capacity_us * self.cores
    }

    pub(crate) fn mutator_cores(&self) -> f64 {
        if self.mark.is_some() {
            self.cores - self.dedicated()
        } else {
            self.cores
        }
    }

    pub(crate) fn live(&self) -> u64 {
        self.live as u64
    }

    pub(crate) fn heap(&self) -> u64 {
        self.heap as u64
    }

    fn mark_rate(&self) -> f64 {
        let idle = (self.cores - self.dedicated() - self.busy).max(0.0);
        (self.dedicated() + idle) * self.share
    }

    /// Cores the concurrent mark keeps busy now.
    pub(crate) fn concurrent_cores(&self) -> f64 {
        if self.mark.is_some() {
            self.mark_rate()
        } else {
            0.0
        }
    }

    pub(crate) fn next_wakeup(&self) -> Option<Time> {
        let m = self.mark.as_ref()?;
        let rate = self.mark_rate();
        Some(self.last + (m.remaining / rate).ceil().max(1.0) as Time)
    }

    fn pause(&mut self, now: Time, duration: Time, phase: Phase, stats: &mut Stats) {
        self.pending.push(Event::Pause { duration, phase });
        stats.pause(now, duration, phase, self.cores);
    }

    fn start_cycle(&mut self, now: Time, stats: &mut Stats) {
        stats.cycles += 1;
        self.pause(
            now,
            self.p.sweep_termination_us,
            Phase::SweepTermination,
            stats,
        );
        let per_mib = crate::interpolate_log(&self.p.mark_us_per_mib, self.live / crate::MIB);
        let remaining = self.p.mark_fixed_us + cost(self.live, per_mib);
        self.mark = Some(Mark {
            remaining,
            allocated: 0.0,
            credit: 0.0,
            started: now,
        });
    }

    fn finish_mark(&mut self, now: Time, stats: &mut Stats) {
        let Some(m) = self.mark.take() else { return };
        self.pause(
            now,
            self.p.mark_termination_us,
            Phase::MarkTermination,
            stats,
        );
        stats.active_us += now.saturating_sub(m.started) as f64;
        // What was live at the end of marking stays, and so does everything
        // allocated during it; the rest is swept.
        self.heap = (self.live + m.allocated).min(self.heap);
        self.pace(self.live);
        if self.heap >= self.trigger {
            self.start_cycle(now, stats);
        }
    }

    /// The coordinated collection: the whole live heap marked with the
    /// world stopped on every core; everything else is freed.
    pub(crate) fn collect_now(&mut self, now: Time, stats: &mut Stats) -> bool {
        if !std::mem::take(&mut self.due) || self.mark.is_some() {
            return false;
        }
        stats.cycles += 1;
        let per_mib = crate::interpolate_log(&self.p.mark_us_per_mib, self.live / crate::MIB);
        let cpu = self.p.mark_fixed_us + cost(self.live, per_mib);
        let pause = (cpu / self.cores.max(1.0)).ceil() as Time
            + self.p.sweep_termination_us
            + self.p.mark_termination_us;
        self.pause(now, pause, Phase::Coordinated, stats);
        stats.active_us += pause as f64;
        self.heap = self.live;
        self.pace(self.live);
        true
    }

    /// A full collection asked for (`Collector::request_full`).
    pub(crate) fn request_full(&mut self, now: Time, stats: &mut Stats) -> bool {
        if self.mark.is_some() {
            return false;
        }
        if self.coordinated {
            if !self.due {
                self.due = true;
                self.pending.push(Event::Due {
                    headroom: (self.goal - self.heap).max(0.0) as u64,
                });
            }
            return true;
        }
        self.due = true;
        self.collect_now(now, stats)
    }

    pub(crate) fn advance(&mut self, now: Time, mutator_busy: f64, stats: &mut Stats) {
        while now > self.last {
            let dt = (now - self.last) as f64;
            let Some(m) = self.mark.as_ref() else {
                self.bucket = (self.bucket - self.p.cpu_limit * self.cores * dt).max(0.0);
                self.last = now;
                break;
            };
            let rate = self.mark_rate();
            let dedicated = (self.dedicated() * self.share).min(rate);
            let remaining = m.remaining;
            if rate * dt < remaining {
                self.account(self.last, now, dedicated, rate - dedicated, stats);
                if let Some(m) = self.mark.as_mut() {
                    m.remaining -= rate * dt;
                    m.credit += rate * dt;
                }
                self.last = now;
                break;
            }
            // Marking completes within this interval; a next cycle may
            // start at once and run in the rest of it.
            let end = self.last + (remaining / rate).ceil() as Time;
            let end = end.clamp(self.last + 1, now);
            self.account(self.last, end, dedicated, rate - dedicated, stats);
            self.last = end;
            self.finish_mark(end, stats);
        }
        self.busy = mutator_busy.max(0.0);
    }

    /// Concurrent work at `dedicated` + `idle` cores over `[from, to)`.
    fn account(&mut self, from: Time, to: Time, dedicated: f64, idle: f64, stats: &mut Stats) {
        let dt = to.saturating_sub(from) as f64;
        stats.background_us += dedicated * dt;
        stats.idle_us += idle * dt;
        stats.spread(from, to, (dedicated + idle) * dt);
        let over = (dedicated + idle - self.p.cpu_limit * self.cores) * dt;
        self.bucket = (self.bucket + over).max(0.0);
    }

    pub(crate) fn release(&mut self, bytes: u64) {
        self.live = (self.live - bytes as f64).max(0.0);
    }

    pub(crate) fn allocate(&mut self, now: Time, a: Alloc, stats: &mut Stats) -> Time {
        self.live = (self.live + a.retained as f64 - a.released as f64).max(0.0);
        let bytes = a.bytes as f64;
        self.heap += bytes;
        let limited = self.limited();
        let heap_limit = self.p.memory_limit.map(|l| self.heap_limit(l));
        let Some(m) = self.mark.as_mut() else {
            if self.coordinated && self.heap < self.goal {
                // Due at the trigger; the runtime collects on its own only
                // at the goal.
                if self.heap >= self.trigger && !self.due {
                    self.due = true;
                    self.pending.push(Event::Due {
                        headroom: (self.goal - self.heap) as u64,
                    });
                }
            } else if self.heap >= self.trigger {
                self.due = false;
                self.start_cycle(now, stats);
            }
            return 0;
        };
        m.allocated += bytes;
        if limited {
            return 0;
        }
        // Assist in proportion to allocation, so that the mark left is done
        // by the time the heap reaches its hard goal.
        let mut hard = self.goal * self.p.hard_goal_factor;
        if let Some(limit) = heap_limit {
            hard = hard.min(limit.max(self.goal));
        }
        let distance = hard - self.heap;
        let owed = if distance <= 0.0 {
            m.remaining
        } else {
            (bytes * m.remaining / distance).min(m.remaining)
        };
        let covered = owed.min(m.credit);
        m.credit -= covered;
        let assist = owed - covered;
        if assist <= 0.0 {
            return 0;
        }
        m.remaining -= assist;
        stats.assist_us += assist;
        stats.at(now, assist);
        // Not capped: an assist is one long piece of work here (Go's are
        // chunks that recheck the limiter), so its excess must drain
        // before the next one may start.
        self.bucket += assist;
        if m.remaining <= 0.5 {
            self.finish_mark(now, stats);
        }
        assist.ceil() as Time
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Collector, GcModel, MIB};

    fn params() -> GoParams {
        GoParams {
            mark_us_per_mib: vec![(64.0, 1_000.0)],
            heap_share_of_limit: vec![(1.0, 1.0)],
            trigger_fraction: 0.7,
            mark_fixed_us: 0.0,
            sweep_termination_us: 50,
            mark_termination_us: 100,
            ..GoParams::default()
        }
    }

    fn drive(c: &mut Collector, rate: f64, secs: u64, busy: f64) -> Vec<Event> {
        crate::testing::drive(c, rate, 0.0, secs, busy).0
    }

    #[test]
    fn ample_memory_costs_cpu_in_proportion_to_allocation_over_headroom() {
        // 64 MiB live, GOGC=100: a cycle every ~0.7 × 64 MiB of garbage;
        // each marks 64 MiB at 1 ms/MiB = 64 ms of CPU.
        let live = 64 << 20;
        let mut c = Collector::new(&GcModel::Go(params()), 2.0, live, 0, 100_000);
        let rate = 100.0 * MIB;
        let events = drive(&mut c, rate, 10, 1.0);
        let s = c.stats();
        let expected_cycles = 10.0 * rate / (0.7 * live as f64);
        assert!(
            (s.cycles as f64 - expected_cycles).abs() <= 2.0,
            "{} cycles, expected ~{expected_cycles}",
            s.cycles
        );
        let per_cycle = 64.0 * 1_000.0;
        let mark_cpu = s.background_us + s.idle_us + s.assist_us;
        assert!(
            (mark_cpu / s.cycles as f64 - per_cycle).abs() < 0.05 * per_cycle,
            "{mark_cpu} µs over {} cycles",
            s.cycles
        );
        // Two short pauses per cycle, nothing long.
        // (the last cycle may still be marking at the end)
        assert!(events.len() as u64 + 1 >= 2 * s.cycles && events.len() as u64 <= 2 * s.cycles);
        assert!(s.max_pause() <= 100);
        // Dedicated workers plus the idle core did the marking: no assists.
        assert!(s.assist_us < 0.01 * mark_cpu, "assists {}", s.assist_us);
        let share = s.cpu_share(2.0);
        assert!(share > 0.02 && share < 0.1, "share {share}");
    }

    #[test]
    fn a_memory_limit_near_the_live_heap_runs_cycles_back_to_back_with_assists() {
        let live = 64u64 << 20;
        let ample = {
            let mut c = Collector::new(&GcModel::Go(params()), 2.0, live, 0, 100_000);
            drive(&mut c, 50.0 * MIB, 5, 2.0);
            c.stats().clone()
        };
        let tight = {
            let p = GoParams {
                memory_limit: Some(live + live / 20),
                ..params()
            };
            let mut c = Collector::new(&GcModel::Go(p), 2.0, live, 0, 100_000);
            drive(&mut c, 50.0 * MIB, 5, 2.0);
            c.stats().clone()
        };
        assert!(
            tight.cycles > 10 * ample.cycles.max(1),
            "{} vs {} cycles",
            tight.cycles,
            ample.cycles
        );
        assert!(
            tight.assist_us > 100.0 * ample.assist_us.max(1.0),
            "assists {} vs {}",
            tight.assist_us,
            ample.assist_us
        );
        // Marking all the time: the collector is active for most of the run
        // and takes at least its dedicated quarter of the cores.
        assert!(
            tight.active_share() > 0.5,
            "active {}",
            tight.active_share()
        );
        assert!(
            tight.active_share() > 5.0 * ample.active_share(),
            "active {} vs {}",
            tight.active_share(),
            ample.active_share()
        );
        assert!(
            tight.cpu_share(2.0) > 3.0 * ample.cpu_share(2.0),
            "share {} vs {}",
            tight.cpu_share(2.0),
            ample.cpu_share(2.0)
        );
    }

    #[test]
    fn the_cpu_limiter_stops_assists_when_the_collector_takes_more_than_half() {
        let live = 64u64 << 20;
        let p = GoParams {
            memory_limit: Some(live),
            limiter_capacity_us: 50_000.0,
            ..params()
        };
        let mut c = Collector::new(&GcModel::Go(p), 2.0, live, 0, 100_000);
        drive(&mut c, 200.0 * MIB, 5, 2.0);
        let s = c.stats();
        // Without a limiter every allocation would assist the whole mark;
        // with it the collector's share stays near the limit.
        let share = s.cpu_share(2.0);
        assert!(share < 0.62, "share {share}");
        assert!(share > 0.3, "share {share}");
    }

    #[test]
    fn a_larger_memory_limit_leaves_a_larger_share_of_it_to_the_heap_goal() {
        // Measured: the goal is 0.85 of a 100 MiB limit, 0.89 of 1.5 GiB
        // and above (the runtime's own memory weighs less in a larger heap).
        let goal = |limit_mib: u64| {
            let p = GoParams {
                memory_limit: Some(limit_mib << 20),
                ..GoParams::default()
            };
            let h = GoHeap::new(p, 2.0, (limit_mib << 20) / 2, 0);
            h.goal / (limit_mib << 20) as f64
        };
        assert!((goal(100) - 0.85).abs() < 1e-9, "{}", goal(100));
        assert!((goal(1_536) - 0.89).abs() < 1e-3, "{}", goal(1_536));
        assert!((goal(32 << 10) - 0.89).abs() < 1e-9, "{}", goal(32 << 10));
        let mid = goal(400);
        assert!(mid > 0.85 && mid < 0.89, "{mid}");
    }

    #[test]
    fn the_collector_before_green_tea_marks_a_large_heap_at_its_own_cost() {
        // One cycle over 2 GiB live: 2,048 MiB × its measured µs per MiB.
        let mark = |curve: Vec<(f64, f64)>| {
            let p = GoParams {
                mark_us_per_mib: curve,
                ..GoParams::default()
            };
            let mut c = Collector::new(&GcModel::Go(p), 2.0, 2 << 30, 0, 100_000);
            c.request_full(1);
            let mut ev = Vec::new();
            c.poll(&mut ev);
            c.stats().pause_cpu_us
        };
        let (tea, classic) = (
            mark(GoParams::green_tea_mark()),
            mark(GoParams::classic_mark()),
        );
        assert!((tea - 2_048.0 * 1_659.0).abs() < 100.0, "{tea}");
        assert!((classic - 2_048.0 * 2_105.0).abs() < 100.0, "{classic}");
    }

    #[test]
    fn same_inputs_same_collections() {
        let run = || {
            let p = GoParams {
                memory_limit: Some(80 << 20),
                ..params()
            };
            let mut c = Collector::new(&GcModel::Go(p), 1.0, 64 << 20, 0, 100_000);
            let ev = drive(&mut c, 30.0 * MIB, 3, 0.5);
            (ev, c.stats().cycles, c.stats().gc_cpu_us())
        };
        assert_eq!(run(), run());
    }

    #[test]
    fn retained_bytes_grow_the_live_heap_and_the_next_cycle_marks_them() {
        let mut c = Collector::new(&GcModel::Go(params()), 1.0, 8 << 20, 0, 100_000);
        c.allocate(
            10,
            Alloc {
                bytes: 4 << 20,
                retained: 4 << 20,
                released: 0,
            },
        );
        assert_eq!(c.live(), 12 << 20);
        c.allocate(
            20,
            Alloc {
                bytes: 0,
                retained: 0,
                released: 2 << 20,
            },
        );
        assert_eq!(c.live(), 10 << 20);
    }

    #[test]
    fn coordinated_cycles_wait_for_the_service_and_run_stop_the_world_on_every_core() {
        let live = 64u64 << 20;
        let mut c = Collector::new(&GcModel::Go(params()), 2.0, live, 0, 100_000);
        c.set_coordinated(true);
        let (events, _) = crate::testing::drive_with(&mut c, 100.0 * MIB, 0.0, 5, 1.0, true);
        let dues = events
            .iter()
            .filter(|e| matches!(e, Event::Due { .. }))
            .count();
        let coordinated: Vec<Time> = events
            .iter()
            .filter_map(|e| match e {
                Event::Pause {
                    duration,
                    phase: Phase::Coordinated,
                } => Some(*duration),
                _ => None,
            })
            .collect();
        assert!(
            dues > 2 && coordinated.len() == dues,
            "{dues} due, {} collected",
            coordinated.len()
        );
        assert!(
            !events.iter().any(|e| matches!(
                e,
                Event::Pause {
                    phase: Phase::SweepTermination,
                    ..
                }
            )),
            "no concurrent cycle"
        );
        // 64 MiB at 1 ms/MiB over 2 cores, plus the two short phases.
        assert!(
            coordinated.iter().all(|d| (32_000..=32_300).contains(d)),
            "{coordinated:?}"
        );
        assert_eq!(c.stats().assist_us, 0.0);
    }

    #[test]
    fn a_coordinated_cycle_never_permitted_runs_on_its_own_at_the_goal() {
        let live = 64u64 << 20;
        let mut c = Collector::new(&GcModel::Go(params()), 2.0, live, 0, 100_000);
        c.set_coordinated(true);
        let events = drive(&mut c, 100.0 * MIB, 3, 1.0);
        assert!(events.iter().any(|e| matches!(e, Event::Due { .. })));
        assert!(
            events.iter().any(|e| matches!(
                e,
                Event::Pause {
                    phase: Phase::SweepTermination,
                    ..
                }
            )),
            "forced at the goal"
        );
        // A late permission finds nothing due.
        assert!(!c.collect_now(3_000_001) || c.stats().cycles > 0);
    }
}

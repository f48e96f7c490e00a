//! What a collector did: CPU it took by kind of work, its pauses, and its
//! CPU share over time in fixed windows (the shape of the seed paper's
//! Fig. 12).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::{Phase, Time};

/// Individual pauses kept for plots and percentiles; counts and sums go on.
const MAX_PAUSES: usize = 200_000;

#[derive(Clone, Debug, Default, Serialize)]
pub struct PauseSummary {
    pub count: u64,
    pub total_us: u64,
    pub max_us: Time,
}

#[derive(Clone, Debug, Serialize)]
pub struct Stats {
    /// Collection cycles started (Go: cycles; G1: young, mixed and full
    /// collections and concurrent marks).
    pub cycles: u64,
    pub allocated: u64,
    /// CPU µs of concurrent work by the collector's own workers.
    pub background_us: f64,
    /// CPU µs of concurrent work on otherwise idle cores.
    pub idle_us: f64,
    /// CPU µs of marking done by allocating mutator work.
    pub assist_us: f64,
    /// CPU µs of concurrent refinement (G1), charged to allocating work.
    pub refine_us: f64,
    /// Bytes copied by young and mixed collections, and of those, bytes
    /// promoted to the old generation (G1).
    pub copied: f64,
    pub promoted: f64,
    /// Wall µs the world was stopped.
    pub pause_us: f64,
    /// Core-µs the world was stopped (pause × cores).
    pub pause_cpu_us: f64,
    pub by_phase: BTreeMap<Phase, PauseSummary>,
    /// `(start, duration, phase)` of each pause, the first `MAX_PAUSES`.
    pub pauses: Vec<(Time, Time, Phase)>,
    /// Window length (µs) of `windows`.
    pub window: Time,
    /// Collector CPU µs (all kinds) in each window since `start`.
    pub windows: Vec<f64>,
    /// Time during which a cycle was running (marking or paused), µs.
    pub active_us: f64,
    start: Time,
    end: Time,
}

impl Stats {
    pub fn new(start: Time, window: Time) -> Stats {
        Stats {
            cycles: 0,
            allocated: 0,
            background_us: 0.0,
            idle_us: 0.0,
            assist_us: 0.0,
            refine_us: 0.0,
            copied: 0.0,
            promoted: 0.0,
            pause_us: 0.0,
            pause_cpu_us: 0.0,
            by_phase: BTreeMap::new(),
            pauses: Vec::new(),
            window: window.max(1),
            windows: Vec::new(),
            active_us: 0.0,
            start,
            end: start,
        }
    }

    /// All CPU the collector took, µs.
    pub fn gc_cpu_us(&self) -> f64 {
        self.background_us + self.idle_us + self.assist_us + self.refine_us + self.pause_cpu_us
    }

    /// The collector's share of `cores` over the run.
    pub fn cpu_share(&self, cores: f64) -> f64 {
        let span = self.end.saturating_sub(self.start) as f64 * cores;
        if span <= 0.0 {
            0.0
        } else {
            self.gc_cpu_us() / span
        }
    }

    /// Share of wall time during which a cycle was in progress.
    pub fn active_share(&self) -> f64 {
        let span = self.end.saturating_sub(self.start) as f64;
        if span <= 0.0 {
            0.0
        } else {
            (self.active_us / span).min(1.0)
        }
    }

    pub(crate) fn close(&mut self, now: Time) {
        self.end = self.end.max(now);
    }

    /// `cpu` µs of collector work spread evenly over `[from, to)`.
    pub(crate) fn spread(&mut self, from: Time, to: Time, cpu: f64) {
        self.end = self.end.max(to);
        if cpu <= 0.0 {
            return;
        }
        if to <= from {
            self.at(from, cpu);
            return;
        }
        let rate = cpu / (to - from) as f64;
        let mut t = from;
        while t < to {
            let w = (t.saturating_sub(self.start)) / self.window;
            let w_end = self.start + (w + 1) * self.window;
            let seg_end = w_end.min(to);
            self.add_window(w as usize, rate * (seg_end - t) as f64);
            t = seg_end;
        }
    }

    /// `cpu` µs of collector work at one instant.
    pub(crate) fn at(&mut self, t: Time, cpu: f64) {
        self.end = self.end.max(t);
        let w = t.saturating_sub(self.start) / self.window;
        self.add_window(w as usize, cpu);
    }

    fn add_window(&mut self, w: usize, cpu: f64) {
        // Windows are only ever a run's length apart; the bound keeps a
        // nonsense time from allocating without limit.
        if w > 10_000_000 {
            return;
        }
        if self.windows.len() <= w {
            self.windows.resize(w + 1, 0.0);
        }
        self.windows[w] += cpu;
    }

    pub(crate) fn pause(&mut self, now: Time, duration: Time, phase: Phase, cores: f64) {
        self.pause_us += duration as f64;
        self.pause_cpu_us += duration as f64 * cores;
        self.spread(now, now + duration, duration as f64 * cores);
        let s = self.by_phase.entry(phase).or_default();
        s.count += 1;
        s.total_us += duration;
        s.max_us = s.max_us.max(duration);
        if self.pauses.len() < MAX_PAUSES {
            self.pauses.push((now, duration, phase));
        }
    }

    /// The longest pause of any phase.
    pub fn max_pause(&self) -> Time {
        self.by_phase.values().map(|s| s.max_us).max().unwrap_or(0)
    }

    pub fn pause_count(&self) -> u64 {
        self.by_phase.values().map(|s| s.count).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_splits_work_across_windows() {
        let mut s = Stats::new(1_000, 100);
        s.spread(1_050, 1_250, 200.0);
        assert_eq!(s.windows.len(), 3);
        assert!((s.windows[0] - 50.0).abs() < 1e-9);
        assert!((s.windows[1] - 100.0).abs() < 1e-9);
        assert!((s.windows[2] - 50.0).abs() < 1e-9);
        s.at(1_399, 7.0);
        assert_eq!(s.windows.len(), 4);
        assert!((s.windows[3] - 7.0).abs() < 1e-9);
    }

    #[test]
    fn pauses_are_summed_by_phase_and_counted_as_cpu_of_every_core() {
        let mut s = Stats::new(0, 1_000);
        s.pause(10, 100, Phase::Young, 2.0);
        s.pause(500, 300, Phase::Young, 2.0);
        s.pause(900, 50, Phase::Remark, 2.0);
        let y = &s.by_phase[&Phase::Young];
        assert_eq!((y.count, y.total_us, y.max_us), (2, 400, 300));
        assert_eq!(s.max_pause(), 300);
        assert_eq!(s.pause_count(), 3);
        assert!((s.pause_cpu_us - 900.0).abs() < 1e-9);
        s.close(1_000);
        assert!((s.cpu_share(2.0) - 0.45).abs() < 1e-9);
    }
}

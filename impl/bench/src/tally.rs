//! The tally of a run: latencies (a histogram from each operation's
//! intended start), counts of outcomes, the wrong answers, and the
//! optional timeline; and the run's result computed from it.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;

use crate::check::check;
use crate::spec::{Percentiles, RunResult, RunSpec};
use crate::text_target::{Answer, CallError};
use crate::workload::Op;

/// Latencies from 1 µs to 10 minutes, 3 significant digits.
fn new_histogram() -> Histogram<u64> {
    match Histogram::<u64>::new_with_bounds(1, 600_000_000, 3) {
        Ok(h) => h,
        Err(_) => unreachable!("constant histogram bounds are valid"),
    }
}

/// Rows of the percentile table per halving of the distance to 100 %.
const TICKS_PER_HALF_DISTANCE: u32 = 5;

/// The histogram's percentile table, in ms, ending at (1, max).
fn percentiles(hist: &Histogram<u64>) -> Percentiles {
    let ms = |us: u64| us as f64 / 1000.0;
    let mut points: Vec<(f64, f64)> = Vec::new();
    if hist.is_empty() {
        return Percentiles::default();
    }
    for v in hist.iter_quantiles(TICKS_PER_HALF_DISTANCE) {
        let q = v.quantile_iterated_to();
        if q < 1.0 && points.last().is_none_or(|p| q > p.0) {
            points.push((q, ms(v.value_iterated_to())));
        }
    }
    points.push((1.0, ms(hist.max())));
    Percentiles {
        count: hist.len(),
        points,
    }
}

const CDF_QUANTILES: [f64; 15] = [
    0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9995, 0.9999, 0.99995, 0.99999,
    1.0,
];

pub struct Tally {
    hist: Histogram<u64>,
    /// When the last measured operation completed.
    last_done: Option<Instant>,
    ok: u64,
    io_errors: u64,
    pub redirects: u64,
    wrong: u64,
    first_wrong: Option<String>,
    timeline: Option<Vec<(u32, u32)>>,
    writes_acked: u64,
    session_expired: u64,
    /// Calls without an answer, warm-up included (`io_errors` counts the
    /// measured part only).
    unanswered: u64,
    /// Distinct client ids used, set by the loop.
    pub clients: u64,
}

impl Tally {
    pub fn new(timeline: bool) -> Tally {
        Tally {
            hist: new_histogram(),
            last_done: None,
            ok: 0,
            io_errors: 0,
            redirects: 0,
            wrong: 0,
            first_wrong: None,
            timeline: timeline.then(Vec::new),
            writes_acked: 0,
            session_expired: 0,
            unanswered: 0,
            clients: 0,
        }
    }

    /// A reply that is not a correct answer (also when no operation can
    /// be matched to it).
    pub fn wrong(&mut self, what: String) {
        self.wrong += 1;
        self.first_wrong.get_or_insert(what);
    }

    /// Notes what went wrong first, without counting it.
    pub fn note(&mut self, what: String) {
        self.first_wrong.get_or_insert(what);
    }

    /// A failure of the run itself (it could not go on).
    pub fn broken(&mut self, what: String) {
        self.io_errors += 1;
        self.first_wrong.get_or_insert(what);
    }

    /// Records how an operation ended, `done` now; only operations
    /// intended after `measure_from` count in the figures, but a wrong
    /// answer counts whenever it came.
    pub fn record(
        &mut self,
        op: &Op,
        intended: Instant,
        result: Result<Answer, CallError>,
        measure_from: Instant,
        preloaded: bool,
    ) {
        let done = Instant::now();
        let measured = intended >= measure_from;
        if matches!(result, Ok(Answer::Written)) {
            self.writes_acked += 1;
        }
        if matches!(result, Err(CallError::SessionExpired)) {
            self.session_expired += 1;
        }
        match result {
            Ok(answer) => match check(op, &answer, preloaded) {
                Ok(()) => {
                    if measured {
                        self.ok += 1;
                        self.last_done = Some(self.last_done.map_or(done, |t| t.max(done)));
                        let us = done.saturating_duration_since(intended).as_micros() as u64;
                        let _ = self.hist.record(us.max(1));
                        if let Some(t) = self.timeline.as_mut() {
                            let at = intended.saturating_duration_since(measure_from).as_millis();
                            t.push((
                                at.min(u32::MAX as u128) as u32,
                                us.min(u32::MAX as u64) as u32,
                            ));
                        }
                    }
                }
                Err(e) => self.wrong(e),
            },
            Err(CallError::Unexpected(e)) => self.wrong(e),
            Err(_) => {
                self.unanswered += 1;
                if measured {
                    self.io_errors += 1
                }
            }
        }
    }

    /// The run's result; `scheduled_measured` operations were due in the
    /// measured part, which ran from `measure_from` to `end`.
    pub fn finish(
        mut self,
        spec: &RunSpec,
        scheduled_measured: u64,
        end: Instant,
        measure_from: Instant,
    ) -> RunResult {
        let total = &mut self;
        // Throughput over the time it took to complete the measured
        // schedule: a system that falls behind finishes late and is charged
        // for it.
        let finished = total.last_done.map_or(end, |t| t.max(end));
        let secs = finished
            .saturating_duration_since(measure_from)
            .as_secs_f64()
            .max(1e-9);
        let ms = |q: f64| total.hist.value_at_quantile(q) as f64 / 1000.0;
        // Instants to Unix time, through one reading of both clocks.
        let (now, sys) = (Instant::now(), SystemTime::now());
        let sys_s = sys
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let unix = |t: Instant| sys_s - now.saturating_duration_since(t).as_secs_f64();
        let unfinished = scheduled_measured.saturating_sub(total.ok + total.io_errors);
        RunResult {
            offered: spec.rate,
            achieved: total.ok as f64 / secs,
            ok: total.ok,
            io_errors: total.io_errors,
            redirects: total.redirects,
            wrong: total.wrong,
            unfinished,
            p50_ms: ms(0.5),
            p90_ms: ms(0.9),
            p99_ms: ms(0.99),
            p999_ms: ms(0.999),
            max_ms: total.hist.max() as f64 / 1000.0,
            percentiles: percentiles(&total.hist),
            cdf: CDF_QUANTILES.iter().map(|q| (*q, ms(*q))).collect(),
            writes_acked: total.writes_acked,
            session_expired: total.session_expired,
            unanswered: total.unanswered,
            clients: total.clients,
            measured_from_unix_s: unix(measure_from),
            measured_to_unix_s: unix(finished),
            first_wrong: total.first_wrong.take(),
            timeline: total.timeline.take().unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_table_steps_to_the_maximum() {
        assert_eq!(percentiles(&new_histogram()), Percentiles::default());
        let mut h = new_histogram();
        for us in 1..=100_000u64 {
            let _ = h.record(us);
        }
        let t = percentiles(&h);
        assert_eq!(t.count, 100_000);
        assert_eq!(t.points.last(), Some(&(1.0, h.max() as f64 / 1000.0)));
        for w in t.points.windows(2) {
            assert!(w[0].0 < w[1].0 && w[0].1 <= w[1].1, "{w:?}");
        }
        // Five rows per halving until the histogram's last bucket (values
        // near 100 ms share buckets of 64 µs at three significant digits,
        // so the iteration ends near q = 0.9997, not at 1 - 1/100 000).
        assert!((55..=90).contains(&t.points.len()), "{}", t.points.len());
        let tail = t.points[t.points.len() - 2];
        assert!(tail.0 > 0.999 && tail.1 > 99.9, "{tail:?}");
        let median = t.points.iter().find(|p| p.0 == 0.5).map(|p| p.1);
        assert!(median.is_some_and(|m| (m - 50.0).abs() < 0.1), "{median:?}");
    }
}

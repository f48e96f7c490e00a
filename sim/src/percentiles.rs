//! A latency distribution as a percentile table, in the manner of
//! HdrHistogram's percentile output: values at quantiles that step
//! geometrically towards 100 % (a fixed number of steps each time the
//! distance to 100 % halves), so that the tail, where pauses show, is
//! described as finely as the median; the last row is the maximum.
//! Plotted against 1/(1 − q) on a log axis (scripts/latency_plot.py),
//! it shows p50 … p99.99 and the maximum of one run in a few dozen rows.

use serde::Serialize;

/// Rows per halving of the distance to 100 % (the default of
/// HdrHistogram's `outputPercentileDistribution` and of the bench's table).
pub const TICKS_PER_HALF_DISTANCE: u32 = 5;

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Percentiles {
    /// How many samples the table describes.
    pub count: usize,
    /// `(quantile, value)` rows, the quantile rising from 0 (the minimum)
    /// to 1 (the maximum).
    pub points: Vec<(f64, f64)>,
}

impl Percentiles {
    /// The table of `sorted` (ascending) values. The value at quantile
    /// `q` is the sample of rank round((n − 1)·q), the rule of
    /// [`crate::percentile`] and of the study's p99, so that the table and
    /// those figures agree. The rows stop where that rank reaches the
    /// last sample, which ends the table as the maximum.
    pub fn of_sorted(sorted: &[f64]) -> Percentiles {
        let n = sorted.len();
        let Some(&max) = sorted.last() else {
            return Percentiles::default();
        };
        let last_q = 1.0 - 1.0 / n as f64;
        let mut points = Vec::new();
        for k in 0.. {
            let q = 1.0 - 0.5f64.powf(k as f64 / TICKS_PER_HALF_DISTANCE as f64);
            if q >= last_q {
                break;
            }
            let rank = ((n as f64 - 1.0) * q).round() as usize;
            points.push((q, sorted[rank.min(n - 1)]));
        }
        points.push((1.0, max));
        Percentiles { count: n, points }
    }

    /// The table of sorted latencies in µs, as milliseconds.
    pub fn of_sorted_us_as_ms(sorted_us: &[u64]) -> Percentiles {
        let ms: Vec<f64> = sorted_us.iter().map(|us| *us as f64 / 1000.0).collect();
        Percentiles::of_sorted(&ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_single_sample() {
        assert_eq!(Percentiles::of_sorted(&[]), Percentiles::default());
        let one = Percentiles::of_sorted(&[3.5]);
        assert_eq!(one.count, 1);
        assert_eq!(one.points, vec![(1.0, 3.5)]);
    }

    #[test]
    fn rows_step_towards_the_maximum() {
        // 1..=100 000: the value at q is about q·n, and the tail is there.
        let xs: Vec<f64> = (1..=100_000).map(f64::from).collect();
        let t = Percentiles::of_sorted(&xs);
        assert_eq!(t.count, 100_000);
        assert_eq!(t.points.first(), Some(&(0.0, 1.0)));
        assert_eq!(t.points.last(), Some(&(1.0, 100_000.0)));
        // log2(100 000) ≈ 16.6 halvings, five rows each (k = 0..=83), and
        // the maximum.
        assert_eq!(t.points.len(), 85);
        for w in t.points.windows(2) {
            assert!(w[0].0 < w[1].0 && w[0].1 <= w[1].1, "{w:?}");
        }
        // The median and the p99.99 region are where they must be.
        let at = |q: f64| {
            t.points
                .iter()
                .find(|p| (p.0 - q).abs() < 1e-12)
                .map(|p| p.1)
        };
        // Rank round(99 999 · 0.5) = 50 000, the sample 50 001.
        assert_eq!(at(0.5), Some(50_001.0));
        assert_eq!(at(0.75), Some(75_000.0));
        let tail = t.points[t.points.len() - 2];
        assert!(tail.0 > 0.9999 && tail.1 > 99_990.0, "{tail:?}");
    }

    #[test]
    fn agrees_with_the_percentile_rule() {
        let us: Vec<u64> = (0..1_000u64).map(|i| i * i).collect();
        let t = Percentiles::of_sorted_us_as_ms(&us);
        for (q, ms) in &t.points {
            assert_eq!(*ms, crate::percentile(&us, *q) as f64 / 1000.0, "q {q}");
        }
    }
}

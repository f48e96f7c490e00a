//! G1's predictions: a decaying average of past samples plus a margin of
//! their decaying deviation (OpenJDK 17, `G1Predictions` over a
//! `TruncatedSeq`), so that the policy plans for somewhat worse than the
//! average, and for much worse while it has seen few samples.

/// A decaying average and variance of samples: each new sample weighs
/// `1 - alpha`, the history `alpha`.
#[derive(Clone, Debug)]
pub(crate) struct Seq {
    alpha: f64,
    num: u32,
    avg: f64,
    var: f64,
}

impl Seq {
    /// G1Analytics' sequences: a new sample weighs 0.3.
    pub(crate) fn analytics() -> Seq {
        Seq::new(0.7)
    }

    /// The adaptive IHOP's sequences (`TruncatedSeq(10, 0.05)`): a new
    /// sample weighs 0.95, so the prediction follows the last cycles.
    pub(crate) fn ihop() -> Seq {
        Seq::new(0.05)
    }

    fn new(alpha: f64) -> Seq {
        Seq {
            alpha,
            num: 0,
            avg: 0.0,
            var: 0.0,
        }
    }

    pub(crate) fn add(&mut self, x: f64) {
        if self.num == 0 {
            self.avg = x;
            self.var = 0.0;
        } else {
            self.avg = (1.0 - self.alpha) * x + self.alpha * self.avg;
            let d = x - self.avg;
            self.var = (1.0 - self.alpha) * d * d + self.alpha * self.var;
        }
        self.num = self.num.saturating_add(1);
    }

    pub(crate) fn num(&self) -> u32 {
        self.num
    }

    /// The average plus `sigma` deviations; with fewer than five samples
    /// the deviation is taken as at least a multiple of the average (two
    /// with one sample, down to a half with four), as G1 does: a single
    /// sample says nothing about the spread.
    pub(crate) fn predict(&self, sigma: f64) -> f64 {
        let mut sd = self.var.max(0.0).sqrt();
        if self.num < 5 {
            sd = sd.max(self.avg * (5 - self.num) as f64 / 2.0);
        }
        (self.avg + sigma * sd).max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn few_samples_predict_pessimistically_and_many_converge_to_the_average() {
        let mut s = Seq::analytics();
        s.add(10.0);
        // One sample: the deviation is taken as twice the average.
        assert!((s.predict(0.5) - 20.0).abs() < 1e-9);
        for _ in 0..4 {
            s.add(10.0);
        }
        assert!((s.predict(0.5) - 10.0).abs() < 1e-9, "{}", s.predict(0.5));
        // A jump moves an analytics average by 0.3 of it, an IHOP one by 0.95.
        s.add(20.0);
        assert!((s.avg - 13.0).abs() < 1e-9);
        let mut i = Seq::ihop();
        i.add(10.0);
        i.add(20.0);
        assert!((i.avg - 19.5).abs() < 1e-9);
        assert!(s.predict(0.5) > s.avg, "a margin above the average");
    }
}

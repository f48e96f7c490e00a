//! The simulator's only source of randomness: Xoshiro256++ (a fixed
//! algorithm, unlike `StdRng`), seeded from the run's seed.

use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

pub struct Rng(Xoshiro256PlusPlus);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(Xoshiro256PlusPlus::seed_from_u64(seed))
    }

    pub fn u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.u64() % (hi - lo + 1)
    }

    /// Uniform in [0, 1).
    pub fn f64(&mut self) -> f64 {
        (self.u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.f64() < p
    }

    /// Exponentially distributed with the given mean.
    pub fn exp(&mut self, mean: f64) -> u64 {
        let u = self.f64().max(1e-12);
        (-u.ln() * mean) as u64
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> Option<T> {
        if items.is_empty() {
            None
        } else {
            Some(items[(self.u64() % items.len() as u64) as usize])
        }
    }

    /// A seed for a child generator (the core's election jitter).
    pub fn fork(&mut self) -> Box<dyn RngCore + Send> {
        Box::new(Xoshiro256PlusPlus::seed_from_u64(self.u64()))
    }
}

/// Zipfian choice of a key in `0..n` (rank 0 the hottest): P(k) ∝ 1/(k+1)^θ,
/// θ = 0.99 as in YCSB; θ = 0 is uniform. The CDF is tabulated once (our
/// key spaces are small), so a draw is one uniform and a binary search.
#[derive(Clone, Debug)]
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    pub fn new(n: u64, theta: f64) -> Zipf {
        let n = n.max(1);
        let weights: Vec<f64> = (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).collect();
        let total: f64 = weights.iter().sum();
        let mut acc = 0.0;
        let cdf = weights
            .iter()
            .map(|w| {
                acc += w / total;
                acc
            })
            .collect();
        Zipf { cdf }
    }

    pub fn sample(&self, r: &mut Rng) -> u64 {
        let u = r.f64();
        let i = self.cdf.partition_point(|c| *c <= u);
        i.min(self.cdf.len() - 1) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_is_skewed_and_in_range() {
        let z = Zipf::new(50, 0.99);
        let mut r = Rng::new(3);
        let mut counts = [0u32; 50];
        for _ in 0..20_000 {
            counts[z.sample(&mut r) as usize] += 1;
        }
        assert!(counts[0] > 4 * counts[9], "{counts:?}");
        assert!(counts[49] > 0);
        let u = Zipf::new(10, 0.0);
        let mut c = [0u32; 10];
        for _ in 0..10_000 {
            c[u.sample(&mut r) as usize] += 1;
        }
        assert!(c.iter().all(|x| *x > 800 && *x < 1200), "{c:?}");
    }
}

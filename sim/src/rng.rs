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

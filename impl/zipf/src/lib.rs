//! Zipfian choice of a rank in `0..n` (rank 0 the most popular):
//! P(k) ∝ 1/(k+1)^θ, with θ = 0.99 as in YCSB and θ = 0 uniform.
//!
//! One implementation for the simulator's clients (`sim/src/clients.rs`)
//! and the benchmark (`impl/bench/src/workload.rs`), so that a skew
//! studied in simulation is the skew measured on real processes. The CDF
//! is tabulated once, exactly (no approximation such as Gray et al.'s that
//! YCSB uses): a draw is one uniform number and a binary search. The table
//! costs 8 bytes per rank (800 KB for the benchmark's default 100,000
//! keys; 60 MB for the seed paper's 7.5 M).
//!
//! The caller brings the uniform number, so each keeps its own generator:
//! the simulator's Xoshiro256++ stream (whose draws every pinned seed
//! depends on) and the benchmark's `SmallRng`.

/// A tabulated zipfian distribution over `0..n`.
#[derive(Clone, Debug)]
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    /// The distribution over `0..n` (at least one rank) with skew `theta`.
    pub fn new(n: u64, theta: f64) -> Zipf {
        let n = n.max(1);
        let weight = |i: u64| 1.0 / (i as f64).powf(theta);
        // Two passes rather than a table of weights beside the table of
        // the CDF: the same sums, in the same order, half the memory
        // (7.5 M ranks, the seed paper's data set: 60 MB, not 120 MB).
        let total: f64 = (1..=n).map(weight).sum();
        let mut acc = 0.0;
        let cdf = (1..=n)
            .map(|i| {
                acc += weight(i) / total;
                acc
            })
            .collect();
        Zipf { cdf }
    }

    /// How many ranks there are.
    pub fn len(&self) -> u64 {
        self.cdf.len() as u64
    }

    /// Always false: there is at least one rank.
    pub fn is_empty(&self) -> bool {
        self.cdf.is_empty()
    }

    /// The rank drawn by the uniform number `u` in [0, 1): the first rank
    /// whose cumulative probability exceeds `u` (rounding can leave the
    /// last cumulative value a hair below 1: such a `u` takes the last
    /// rank).
    pub fn rank(&self, u: f64) -> u64 {
        let i = self.cdf.partition_point(|c| *c <= u);
        i.min(self.cdf.len() - 1) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixed sequence of uniforms (a 64-bit LCG's top 53 bits), so the
    /// tests need no generator crate.
    fn uniforms(n: usize) -> impl Iterator<Item = f64> {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        (0..n).map(move |_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 11) as f64 / (1u64 << 53) as f64
        })
    }

    #[test]
    fn skewed_at_099_and_every_rank_reachable() {
        let z = Zipf::new(50, 0.99);
        let mut counts = [0u32; 50];
        for u in uniforms(20_000) {
            counts[z.rank(u) as usize] += 1;
        }
        assert!(counts[0] > 4 * counts[9], "{counts:?}");
        assert!(counts[49] > 0, "{counts:?}");
        // P(rank 0) = 1 / H(50, 0.99) ≈ 0.22.
        assert!((3_900..4_900).contains(&counts[0]), "{counts:?}");
    }

    #[test]
    fn theta_zero_is_uniform() {
        let z = Zipf::new(10, 0.0);
        let mut c = [0u32; 10];
        for u in uniforms(10_000) {
            c[z.rank(u) as usize] += 1;
        }
        assert!(c.iter().all(|x| *x > 800 && *x < 1200), "{c:?}");
    }

    #[test]
    fn the_ends_of_the_unit_interval_stay_in_range() {
        let z = Zipf::new(1_000, 0.99);
        assert_eq!(z.rank(0.0), 0);
        assert_eq!(z.rank(1.0 - f64::EPSILON), 999);
        assert_eq!(z.rank(1.0), 999);
        assert_eq!(Zipf::new(0, 0.99).len(), 1);
        assert_eq!(Zipf::new(0, 0.99).rank(0.5), 0);
    }
}

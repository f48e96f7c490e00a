//! YCSB-style operations: key choice (zipfian or uniform), mixes A, B, C
//! and updates only, fixed-size keys and values that let every reply be
//! checked.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use stutter_zipf::Zipf;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mix {
    /// 50% reads, 50% updates (YCSB workload A).
    A,
    /// 95% reads, 5% updates (YCSB workload B).
    B,
    /// Reads only (YCSB workload C).
    C,
    /// Updates only (no YCSB counterpart): with C, the cost of each kind
    /// of operation alone (groundtruth's allocation profiles).
    W,
}

impl Mix {
    fn read_fraction(self) -> f64 {
        match self {
            Mix::A => 0.5,
            Mix::B => 0.95,
            Mix::C => 1.0,
            Mix::W => 0.0,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Distribution {
    Zipfian,
    Uniform,
}

/// YCSB's scrambled zipfian key choice: a zipfian rank (θ = 0.99, the
/// generator the simulator's clients use, `stutter_zipf`) spread over the
/// key space by FNV hashing, as YCSB's `ScrambledZipfianGenerator` does,
/// so that the popular keys are not neighbours.
#[derive(Clone, Debug)]
pub struct ScrambledZipfian {
    zipf: Zipf,
}

impl ScrambledZipfian {
    pub fn new(items: u64) -> ScrambledZipfian {
        ScrambledZipfian {
            zipf: Zipf::new(items, 0.99),
        }
    }

    /// A key index in `0..items`.
    pub fn next(&self, rng: &mut SmallRng) -> u64 {
        let rank = self.zipf.rank(rng.gen());
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in rank.to_le_bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h % self.zipf.len()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Read { key: Vec<u8> },
    Update { key: Vec<u8>, value: Vec<u8> },
}

/// Generates operations. Values carry their key and a writer tag so that a
/// read can be checked: it must return a value written for that very key.
pub struct Generator {
    rng: SmallRng,
    mix: Mix,
    /// Built only for the zipfian distribution (a table of 8 bytes a key).
    zipf: Option<ScrambledZipfian>,
    pub keys: u64,
    key_size: usize,
    value_size: usize,
    counter: u64,
    tag: u64,
}

impl Generator {
    pub fn new(
        seed: u64,
        mix: Mix,
        dist: Distribution,
        keys: u64,
        key_size: usize,
        value_size: usize,
    ) -> Generator {
        Generator {
            rng: SmallRng::seed_from_u64(seed),
            mix,
            zipf: (dist == Distribution::Zipfian).then(|| ScrambledZipfian::new(keys.max(2))),
            keys: keys.max(2),
            key_size: key_size.max(8),
            value_size,
            counter: 0,
            tag: seed,
        }
    }

    /// `user` + zero-padded index, exactly `key_size` bytes (23 by default,
    /// like YCSB's `user` + 19 digits).
    pub fn key(&self, index: u64) -> Vec<u8> {
        let digits = self.key_size - 4;
        let mut k = format!("user{:0width$}", index, width = digits).into_bytes();
        k.truncate(self.key_size);
        k
    }

    /// A value of exactly `value_size` bytes (when ≥ 40): `v:<key>:<tag>:<n>:` then padding.
    pub fn value(&mut self, key: &[u8]) -> Vec<u8> {
        self.counter += 1;
        let mut v = format!(
            "v:{}:{}:{}:",
            String::from_utf8_lossy(key),
            self.tag,
            self.counter
        )
        .into_bytes();
        while v.len() < self.value_size {
            v.push(b'x');
        }
        v
    }

    pub fn next_op(&mut self) -> Op {
        let idx = match &self.zipf {
            Some(z) => z.next(&mut self.rng),
            None => self.rng.gen_range(0..self.keys),
        };
        let key = self.key(idx);
        if self.rng.gen_bool(self.mix.read_fraction()) {
            Op::Read { key }
        } else {
            let value = self.value(&key);
            Op::Update { key, value }
        }
    }
}

/// Whether `value` could have been written for `key` by this benchmark.
pub fn value_matches_key(key: &[u8], value: &[u8]) -> bool {
    value.len() > key.len() + 3
        && value.starts_with(b"v:")
        && &value[2..2 + key.len()] == key
        && value[2 + key.len()] == b':'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_have_the_requested_sizes_and_check() {
        let mut g = Generator::new(1, Mix::A, Distribution::Zipfian, 1000, 23, 500);
        let k = g.key(42);
        assert_eq!(k.len(), 23);
        assert_eq!(&k, b"user0000000000000000042");
        let v = g.value(&k);
        assert_eq!(v.len(), 500);
        assert!(value_matches_key(&k, &v));
        assert!(!value_matches_key(&g.key(43), &v));
        assert!(!value_matches_key(&k, b"garbage"));
    }

    #[test]
    fn zipfian_is_skewed_and_in_range() {
        let z = ScrambledZipfian::new(10_000);
        let mut rng = SmallRng::seed_from_u64(7);
        let mut counts = std::collections::BTreeMap::new();
        for _ in 0..100_000 {
            let k = z.next(&mut rng);
            assert!(k < 10_000);
            *counts.entry(k).or_insert(0u32) += 1;
        }
        let mut v: Vec<u32> = counts.values().copied().collect();
        v.sort_unstable_by(|a, b| b.cmp(a));
        let top10: u32 = v.iter().take(10).sum();
        assert!(
            top10 > 10_000,
            "top 10 keys get >10% of accesses under zipf 0.99: {top10}"
        );
        assert!(
            counts.len() > 2_000,
            "yet many keys are touched: {}",
            counts.len()
        );
    }

    #[test]
    fn mixes_have_their_read_fraction() {
        for (mix, lo, hi) in [
            (Mix::A, 0.47, 0.53),
            (Mix::B, 0.93, 0.97),
            (Mix::C, 0.999, 1.001),
            (Mix::W, -0.001, 0.001),
        ] {
            let mut g = Generator::new(3, mix, Distribution::Uniform, 100, 23, 100);
            let reads = (0..10_000)
                .filter(|_| matches!(g.next_op(), Op::Read { .. }))
                .count();
            let f = reads as f64 / 10_000.0;
            assert!(f > lo && f < hi, "{mix:?}: {f}");
        }
    }
}

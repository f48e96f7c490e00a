//! A seeded mutation fuzzer on the stable toolchain. Each target starts
//! from a corpus of valid encodings and feeds its decoder those, the kept
//! regression inputs, and mutants of them (stacked bit flips, interesting
//! integers over length and count fields, truncations, extensions,
//! insertions, deletions, splices) and some purely random inputs. A panic
//! is a crash: the input is saved and the test fails.
//!
//! `cargo test -p stutter-replica --test fuzz_decoders` runs a few thousand
//! inputs per target (seconds). Longer, and with another seed:
//!
//! ```sh
//! STUTTER_FUZZ_ITERS=2000000 STUTTER_FUZZ_SEED=$RANDOM \
//!   cargo test -p stutter-replica --test fuzz_decoders -- --nocapture
//! ```
//!
//! (not `--release`: the test profile's overflow checks turn arithmetic on
//! decoded values into crashes the fuzzer can see).
//!
//! Crashing inputs are written to `target/tmp/fuzz-crashes/<target>/`;
//! once fixed, copy them to `tests/fuzz/regressions/<target>/` so every
//! run replays them.

pub mod corpus;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Inputs per target: `STUTTER_FUZZ_ITERS`, else the target's default.
fn iterations(default: u64) -> u64 {
    std::env::var("STUTTER_FUZZ_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn seed() -> u64 {
    std::env::var("STUTTER_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

fn regressions(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz/regressions")
        .join(target);
    let mut out: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read(e.path()).ok().map(|b| (e.path(), b)))
        .collect();
    out.sort();
    out
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ *b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// Integers that find off-by-ones and unchecked lengths.
const INTERESTING: [u64; 14] = [
    0,
    1,
    2,
    0x7f,
    0x80,
    0xff,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    512 << 20,
    16 << 20,
    1 << 62,
    u64::MAX - 1,
    u64::MAX,
];

pub struct Mutator {
    rng: Xoshiro256PlusPlus,
}

impl Mutator {
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.rng.next_u64() % n as u64) as usize
        }
    }

    /// A mutant of `input` (1 to 4 stacked changes), or of a splice with
    /// `other`.
    pub fn mutate(&mut self, input: &[u8], other: &[u8]) -> Vec<u8> {
        let mut b = input.to_vec();
        for _ in 0..1 + self.below(4) {
            let len = b.len();
            match self.below(12) {
                0 if len > 0 => {
                    let i = self.below(len);
                    b[i] ^= 1 << self.below(8);
                }
                1 if len > 0 => {
                    let i = self.below(len);
                    b[i] = INTERESTING[self.below(6)] as u8;
                }
                2 if len > 0 => {
                    let i = self.below(len);
                    b[i] = self.rng.next_u32() as u8;
                }
                3 => b.truncate(self.below(len + 1)),
                4 => {
                    for _ in 0..1 + self.below(64) {
                        b.push(self.rng.next_u32() as u8);
                    }
                }
                5 => {
                    let at = self.below(len + 1);
                    let n = 1 + self.below(16);
                    let ins: Vec<u8> = (0..n).map(|_| self.rng.next_u32() as u8).collect();
                    b.splice(at..at, ins);
                }
                6 if len > 0 => {
                    let at = self.below(len);
                    let n = 1 + self.below((len - at).min(32));
                    b.drain(at..at + n);
                }
                7 if len >= 4 => {
                    let at = self.below(len - 3);
                    let v = self.interesting(len) as u32;
                    let bytes = if self.below(2) == 0 {
                        v.to_be_bytes()
                    } else {
                        v.to_le_bytes()
                    };
                    b[at..at + 4].copy_from_slice(&bytes);
                }
                8 if len >= 8 => {
                    let at = self.below(len - 7);
                    let v = self.interesting(len);
                    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
                }
                9 if len > 0 => {
                    let at = self.below(len);
                    let n = 1 + self.below((len - at).min(64));
                    let chunk = b[at..at + n].to_vec();
                    let to = self.below(len + 1);
                    b.splice(to..to, chunk);
                }
                10 if !other.is_empty() => {
                    let keep = self.below(len + 1);
                    let from = self.below(other.len());
                    b.truncate(keep);
                    b.extend_from_slice(&other[from..]);
                }
                _ => {
                    if len > 0 {
                        let i = self.below(len);
                        b[i] = b[i].wrapping_add(1 + self.below(3) as u8);
                    }
                }
            }
        }
        b
    }

    fn interesting(&mut self, len: usize) -> u64 {
        match self.below(4) {
            0 => len as u64,
            1 => (len as u64).wrapping_sub(1),
            2 => len as u64 + 1,
            _ => INTERESTING[self.below(INTERESTING.len())],
        }
    }

    /// Random bytes of a random length below 256.
    pub fn random(&mut self) -> Vec<u8> {
        let n = self.below(256);
        (0..n).map(|_| self.rng.next_u32() as u8).collect()
    }
}

/// How many of `iters` mutants of `corpus` reach a planted bug (`bug`
/// says whether an input does): shows the mutations get there.
pub fn mutants_reaching(corpus: &[Vec<u8>], iters: u64, bug: impl Fn(&[u8]) -> bool) -> u64 {
    let mut m = Mutator {
        rng: Xoshiro256PlusPlus::seed_from_u64(seed()),
    };
    let mut found = 0;
    for _ in 0..iters {
        let a = m.below(corpus.len());
        let input = m.mutate(&corpus[a], &corpus[a]);
        if bug(&input) {
            found += 1;
        }
    }
    found
}

/// Runs `decode` on the regression inputs, the corpus, and `default_iters`
/// (or `STUTTER_FUZZ_ITERS`) generated inputs; fails on any panic, after
/// saving the inputs that caused one. Returns the number of inputs tried.
pub fn fuzz(target: &str, corpus: &[Vec<u8>], default_iters: u64, decode: impl Fn(&[u8])) -> u64 {
    assert!(!corpus.is_empty(), "{target}: empty corpus");
    let seed = seed();
    let mut m = Mutator {
        rng: Xoshiro256PlusPlus::seed_from_u64(seed ^ fnv(target.as_bytes())),
    };
    let mut crashes: Vec<String> = Vec::new();
    let mut tried = 0u64;
    let crash_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("fuzz-crashes")
        .join(target);
    let mut run = |input: &[u8], what: &str, crashes: &mut Vec<String>| {
        tried += 1;
        if catch_unwind(AssertUnwindSafe(|| decode(input))).is_err() {
            let _ = std::fs::create_dir_all(&crash_dir);
            let path = crash_dir.join(format!("{:016x}.bin", fnv(input)));
            let _ = std::fs::write(&path, input);
            crashes.push(format!(
                "{what}: {} ({} bytes)",
                path.display(),
                input.len()
            ));
        }
    };
    let kept = regressions(target);
    for (path, input) in &kept {
        run(
            input,
            &format!("regression {}", path.display()),
            &mut crashes,
        );
    }
    for input in corpus {
        run(input, "corpus", &mut crashes);
    }
    let iters = iterations(default_iters);
    for i in 0..iters {
        let input = if i % 20 == 19 {
            m.random()
        } else {
            let a = m.below(corpus.len());
            let b = m.below(corpus.len());
            m.mutate(&corpus[a], &corpus[b])
        };
        run(&input, "mutant", &mut crashes);
        if crashes.len() >= 5 {
            break;
        }
    }
    println!(
        "fuzz {target}: {tried} inputs ({} regression, {} corpus, {iters} generated), seed {seed}, {} crashes",
        kept.len(),
        corpus.len(),
        crashes.len()
    );
    assert!(
        crashes.is_empty(),
        "{target}: {} crashing inputs:\n{}",
        crashes.len(),
        crashes.join("\n")
    );
    tried
}

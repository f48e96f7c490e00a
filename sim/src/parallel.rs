//! Whole runs on several threads, results in order: each run is its own
//! single-threaded world, so a seed's result does not depend on which
//! thread ran it or when; handing results out in seed order makes the
//! output of a parallel swarm the same as a sequential one.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;

/// The cores to use by default.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Computes `run(i)` for every `i` in `from..to` on `jobs` threads and
/// gives each result to `each` in increasing `i`. When `each` returns
/// false, no result after that `i` is given (runs already started finish
/// and are dropped; no later one starts). Returns how many results were
/// given.
pub fn in_order<T, R, E>(from: u64, to: u64, jobs: usize, run: R, mut each: E) -> u64
where
    T: Send,
    R: Fn(u64) -> T + Sync,
    E: FnMut(u64, T) -> bool,
{
    let next = AtomicU64::new(from);
    // Lowest index after which nothing need run any more.
    let stop = AtomicU64::new(u64::MAX);
    let mut given = 0;
    std::thread::scope(|scope| {
        let (tx, rx) = mpsc::channel::<(u64, T)>();
        for _ in 0..jobs.max(1) {
            let tx = tx.clone();
            let (next, stop, run) = (&next, &stop, &run);
            scope.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= to || i > stop.load(Ordering::Relaxed) {
                    break;
                }
                if tx.send((i, run(i))).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        let mut waiting: BTreeMap<u64, T> = BTreeMap::new();
        let mut want = from;
        for (i, r) in rx {
            waiting.insert(i, r);
            while let Some(r) = waiting.remove(&want) {
                given += 1;
                if !each(want, r) {
                    stop.store(want, Ordering::Relaxed);
                    waiting.clear();
                    return;
                }
                want += 1;
            }
        }
    });
    given
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_in_order_whatever_the_threads() {
        for jobs in [1, 2, 5] {
            let mut seen = Vec::new();
            // Later indices finish sooner: out of order unless reordered.
            let n = in_order(
                3,
                40,
                jobs,
                |i| {
                    std::thread::sleep(std::time::Duration::from_micros(40 - i));
                    i * i
                },
                |i, r| {
                    seen.push((i, r));
                    true
                },
            );
            assert_eq!(n, 37);
            assert_eq!(seen, (3..40).map(|i| (i, i * i)).collect::<Vec<_>>());
        }
    }

    #[test]
    fn stopping_gives_nothing_after_the_stop() {
        let mut seen = Vec::new();
        let n = in_order(
            0,
            1_000,
            3,
            |i| i,
            |i, _| {
                seen.push(i);
                i < 10
            },
        );
        assert_eq!(n, 11);
        assert_eq!(seen, (0..=10).collect::<Vec<_>>());
    }
}

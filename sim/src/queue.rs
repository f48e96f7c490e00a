//! The event queue: the earliest `(time, sequence)` first. Among equal
//! times the order of scheduling decides, so a run is reproducible.
//!
//! A radix heap: events are only ever scheduled after the one running,
//! so a key `time << 64 | sequence` is filed in the bucket numbered by
//! the highest bit in which it differs from the key popped last (one
//! `xor` and a leading-zero count), and popping takes the smallest key of
//! the lowest non-empty bucket and re-files the rest of that bucket below
//! it. Each entry moves a few times in its life instead of climbing and
//! descending a comparison heap, and a bit mask finds the lowest bucket.
//!
//! An event (a message, a client request) is over a hundred bytes, so it
//! stays put in a slab whose slots are reused; buckets hold small
//! `(time, sequence, slot)` entries.
//!
//! A sequence number can be reserved now and used later
//! ([`Queue::reserve`], [`Queue::push_reserved`]): the world keeps the
//! entries that would change nothing out of the queue, and puts one in,
//! at its original place in the order, only when it turns out to matter.

use stutter_core::Time;

#[derive(Clone, Copy)]
struct Entry {
    at: Time,
    seq: u64,
    slot: u32,
}

fn key(at: Time, seq: u64) -> u128 {
    (at as u128) << 64 | seq as u128
}

impl Entry {
    fn key(&self) -> u128 {
        key(self.at, self.seq)
    }
}

/// Bucket `b` (1..=128) holds the keys whose highest bit differing from
/// `last` is bit `b - 1`.
fn bucket(k: u128, last: u128) -> usize {
    128 - (k ^ last).leading_zeros() as usize
}

/// Which buckets hold entries: bit `b - 1` for bucket `b` (two words:
/// shifts of a 128-bit integer by a variable amount cost a branch).
#[derive(Default)]
struct Filled([u64; 2]);

impl Filled {
    fn set(&mut self, b: usize) {
        let i = b - 1;
        self.0[(i >> 6) & 1] |= 1 << (i & 63);
    }

    fn clear(&mut self, b: usize) {
        let i = b - 1;
        self.0[(i >> 6) & 1] &= !(1 << (i & 63));
    }

    /// The lowest bucket with entries.
    fn lowest(&self) -> Option<usize> {
        match self.0 {
            [0, 0] => None,
            [0, hi] => Some(64 + hi.trailing_zeros() as usize + 1),
            [lo, _] => Some(lo.trailing_zeros() as usize + 1),
        }
    }
}

pub struct Queue<E> {
    buckets: Vec<Vec<Entry>>,
    filled: Filled,
    len: usize,
    /// Events by slot; `None` for a free slot (listed in `free`).
    slab: Vec<Option<E>>,
    free: Vec<u32>,
    /// The last sequence number given.
    seq: u64,
    /// `(time, sequence)` of the event popped last.
    current: (Time, u64),
}

impl<E> Default for Queue<E> {
    fn default() -> Self {
        Queue {
            buckets: (0..=128).map(|_| Vec::new()).collect(),
            filled: Filled::default(),
            len: 0,
            slab: Vec::new(),
            free: Vec::new(),
            seq: 0,
            current: (0, 0),
        }
    }
}

impl<E> Queue<E> {
    /// Schedules `ev` at `at` (never before `now`, the current event's time).
    pub fn push(&mut self, now: Time, at: Time, ev: E) {
        let seq = self.reserve();
        let at = at.max(now).max(self.current.0);
        let slot = self.store(ev);
        self.file(Entry { at, seq, slot });
    }

    /// The next sequence number: an event pushed later with it takes the
    /// place in the order it would have had if pushed now.
    pub fn reserve(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Schedules `ev` at `at` with a sequence number from
    /// [`Queue::reserve`]. `(at, seq)` must come after the current event;
    /// if it does not, the event is scheduled as if pushed now.
    pub fn push_reserved(&mut self, at: Time, seq: u64, ev: E) {
        let (now, cur) = self.current;
        let slot = self.store(ev);
        if key(at, seq) > key(now, cur) {
            self.file(Entry { at, seq, slot });
        } else {
            let seq = self.reserve();
            self.file(Entry {
                at: at.max(now),
                seq,
                slot,
            });
        }
    }

    pub fn pop(&mut self) -> Option<(Time, E)> {
        loop {
            let e = self.take_min()?;
            self.free.push(e.slot);
            // Every entry names a filled slot; skipping a missing event is
            // all a queue could do about such a bug.
            if let Some(ev) = self.slab.get_mut(e.slot as usize).and_then(Option::take) {
                return Some((e.at, ev));
            }
        }
    }

    /// `(time, sequence)` of the event popped last: what was reserved
    /// before it and is below it would have run already.
    pub fn current(&self) -> (Time, u64) {
        self.current
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn store(&mut self, ev: E) -> u32 {
        match self.free.pop() {
            Some(s) => {
                if let Some(x) = self.slab.get_mut(s as usize) {
                    *x = Some(ev);
                }
                s
            }
            None => {
                self.slab.push(Some(ev));
                (self.slab.len() - 1) as u32
            }
        }
    }

    /// Files `e` (its key above the last popped) in its bucket.
    fn file(&mut self, e: Entry) {
        let (at, seq) = self.current;
        let b = bucket(e.key(), key(at, seq));
        if let Some(v) = self.buckets.get_mut(b) {
            v.push(e);
            self.filled.set(b);
            self.len += 1;
        }
    }

    /// Removes the smallest entry: the smallest of the lowest non-empty
    /// bucket. It becomes the last popped, and the rest of its bucket is
    /// filed again below it.
    fn take_min(&mut self) -> Option<Entry> {
        let b = self.filled.lowest()?;
        let entries = self.buckets.get_mut(b)?;
        if entries.is_empty() {
            // Cannot happen (the mask follows the buckets); recover anyway.
            self.filled.clear(b);
            return self.take_min();
        }
        if entries.len() == 1 {
            // Alone in its bucket: nothing to file again.
            let min = entries.pop()?;
            self.filled.clear(b);
            self.len -= 1;
            self.current = (min.at, min.seq);
            return Some(min);
        }
        let mut i = 0;
        let mut k = u128::MAX;
        for (j, e) in entries.iter().enumerate() {
            if e.key() < k {
                k = e.key();
                i = j;
            }
        }
        let min = entries.swap_remove(i);
        self.filled.clear(b);
        self.len -= 1;
        self.current = (min.at, min.seq);
        // The rest goes to lower buckets (they share the bits above `b - 1`
        // with the new last key, and differ from it below).
        let (lower, upper) = self.buckets.split_at_mut(b);
        if let Some(entries) = upper.first_mut() {
            for e in entries.drain(..) {
                let nb = bucket(e.key(), k);
                if let Some(v) = lower.get_mut(nb) {
                    v.push(e);
                    self.filled.set(nb);
                }
            }
        }
        Some(min)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_and_scheduling_order_among_equal_times() {
        let mut q = Queue::default();
        q.push(0, 20, "c");
        q.push(0, 10, "a");
        q.push(0, 10, "b");
        q.push(15, 5, "d"); // in the past: runs at `now`
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(order, vec![(10, "a"), (10, "b"), (15, "d"), (20, "c")]);
    }

    /// Pushes and pops at random against an ordered set of (time, push
    /// number): the same pops, in the same order. Delays are below
    /// `spread`, now and then far beyond it.
    fn matches_an_ordered_set(mut q: Queue<u64>, rounds: u64, spread: u64) -> Queue<u64> {
        let mut reference = std::collections::BTreeSet::new();
        let mut x: u64 = 12345;
        let mut now = 0;
        let mut n = 0u64;
        for round in 0..rounds {
            for _ in 0..(round % 3) {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let at = if x & 15 == 0 {
                    (x >> 20) % (spread << 20)
                } else {
                    (x >> 33) % spread
                };
                n += 1;
                q.push(now, now + at, n);
                reference.insert((now + at, n));
            }
            let got = q.pop();
            assert_eq!(got, reference.pop_first());
            if let Some((t, _)) = got {
                now = t;
            }
        }
        while let Some(p) = q.pop() {
            assert_eq!(Some(p), reference.pop_first());
        }
        assert!(reference.is_empty());
        q
    }

    #[test]
    fn interleaved_pushes_and_pops_keep_the_order_and_reuse_slots() {
        for spread in [1, 60, 5_000, 1 << 30] {
            let q = matches_an_ordered_set(Queue::default(), 5_000, spread);
            assert!(q.slab.len() < 60, "slots are reused: {}", q.slab.len());
            assert!(q.is_empty());
        }
    }

    #[test]
    fn a_reserved_number_keeps_its_place() {
        let mut q = Queue::default();
        q.push(0, 10, "a");
        let r = q.reserve();
        q.push(0, 10, "c");
        q.push(0, 5, "x");
        assert_eq!(q.pop(), Some((5, "x")));
        assert_eq!(q.current(), (5, 4));
        q.push_reserved(10, r, "b");
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(order, vec![(10, "a"), (10, "b"), (10, "c")]);
    }
}

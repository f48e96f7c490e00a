//! The event queue: the earliest `(time, sequence)` first. Among equal
//! times the order of scheduling decides, so a run is reproducible.
//!
//! An event (a message, a client request) is over a hundred bytes: boxing
//! it or moving it at every level of a heap cost more than the rest of the
//! queue. So the events stay put in a slab whose slots are reused, and a
//! 4-ary min-heap orders 16-byte keys `time << 64 | sequence << 32 | slot`:
//! one integer comparison orders by time, then by sequence (unique), and
//! the slot rides along. Four children per node halve the depth of a
//! binary heap for the few hundred events a run keeps pending.

use stutter_core::Time;

/// Sequence numbers fit in 32 bits of a key; when they run out, the
/// pending events are renumbered in their order (a run would need four
/// billion events to get there).
const SEQ_LIMIT: u64 = 1 << 32;

pub struct Queue<E> {
    /// 4-ary min-heap of keys.
    heap: Vec<u128>,
    /// Events by slot; `None` for a free slot (listed in `free`).
    slab: Vec<Option<E>>,
    free: Vec<u32>,
    /// The last sequence number given.
    seq: u64,
    seq_limit: u64,
}

impl<E> Default for Queue<E> {
    fn default() -> Self {
        Queue { heap: Vec::new(), slab: Vec::new(), free: Vec::new(), seq: 0, seq_limit: SEQ_LIMIT }
    }
}

/// The smallest of up to four keys, and its index.
fn min_of(keys: &[u128]) -> Option<(usize, u128)> {
    match *keys {
        [a, b, c, d] => {
            let (i, x) = if b < a { (1, b) } else { (0, a) };
            let (j, y) = if d < c { (3, d) } else { (2, c) };
            Some(if y < x { (j, y) } else { (i, x) })
        }
        [a, b, c] => {
            let (i, x) = if b < a { (1, b) } else { (0, a) };
            Some(if c < x { (2, c) } else { (i, x) })
        }
        [a, b] => Some(if b < a { (1, b) } else { (0, a) }),
        [a] => Some((0, a)),
        _ => None,
    }
}

fn key(at: Time, seq: u64, slot: u32) -> u128 {
    (at as u128) << 64 | (seq as u128) << 32 | slot as u128
}

impl<E> Queue<E> {
    /// Schedules `ev` at `at` (never before `now`).
    pub fn push(&mut self, now: Time, at: Time, ev: E) {
        if self.seq + 1 >= self.seq_limit {
            self.renumber();
        }
        self.seq += 1;
        let slot = match self.free.pop() {
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
        };
        self.sift_up(key(at.max(now), self.seq, slot));
    }

    pub fn pop(&mut self) -> Option<(Time, E)> {
        loop {
            let top = *self.heap.first()?;
            let last = self.heap.pop()?;
            if !self.heap.is_empty() {
                self.sift_down(last);
            }
            let slot = top as u32;
            self.free.push(slot);
            // Every key names a filled slot; skipping a missing event is
            // all a queue could do about such a bug.
            if let Some(ev) = self.slab.get_mut(slot as usize).and_then(Option::take) {
                return Some(((top >> 64) as Time, ev));
            }
        }
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Appends `k` and moves it up to its place.
    fn sift_up(&mut self, k: u128) {
        let mut i = self.heap.len();
        self.heap.push(k);
        while i > 0 {
            let parent = (i - 1) / 4;
            let p = self.heap[parent];
            if p <= k {
                break;
            }
            self.heap[i] = p;
            i = parent;
        }
        self.heap[i] = k;
    }

    /// Puts `k` at the root (the old root is gone) and moves it down: the
    /// hole goes down to a leaf along the smallest children, then `k`
    /// (taken from the end, so likely large) goes up from there.
    fn sift_down(&mut self, k: u128) {
        let n = self.heap.len();
        let mut i = 0;
        loop {
            let first = 4 * i + 1;
            let Some(children) = self.heap.get(first..(first + 4).min(n)) else { break };
            let Some((j, m)) = min_of(children) else { break };
            self.heap[i] = m;
            i = first + j;
        }
        while i > 0 {
            let parent = (i - 1) / 4;
            let p = self.heap[parent];
            if p <= k {
                break;
            }
            self.heap[i] = p;
            i = parent;
        }
        self.heap[i] = k;
    }

    /// Gives the pending events sequence numbers 1.. in their order, so
    /// that numbering can go on.
    fn renumber(&mut self) {
        let mut keys = std::mem::take(&mut self.heap);
        keys.sort_unstable();
        for (i, k) in keys.iter_mut().enumerate() {
            *k = key((*k >> 64) as Time, i as u64 + 1, *k as u32);
        }
        self.seq = keys.len() as u64;
        // Sorted keys already form a min-heap.
        self.heap = keys;
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
    /// number): the same pops, in the same order.
    fn matches_an_ordered_set(mut q: Queue<u64>, rounds: u64) -> Queue<u64> {
        let mut reference = std::collections::BTreeSet::new();
        let mut x: u64 = 12345;
        let mut now = 0;
        let mut n = 0u64;
        for round in 0..rounds {
            for _ in 0..(round % 3) {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let at = (x >> 33) % 60;
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
        let q = matches_an_ordered_set(Queue::default(), 5_000);
        assert!(q.slab.len() < 40, "slots are reused: {}", q.slab.len());
    }

    #[test]
    fn renumbering_when_sequence_numbers_run_out_keeps_the_order() {
        let q = Queue { seq_limit: 16, ..Queue::default() };
        let q = matches_an_ordered_set(q, 5_000);
        assert!(q.seq < 16);
    }
}

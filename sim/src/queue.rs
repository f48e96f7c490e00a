//! The event queue: the earliest `(time, sequence)` first. Among equal
//! times the order of scheduling decides, so a run is reproducible.
//!
//! An event (a message, a client request) is over a hundred bytes: boxing
//! it or moving it at every level of a heap cost more than the rest of the
//! queue. So the events stay put in a slab whose slots are reused, and a
//! 4-ary min-heap orders small `(time, sequence, slot)` entries, compared
//! as one 128-bit number. Four children per node halve the depth of a
//! binary heap for the few hundred events a run keeps pending.
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

impl Entry {
    fn key(&self) -> u128 {
        (self.at as u128) << 64 | self.seq as u128
    }
}

pub struct Queue<E> {
    /// 4-ary min-heap by `(at, seq)`.
    heap: Vec<Entry>,
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
        Queue { heap: Vec::new(), slab: Vec::new(), free: Vec::new(), seq: 0, current: (0, 0) }
    }
}

/// The smallest of up to four entries, and its index.
fn min_of(es: &[Entry]) -> Option<(usize, Entry)> {
    let min2 = |i: usize, a: Entry, j: usize, b: Entry| if b.key() < a.key() { (j, b) } else { (i, a) };
    match *es {
        [a, b, c, d] => {
            let (i, x) = min2(0, a, 1, b);
            let (j, y) = min2(2, c, 3, d);
            Some(min2(i, x, j, y))
        }
        [a, b, c] => {
            let (i, x) = min2(0, a, 1, b);
            Some(min2(i, x, 2, c))
        }
        [a, b] => Some(min2(0, a, 1, b)),
        [a] => Some((0, a)),
        _ => None,
    }
}

impl<E> Queue<E> {
    /// Schedules `ev` at `at` (never before `now`).
    pub fn push(&mut self, now: Time, at: Time, ev: E) {
        let seq = self.reserve();
        self.push_reserved(at.max(now), seq, ev);
    }

    /// The next sequence number: an event pushed later with it takes the
    /// place in the order it would have had if pushed now.
    pub fn reserve(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Schedules `ev` at `at` with a sequence number from [`Queue::reserve`]
    /// (`at` not before the current event).
    pub fn push_reserved(&mut self, at: Time, seq: u64, ev: E) {
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
        self.sift_up(Entry { at, seq, slot });
    }

    pub fn pop(&mut self) -> Option<(Time, E)> {
        loop {
            let top = *self.heap.first()?;
            let last = self.heap.pop()?;
            if !self.heap.is_empty() {
                self.sift_down(last);
            }
            self.free.push(top.slot);
            self.current = (top.at, top.seq);
            // Every entry names a filled slot; skipping a missing event is
            // all a queue could do about such a bug.
            if let Some(ev) = self.slab.get_mut(top.slot as usize).and_then(Option::take) {
                return Some((top.at, ev));
            }
        }
    }

    /// `(time, sequence)` of the event popped last: what was reserved
    /// before it and is below it would have run already.
    pub fn current(&self) -> (Time, u64) {
        self.current
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Appends `e` and moves it up to its place.
    fn sift_up(&mut self, e: Entry) {
        let k = e.key();
        let mut i = self.heap.len();
        self.heap.push(e);
        while i > 0 {
            let parent = (i - 1) / 4;
            let p = self.heap[parent];
            if p.key() <= k {
                break;
            }
            self.heap[i] = p;
            i = parent;
        }
        self.heap[i] = e;
    }

    /// Puts `e` at the root (the old root is gone) and moves it down: the
    /// hole goes down to a leaf along the smallest children, then `e`
    /// (taken from the end, so likely large) goes up from there.
    fn sift_down(&mut self, e: Entry) {
        let k = e.key();
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
            if p.key() <= k {
                break;
            }
            self.heap[i] = p;
            i = parent;
        }
        self.heap[i] = e;
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

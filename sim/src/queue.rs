//! The event queue: the earliest `(time, sequence)` first. Among equal
//! times the order of scheduling decides, so a run is reproducible.

use std::collections::BinaryHeap;

use stutter_core::Time;

struct Scheduled<E> {
    at: Time,
    seq: u64,
    ev: Box<E>,
}

impl<E> PartialEq for Scheduled<E> {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl<E> Eq for Scheduled<E> {}
impl<E> PartialOrd for Scheduled<E> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for Scheduled<E> {
    // Reversed: BinaryHeap is a max-heap.
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

pub struct Queue<E> {
    heap: BinaryHeap<Scheduled<E>>,
    seq: u64,
}

impl<E> Default for Queue<E> {
    fn default() -> Self {
        Queue { heap: BinaryHeap::new(), seq: 0 }
    }
}

impl<E> Queue<E> {
    /// Schedules `ev` at `at` (never before `now`).
    pub fn push(&mut self, now: Time, at: Time, ev: E) {
        self.seq += 1;
        self.heap.push(Scheduled { at: at.max(now), seq: self.seq, ev: Box::new(ev) });
    }

    pub fn pop(&mut self) -> Option<(Time, E)> {
        self.heap.pop().map(|s| (s.at, *s.ev))
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
}

//! The replicated log of one replica: a window of slots above `trimmed`.

use std::collections::VecDeque;

use crate::types::{Instance, Slot};

#[derive(Clone, Debug, Default)]
pub struct Log {
    /// Highest slot removed by trimming; `entries[0]` is slot `trimmed + 1`.
    trimmed: Slot,
    entries: VecDeque<Option<Instance>>,
    /// Trimmed instances not yet freed. A trim removes tens of thousands of
    /// instances at once (one per slot since the last snapshot); freeing
    /// them all in one protocol step took 7–14 ms of a replica's loop (each
    /// free touches memory last seen long ago), a stall every client
    /// request of that moment waited for. They are freed a few at a time
    /// as new instances arrive instead.
    dead: VecDeque<Option<Instance>>,
}

/// Trimmed instances freed per new instance: more than one, so that the
/// dead outpace the arrivals and memory stays bounded.
const FREE_PER_PUT: usize = 4;

impl Log {
    pub fn trimmed(&self) -> Slot {
        self.trimmed
    }

    /// Highest slot holding an instance, or `trimmed` if none.
    pub fn last_index(&self) -> Slot {
        self.trimmed + self.entries.len() as u64
    }

    pub fn get(&self, slot: Slot) -> Option<&Instance> {
        if slot <= self.trimmed {
            return None;
        }
        self.entries
            .get((slot - self.trimmed - 1) as usize)?
            .as_ref()
    }

    pub fn get_mut(&mut self, slot: Slot) -> Option<&mut Instance> {
        if slot <= self.trimmed {
            return None;
        }
        self.entries
            .get_mut((slot - self.trimmed - 1) as usize)?
            .as_mut()
    }

    /// Stores an instance in its slot, replacing what was there. Slots at or
    /// below `trimmed` are ignored (they are executed and gone).
    pub fn put(&mut self, inst: Instance) {
        for _ in 0..FREE_PER_PUT {
            if self.dead.pop_front().is_none() {
                break;
            }
        }
        if inst.slot <= self.trimmed {
            return;
        }
        let idx = (inst.slot - self.trimmed - 1) as usize;
        while self.entries.len() <= idx {
            self.entries.push_back(None);
        }
        self.entries[idx] = Some(inst);
    }

    /// Removes every slot up to and including `up_to`.
    pub fn trim(&mut self, up_to: Slot) {
        if up_to <= self.trimmed {
            return;
        }
        let n = ((up_to - self.trimmed) as usize).min(self.entries.len());
        // The kept tail is short (slots above the trim point); it is what
        // moves, the trimmed instances change owner without being touched.
        let kept = self.entries.split_off(n);
        let mut gone = std::mem::replace(&mut self.entries, kept);
        if self.dead.is_empty() {
            self.dead = gone;
        } else {
            self.dead.append(&mut gone);
        }
        // Past the end, `last_index() == trimmed`.
        self.trimmed = up_to;
    }

    /// Trimmed instances not freed yet.
    pub fn unfreed(&self) -> usize {
        self.dead.len()
    }

    /// Instances above `after`, in slot order.
    pub fn iter_from(&self, after: Slot) -> impl Iterator<Item = &Instance> {
        let skip = after.0.saturating_sub(self.trimmed.0) as usize;
        self.entries.iter().skip(skip).flatten()
    }

    /// Drops trailing empty slots so that `last_index` names a real instance.
    pub fn shrink_tail(&mut self) {
        while matches!(self.entries.back(), Some(None)) {
            self.entries.pop_back();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Ballot, InstanceState, Value};

    fn inst(slot: u64) -> Instance {
        Instance {
            slot: Slot(slot),
            ballot: Ballot(1),
            value: Value::Noop,
            state: InstanceState::InProgress,
        }
    }

    fn slots<'a>(it: impl Iterator<Item = &'a Instance>) -> Vec<u64> {
        it.map(|i| i.slot.0).collect()
    }

    #[test]
    fn put_get_trim() {
        let mut log = Log::default();
        assert_eq!(log.last_index(), Slot(0));
        log.put(inst(3));
        assert_eq!(log.last_index(), Slot(3));
        assert!(log.get(Slot(1)).is_none());
        assert_eq!(log.get(Slot(3)).map(|i| i.slot), Some(Slot(3)));
        log.put(inst(1));
        log.trim(Slot(2));
        assert_eq!(log.trimmed(), Slot(2));
        assert!(log.get(Slot(1)).is_none());
        assert_eq!(slots(log.iter_from(Slot(0))), vec![3]);
        log.put(inst(1)); // below the trim point: ignored
        assert_eq!(log.last_index(), Slot(3));
        log.trim(Slot(5));
        assert_eq!(log.last_index(), Slot(5));
        assert_eq!(log.trimmed(), Slot(5));
        log.put(inst(7));
        assert_eq!(log.last_index(), Slot(7));
        assert!(log.get(Slot(6)).is_none());
        assert_eq!(slots(log.iter_from(Slot(0))), vec![7]);
    }

    #[test]
    fn trimmed_instances_are_freed_a_few_per_new_instance() {
        let mut log = Log::default();
        for s in 1..=1000 {
            log.put(inst(s));
        }
        log.trim(Slot(990));
        assert_eq!(log.unfreed(), 990);
        assert_eq!(
            slots(log.iter_from(Slot(0))),
            (991..=1000).collect::<Vec<_>>()
        );
        assert!(log.get(Slot(990)).is_none());
        assert_eq!(log.get(Slot(991)).map(|i| i.slot), Some(Slot(991)));
        for s in 1001..=1100 {
            log.put(inst(s));
        }
        assert_eq!(log.unfreed(), 990 - 100 * FREE_PER_PUT);
        // A second trim before the first one's instances are all freed.
        log.trim(Slot(1050));
        assert_eq!(log.unfreed(), 990 - 100 * FREE_PER_PUT + 60);
        assert_eq!(log.get(Slot(1051)).map(|i| i.slot), Some(Slot(1051)));
        for s in 1101..=1400 {
            log.put(inst(s));
        }
        assert_eq!(log.unfreed(), 0);
        assert_eq!(log.last_index(), Slot(1400));
    }
}

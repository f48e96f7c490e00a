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
        self.trimmed + self.entries.len() as Slot
    }

    pub fn get(&self, slot: Slot) -> Option<&Instance> {
        if slot <= self.trimmed {
            return None;
        }
        self.entries.get((slot - self.trimmed - 1) as usize)?.as_ref()
    }

    pub fn get_mut(&mut self, slot: Slot) -> Option<&mut Instance> {
        if slot <= self.trimmed {
            return None;
        }
        self.entries.get_mut((slot - self.trimmed - 1) as usize)?.as_mut()
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
        let skip = after.saturating_sub(self.trimmed) as usize;
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
    use crate::types::{InstanceState, Value};

    fn inst(slot: Slot) -> Instance {
        Instance { slot, ballot: 1, value: Value::Noop, state: InstanceState::InProgress }
    }

    #[test]
    fn put_get_trim() {
        let mut log = Log::default();
        assert_eq!(log.last_index(), 0);
        log.put(inst(3));
        assert_eq!(log.last_index(), 3);
        assert!(log.get(1).is_none());
        assert_eq!(log.get(3).map(|i| i.slot), Some(3));
        log.put(inst(1));
        log.trim(2);
        assert_eq!(log.trimmed(), 2);
        assert!(log.get(1).is_none());
        assert_eq!(log.iter_from(0).map(|i| i.slot).collect::<Vec<_>>(), vec![3]);
        log.put(inst(1)); // below the trim point: ignored
        assert_eq!(log.last_index(), 3);
        log.trim(5);
        assert_eq!(log.last_index(), 5);
        assert_eq!(log.trimmed(), 5);
        log.put(inst(7));
        assert_eq!(log.last_index(), 7);
        assert!(log.get(6).is_none());
        assert_eq!(log.iter_from(0).map(|i| i.slot).collect::<Vec<_>>(), vec![7]);
    }

    #[test]
    fn trimmed_instances_are_freed_a_few_per_new_instance() {
        let mut log = Log::default();
        for s in 1..=1000 {
            log.put(inst(s));
        }
        log.trim(990);
        assert_eq!(log.unfreed(), 990);
        assert_eq!(log.iter_from(0).map(|i| i.slot).collect::<Vec<_>>(), (991..=1000).collect::<Vec<_>>());
        assert!(log.get(990).is_none());
        assert_eq!(log.get(991).map(|i| i.slot), Some(991));
        for s in 1001..=1100 {
            log.put(inst(s));
        }
        assert_eq!(log.unfreed(), 990 - 100 * FREE_PER_PUT);
        // A second trim before the first one's instances are all freed.
        log.trim(1050);
        assert_eq!(log.unfreed(), 990 - 100 * FREE_PER_PUT + 60);
        assert_eq!(log.get(1051).map(|i| i.slot), Some(1051));
        for s in 1101..=1400 {
            log.put(inst(s));
        }
        assert_eq!(log.unfreed(), 0);
        assert_eq!(log.last_index(), 1400);
    }
}

//! The replicated log of one replica: a window of slots above `trimmed`.

use std::collections::VecDeque;

use crate::types::{Instance, Slot};

#[derive(Clone, Debug, Default)]
pub struct Log {
    /// Highest slot removed by trimming; `entries[0]` is slot `trimmed + 1`.
    trimmed: Slot,
    entries: VecDeque<Option<Instance>>,
}

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
        while self.trimmed < up_to {
            self.entries.pop_front();
            self.trimmed += 1;
        }
        // Keep `last_index() >= trimmed` meaningful when trimming past the end.
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
    }
}

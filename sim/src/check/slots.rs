//! A map keyed by slot number for the checkers: slots of a run are dense
//! from 1, so a vector indexed by slot holds them without a tree's lookups
//! on every protocol step; a slot far beyond the dense range (only a
//! badly broken core would produce one) goes to a tree instead of growing
//! the vector without bound.

use std::collections::BTreeMap;

use stutter_core::Slot;

/// Slots below this are kept in the vector.
const DENSE: Slot = Slot(1 << 20);

pub struct SlotMap<T> {
    dense: Vec<Option<T>>,
    sparse: BTreeMap<Slot, T>,
    len: usize,
}

impl<T> Default for SlotMap<T> {
    fn default() -> Self {
        SlotMap {
            dense: Vec::new(),
            sparse: BTreeMap::new(),
            len: 0,
        }
    }
}

impl<T> SlotMap<T> {
    pub fn get(&self, slot: Slot) -> Option<&T> {
        if slot < DENSE {
            self.dense.get(slot.0 as usize)?.as_ref()
        } else {
            self.sparse.get(&slot)
        }
    }

    /// Inserts `value` at `slot` unless the slot holds one already; returns
    /// the value it holds then.
    pub fn get_or_insert(&mut self, slot: Slot, value: T) -> &T {
        if slot < DENSE {
            let i = slot.0 as usize;
            if self.dense.len() <= i {
                self.dense.resize_with(i + 1, || None);
            }
            let cell = &mut self.dense[i];
            if cell.is_none() {
                self.len += 1;
            }
            cell.get_or_insert(value)
        } else {
            let len = &mut self.len;
            self.sparse.entry(slot).or_insert_with(|| {
                *len += 1;
                value
            })
        }
    }

    /// Number of slots that hold a value.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The filled slots in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = (Slot, &T)> {
        let dense = self
            .dense
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.as_ref().map(|v| (Slot(i as u64), v)));
        dense.chain(self.sparse.iter().map(|(s, v)| (*s, v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_value_stays_and_iteration_is_in_slot_order() {
        let mut m = SlotMap::default();
        assert_eq!(*m.get_or_insert(Slot(3), "a"), "a");
        assert_eq!(*m.get_or_insert(Slot(3), "b"), "a");
        m.get_or_insert(Slot(1), "c");
        m.get_or_insert(DENSE + 5, "far");
        m.get_or_insert(DENSE + 1, "near-far");
        assert_eq!(m.len(), 4);
        assert_eq!(m.get(Slot(2)), None);
        assert_eq!(m.get(DENSE + 5), Some(&"far"));
        let all: Vec<_> = m.iter().collect();
        assert_eq!(
            all,
            vec![
                (Slot(1), &"c"),
                (Slot(3), &"a"),
                (DENSE + 1, &"near-far"),
                (DENSE + 5, &"far")
            ]
        );
    }
}

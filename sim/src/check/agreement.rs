//! Agreement: no two executions of one slot (on any replica, before or
//! after a crash) saw different values, and replicas that executed up to
//! the same slot hold the same digest of everything executed.

use stutter_core::{ReplicaId, Slot};

use super::slots::SlotMap;
use super::Violations;
use crate::trace_value::Ids;

#[derive(Default)]
pub struct Agreement {
    /// last_executed ↦ digest, from the first replica to get there.
    digests: SlotMap<(ReplicaId, u64)>,
    /// slot ↦ the requests executed there (`None` = no-op).
    slots: SlotMap<(ReplicaId, Ids)>,
    /// Per replica, the last `(last_executed, digest)` found consistent:
    /// a step that executed nothing need not be looked up again.
    checked: Vec<Option<(Slot, u64)>>,
}

impl Agreement {
    pub fn executed_prefix(
        &mut self,
        r: ReplicaId,
        last_executed: Slot,
        digest: u64,
        v: &mut Violations,
    ) {
        let i = r as usize;
        if self.checked.get(i).copied().flatten() == Some((last_executed, digest)) {
            return;
        }
        let (other, d0) = *self.digests.get_or_insert(last_executed, (r, digest));
        if d0 != digest {
            v.add("executed-prefix", format!("replicas {r} and {other} executed different prefixes up to slot {last_executed}"));
            return;
        }
        if self.checked.len() <= i {
            self.checked.resize(i + 1, None);
        }
        self.checked[i] = Some((last_executed, digest));
    }

    pub fn slot(&mut self, r: ReplicaId, slot: Slot, value: Ids, v: &mut Violations) {
        match self.slots.get(slot) {
            None => {
                self.slots.get_or_insert(slot, (r, value));
            }
            Some((other, seen)) if *seen != value => {
                let d = format!("slot {slot}: replica {r} executed {value:?}, replica {other} executed {seen:?}");
                v.add("slot-agreement", d);
            }
            _ => {}
        }
    }

    /// The executed log: slot ↦ (first replica to execute it, value).
    pub fn into_slots(self) -> SlotMap<(ReplicaId, Ids)> {
        self.slots
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn different_values_in_one_slot_and_different_prefixes_are_violations() {
        let mut a = Agreement::default();
        let mut v = Violations::default();
        let one = Slot(1);
        a.slot(
            0,
            one,
            Some(vec![stutter_core::RequestId { client: 1, seq: 1 }]),
            &mut v,
        );
        a.slot(
            1,
            one,
            Some(vec![stutter_core::RequestId { client: 1, seq: 1 }]),
            &mut v,
        );
        a.executed_prefix(0, one, 42, &mut v);
        a.executed_prefix(1, one, 42, &mut v);
        assert!(v.into_vec().is_empty());
        let mut v = Violations::default();
        a.slot(2, one, None, &mut v);
        a.executed_prefix(2, one, 43, &mut v);
        let checks: Vec<_> = v.into_vec().into_iter().map(|x| x.check).collect();
        assert_eq!(checks, vec!["slot-agreement", "executed-prefix"]);
    }
}

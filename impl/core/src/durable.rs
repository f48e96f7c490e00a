//! The acceptor state a replica must not forget, rebuilt from its
//! write-ahead log after a restart.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::io::Record;
use crate::state_machine::Snapshot;
use crate::types::{Ballot, Slot, Value};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DurableState {
    pub ballot: Ballot,
    /// Highest slot removed by trimming.
    pub trimmed: Slot,
    pub snapshot: Option<Arc<Snapshot>>,
    /// Accepted instances above `trimmed`: slot ↦ (ballot, value).
    pub accepted: BTreeMap<Slot, (Ballot, Value)>,
}

impl DurableState {
    /// Folds one record, in the order they were written.
    pub fn apply(&mut self, record: Record) {
        match record {
            Record::Ballot(b) => self.ballot = self.ballot.max(b),
            Record::Accept {
                slot,
                ballot,
                value,
            } => {
                if slot > self.trimmed {
                    self.accepted.insert(slot, (ballot, value));
                }
            }
            Record::Snapshot { trimmed, snapshot } => {
                let newer = self
                    .snapshot
                    .as_ref()
                    .is_none_or(|s| snapshot.last_executed >= s.last_executed);
                if newer {
                    self.snapshot = Some(snapshot);
                }
                if trimmed > self.trimmed {
                    self.trimmed = trimmed;
                    // A corrupt log may name the last possible slot: then
                    // nothing above it is kept (no overflow).
                    self.accepted = match trimmed.0.checked_add(1) {
                        Some(next) => self.accepted.split_off(&Slot(next)),
                        None => BTreeMap::new(),
                    };
                }
            }
        }
    }

    /// The records that rebuild exactly this state: what a compacted
    /// write-ahead log holds.
    pub fn to_records(&self) -> Vec<Record> {
        let mut out = Vec::with_capacity(self.accepted.len() + 2);
        if self.ballot > Ballot::ZERO {
            out.push(Record::Ballot(self.ballot));
        }
        if let Some(s) = &self.snapshot {
            out.push(Record::Snapshot {
                trimmed: self.trimmed,
                snapshot: s.clone(),
            });
        }
        for (slot, (ballot, value)) in &self.accepted {
            out.push(Record::Accept {
                slot: *slot,
                ballot: *ballot,
                value: value.clone(),
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fold_keeps_highest_ballot_latest_accept_and_trims() {
        let mut d = DurableState::default();
        d.apply(Record::Ballot(Ballot(257)));
        d.apply(Record::Accept {
            slot: Slot(1),
            ballot: Ballot(257),
            value: Value::Noop,
        });
        d.apply(Record::Accept {
            slot: Slot(2),
            ballot: Ballot(257),
            value: Value::Noop,
        });
        d.apply(Record::Accept {
            slot: Slot(2),
            ballot: Ballot(513),
            value: Value::Noop,
        });
        d.apply(Record::Ballot(Ballot(2)));
        assert_eq!(d.ballot, Ballot(257));
        assert_eq!(d.accepted.get(&Slot(2)).map(|e| e.0), Some(Ballot(513)));
        let snap = Arc::new(Snapshot {
            last_executed: Slot(1),
            ..Default::default()
        });
        d.apply(Record::Snapshot {
            trimmed: Slot(1),
            snapshot: snap,
        });
        assert_eq!(
            d.accepted.keys().copied().collect::<Vec<_>>(),
            vec![Slot(2)]
        );
        let mut again = DurableState::default();
        for r in d.to_records() {
            again.apply(r);
        }
        assert_eq!(again, d);
    }

    #[test]
    fn a_snapshot_record_at_the_last_slot_trims_everything_without_overflow() {
        let mut d = DurableState::default();
        d.apply(Record::Accept {
            slot: Slot(3),
            ballot: Ballot(1),
            value: Value::Noop,
        });
        let snap = Arc::new(Snapshot {
            last_executed: Slot(u64::MAX),
            ..Default::default()
        });
        d.apply(Record::Snapshot {
            trimmed: Slot(u64::MAX),
            snapshot: snap,
        });
        assert_eq!(d.trimmed, Slot(u64::MAX));
        assert!(d.accepted.is_empty());
    }
}

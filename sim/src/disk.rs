//! One replica's disk: a write-ahead log whose appends become durable in
//! order after a drawn latency (one device per replica). A crash loses
//! every record not yet synced; a restart rebuilds the replica from the
//! synced records alone.

use stutter_core::{DurableState, Record, Time};

#[derive(Default)]
pub struct Disk {
    unsynced: Vec<(u64, Vec<Record>)>,
    /// The durable appends, in order (kept as appended: no copying).
    synced: Vec<Vec<Record>>,
    free_at: Time,
}

impl Disk {
    /// Queues an append at `now` that takes `latency`; returns when it
    /// completes (after every earlier one).
    pub fn append(&mut self, now: Time, latency: Time, token: u64, records: Vec<Record>) -> Time {
        self.unsynced.push((token, records));
        let done = (now + latency).max(self.free_at);
        self.free_at = done;
        done
    }

    /// Appends with tokens up to `token` are durable.
    pub fn synced(&mut self, token: u64) {
        // A process numbers its appends in order, so the durable ones are
        // a prefix; moving it out needs no new list.
        let k = self
            .unsynced
            .iter()
            .take_while(|(t, _)| *t <= token)
            .count();
        if self
            .unsynced
            .get(k..)
            .is_some_and(|rest| rest.iter().all(|(t, _)| *t > token))
        {
            self.synced
                .extend(self.unsynced.drain(..k).map(|(_, recs)| recs));
            return;
        }
        let mut keep = Vec::new();
        for (t, recs) in self.unsynced.drain(..) {
            if t <= token {
                self.synced.push(recs);
            } else {
                keep.push((t, recs));
            }
        }
        self.unsynced = keep;
    }

    /// The process died: what was not synced is gone.
    pub fn crash(&mut self) {
        self.unsynced.clear();
    }

    /// The process restarts at `now` on an idle device.
    pub fn restart(&mut self, now: Time) {
        self.free_at = now;
    }

    /// The acceptor state the synced records rebuild.
    pub fn durable(&self) -> DurableState {
        let mut d = DurableState::default();
        for rec in self.synced.iter().flatten().cloned() {
            d.apply(rec);
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stutter_core::{Ballot, Record};

    #[test]
    fn appends_complete_in_order_and_a_crash_loses_the_unsynced() {
        let mut d = Disk::default();
        assert_eq!(d.append(0, 100, 1, vec![Record::Ballot(Ballot(1))]), 100);
        // A faster second append still completes after the first.
        assert_eq!(d.append(10, 20, 2, vec![Record::Ballot(Ballot(2))]), 100);
        d.synced(1);
        d.crash();
        assert_eq!(d.durable().ballot, Ballot(1));
    }

    #[test]
    fn appends_up_to_the_token_become_durable_in_order_whatever_the_token_order() {
        let b = |x: u64| vec![Record::Ballot(Ballot(x))];
        let mut d = Disk::default();
        d.append(0, 1, 1, b(1));
        d.append(0, 1, 3, b(3));
        d.append(0, 1, 2, b(2));
        let synced = |d: &Disk| d.synced.iter().flatten().cloned().collect::<Vec<_>>();
        d.synced(2);
        assert_eq!(
            synced(&d),
            vec![Record::Ballot(Ballot(1)), Record::Ballot(Ballot(2))]
        );
        d.synced(3);
        assert_eq!(
            synced(&d),
            vec![
                Record::Ballot(Ballot(1)),
                Record::Ballot(Ballot(2)),
                Record::Ballot(Ballot(3))
            ]
        );
        assert!(d.unsynced.is_empty());
    }
}

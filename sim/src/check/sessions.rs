//! Session tables: a replica's at-most-once table is part of its replicated
//! state, so at every executed slot it must be the one the executed log
//! gives in the reference model. Tables are sampled where a replica takes
//! its state from elsewhere than its own execution — a snapshot installed
//! from the leader or from a promise, a restart from its write-ahead log —
//! and at the end of the run, then compared while the log is replayed.
//! (A wrong table passes every other check until a retry meets it.)

use stutter_core::{ReplicaId, SessionTable, Slot, Snapshot};

use super::model::Model;
use super::Violations;

/// One replica's table at one executed slot.
struct Sample {
    replica: ReplicaId,
    at: Slot,
    when: &'static str,
    sessions: SessionTable,
}

#[derive(Default)]
pub struct Sessions {
    samples: Vec<Sample>,
    /// Samples already compared (they are sorted by slot before the replay).
    next: usize,
}

impl Sessions {
    /// Replica `r`'s table now, `when` naming the moment for the report.
    pub fn sample(&mut self, r: ReplicaId, when: &'static str, sm: &Snapshot) {
        self.samples.push(Sample {
            replica: r,
            at: sm.last_executed,
            when,
            sessions: sm.sessions.clone(),
        });
    }

    /// Orders the samples by slot for [`Sessions::compare_at`].
    pub fn start_replay(&mut self) {
        self.samples.sort_by_key(|s| s.at);
        self.next = 0;
    }

    /// Compares every sample taken at `slot` with the model's table after
    /// the log up to `slot`; called for each slot in order from zero.
    pub fn compare_at(&mut self, slot: Slot, model: &Model, v: &mut Violations) {
        while let Some(s) = self.samples.get(self.next).filter(|s| s.at <= slot) {
            self.next += 1;
            if s.at < slot {
                continue; // beyond a gap of the log: not judged
            }
            if let Some(d) = difference(&s.sessions, model) {
                v.add(
                    "sessions",
                    format!("replica {} {} at slot {}: {d}", s.replica, s.when, s.at),
                );
            }
        }
    }
}

/// The first client whose entry differs between a replica's table and the
/// model's, or a difference in the ids handed out, described.
fn difference(table: &SessionTable, model: &Model) -> Option<String> {
    let clients = table
        .iter()
        .map(|(c, _)| c)
        .chain(model.last_applied.keys());
    for c in clients {
        let mine = table.get(c).map(|s| (s.seq, &s.reply, s.slot));
        let log = model.last_applied.get(c).map(|(seq, reply)| {
            (
                *seq,
                reply,
                model.applied_in.get(c).copied().unwrap_or_default(),
            )
        });
        if mine != log {
            return Some(format!(
                "client {c}'s session is {mine:?}, the executed log gives {log:?}"
            ));
        }
    }
    if table.registered() != model.registered {
        return Some(format!(
            "{} ids registered, the executed log gives {}",
            table.registered(),
            model.registered
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use stutter_core::{Op, Reply, Request, Session};

    #[test]
    fn a_table_that_differs_from_the_log_at_its_slot_is_a_violation() {
        let base = stutter_core::REGISTERED_BASE;
        let mut model = Model::default();
        let mut sessions = Sessions::default();
        // Slot 1 registers client `base`, slot 2 is its put.
        let mut sm = Snapshot {
            last_executed: Slot(2),
            ..Default::default()
        };
        sm.sessions.register(Slot(1), usize::MAX);
        let put = Session {
            seq: 1,
            reply: Reply::Done,
            slot: Slot(2),
        };
        sm.sessions.record(base, put, usize::MAX);
        sessions.sample(0, "after installing a snapshot", &sm);
        // Stale: the table of slot 2 claimed at slot 3.
        sm.last_executed = Slot(3);
        sessions.sample(1, "after a restart", &sm);
        sessions.start_replay();
        let mut v = Violations::default();
        sessions.compare_at(Slot(0), &model, &mut v);
        model.slot = Slot(1);
        model.apply(&Request::register(5));
        sessions.compare_at(Slot(1), &model, &mut v);
        model.slot = Slot(2);
        model.apply(&Request::new(
            base,
            1,
            Op::Put {
                key: "k".into(),
                value: "v".into(),
            },
        ));
        sessions.compare_at(Slot(2), &model, &mut v);
        model.slot = Slot(3);
        model.apply(&Request::new(base, 2, Op::Del { key: "k".into() }));
        sessions.compare_at(Slot(3), &model, &mut v);
        let found = v.into_vec();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0]
                .detail
                .starts_with("replica 1 after a restart at slot 3"),
            "{found:?}"
        );
    }
}

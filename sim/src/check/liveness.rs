//! Liveness and convergence: every operation issued completes once the
//! faults have healed (within the scenario's liveness bound), and all
//! running replicas end at the same executed slot with the state the
//! replayed log gives.

use stutter_core::Slot;

use super::linearizability::Replayed;
use super::{Final, FinalState, Violations};
use crate::history::{HistOp, Outcome};

pub fn check(
    history: &[HistOp],
    finals: &[Final],
    states: &[FinalState],
    log: &Replayed,
    slots: usize,
    v: &mut Violations,
) {
    let pending = history
        .iter()
        .filter(|o| o.outcome == Outcome::Pending)
        .count();
    if pending > 0 {
        let first = history
            .iter()
            .find(|o| o.outcome == Outcome::Pending)
            .map(|o| (o.client, o.seq, o.invoke));
        v.add(
            "liveness",
            format!("{pending} operations still pending after the faults healed, e.g. {first:?}"),
        );
    }
    let top = finals.iter().map(|f| f.1).max().unwrap_or(Slot::ZERO);
    for (r, le, _) in finals {
        if *le != top {
            v.add(
                "convergence",
                format!("replica {r} executed up to {le}, others up to {top}"),
            );
        }
    }
    if log.complete && top.0 as usize == slots {
        for (r, le, kv) in states {
            if *le == top && *kv != log.model.kv {
                v.add(
                    "final-state",
                    format!("replica {r}: key-value state differs from the replayed log"),
                );
            }
        }
    }
}

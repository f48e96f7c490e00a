//! The checkers run on every simulated run: per-slot agreement, identical
//! executed prefixes, ballot monotonicity (across restarts too),
//! linearizability of the client history (white-box: by execution order,
//! with reads served outside the log placed between executed requests),
//! no lost acknowledged write, final states equal, and liveness.

use std::collections::BTreeMap;

use bytes::Bytes;
use stutter_core::{Ballot, ClientId, Replica, ReplicaId, Request, Seq, Slot, Snapshot};

use crate::history::{HistOp, Outcome, F};
use crate::trace_value::Ids;

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Violation {
    pub check: &'static str,
    pub detail: String,
}

pub struct Checker {
    max_ballot: Vec<Ballot>,
    /// last_executed ↦ digest, from the first replica to get there.
    digests: BTreeMap<Slot, (ReplicaId, u64)>,
    /// slot ↦ the requests executed there (`None` = no-op).
    slots: BTreeMap<Slot, (ReplicaId, Ids)>,
    violations: Vec<Violation>,
}

/// Keeps runs with a violation from producing megabytes of messages.
const MAX_VIOLATIONS: usize = 20;

impl Checker {
    pub fn new(n: usize) -> Checker {
        Checker { max_ballot: vec![Ballot::ZERO; n], digests: BTreeMap::new(), slots: BTreeMap::new(), violations: Vec::new() }
    }

    fn violation(&mut self, check: &'static str, detail: String) {
        if self.violations.len() < MAX_VIOLATIONS {
            self.violations.push(Violation { check, detail });
        }
    }

    pub fn after_step(&mut self, r: ReplicaId, rep: &Replica) {
        let b = rep.ballot();
        if b < self.max_ballot[r as usize] {
            self.violation("ballot-monotonic", format!("replica {r}: ballot {} after {}", b, self.max_ballot[r as usize]));
        }
        self.max_ballot[r as usize] = self.max_ballot[r as usize].max(b);
        let le = rep.last_executed();
        let d = rep.executed_digest();
        match self.digests.get(&le) {
            None => {
                self.digests.insert(le, (r, d));
            }
            Some((other, d0)) if *d0 != d => {
                let other = *other;
                self.violation("executed-prefix", format!("replicas {r} and {other} executed different prefixes up to slot {le}"));
            }
            _ => {}
        }
    }

    /// A crash may lose a ballot that was never made durable (and so never
    /// shown to anyone): monotonicity is then judged against the durable one.
    pub fn crashed(&mut self, r: ReplicaId, durable_ballot: Ballot) {
        self.max_ballot[r as usize] = durable_ballot;
    }

    pub fn executed(&mut self, r: ReplicaId, slot: Slot, value: Ids) {
        match self.slots.get(&slot) {
            None => {
                self.slots.insert(slot, (r, value));
            }
            Some((other, v)) if *v != value => {
                let d = format!("slot {slot}: replica {r} executed {value:?}, replica {other} executed {v:?}");
                self.violation("slot-agreement", d);
            }
            _ => {}
        }
    }

    pub fn finish(
        mut self,
        history: &[HistOp],
        requests: &BTreeMap<(ClientId, Seq), Request>,
        finals: &[(ReplicaId, Slot, u64)],
        states: &[(ReplicaId, Slot, BTreeMap<Bytes, Bytes>)],
    ) -> Vec<Violation> {
        // Replay the executed log on a model: where each request took
        // effect, and what it returned.
        let mut model = Snapshot::default();
        let mut position: BTreeMap<(ClientId, Seq), (usize, stutter_core::Reply)> = BTreeMap::new();
        // key ↦ (position, value after it) for every request that changed it.
        let mut versions: BTreeMap<Bytes, Vec<(usize, Option<Bytes>)>> = BTreeMap::new();
        let mut pos = 0usize;
        let mut expected_slot = Slot(1);
        let mut complete_log = true;
        let slots = std::mem::take(&mut self.slots);
        for (slot, (_, ids)) in &slots {
            if *slot != expected_slot {
                complete_log = false;
                break;
            }
            expected_slot += 1;
            for id in ids.iter().flatten() {
                let Some(req) = requests.get(id) else {
                    self.violation("linearizability", format!("slot {slot} executed unknown request {id:?}"));
                    continue;
                };
                let key = req.op.key().clone();
                let before = model.kv.get(&key).cloned();
                if let stutter_core::Outcome::Applied(reply) = model.execute(req) {
                    let after = model.kv.get(&key).cloned();
                    if after != before {
                        versions.entry(key).or_default().push((pos, after));
                    }
                    position.insert(*id, (pos, reply));
                    pos += 1;
                }
            }
        }
        if !complete_log {
            self.violation("observability", format!("executed log has a gap before slot {expected_slot}"));
        }

        // Every acknowledged operation took effect exactly where its reply says.
        let mut order: Vec<(usize, u64, Option<u64>)> = Vec::new();
        let mut reads: Vec<&HistOp> = Vec::new();
        for op in history {
            if op.f == F::Read && op.is_ok() && !position.contains_key(&(op.client, op.seq)) {
                // Served outside the log (ReadIndex): placed below.
                reads.push(op);
                continue;
            }
            let key = (op.client, op.seq);
            match (&op.outcome, position.get(&key)) {
                (Outcome::Ok { value, cas_ok }, Some((p, reply))) => {
                    let consistent = match (op.f, reply) {
                        (F::Read, stutter_core::Reply::Value(v)) => {
                            let got = v.as_ref().and_then(|b| std::str::from_utf8(b).ok()?.parse::<u64>().ok()).unwrap_or(0);
                            got == *value
                        }
                        (F::Write, stutter_core::Reply::Done) => true,
                        (F::Cas, stutter_core::Reply::Cas { ok, .. }) => ok == cas_ok,
                        _ => false,
                    };
                    if !consistent {
                        self.violation(
                            "linearizability",
                            format!("client {} seq {} ({:?} k{}) answered {:?} but took effect as {reply:?}", op.client, op.seq, op.f, op.key, op.outcome),
                        );
                    }
                    order.push((*p, op.invoke, op.complete));
                }
                (Outcome::Ok { .. }, None) => {
                    let what = if op.f == F::Write { "lost-write" } else { "linearizability" };
                    self.violation(what, format!("client {} seq {} ({:?} k{}) acknowledged but never executed", op.client, op.seq, op.f, op.key));
                }
                (Outcome::Fail(_), Some(_)) => {
                    self.violation("linearizability", format!("client {} seq {} failed but was executed", op.client, op.seq));
                }
                (Outcome::Pending, Some((p, _))) => order.push((*p, op.invoke, None)),
                _ => {}
            }
        }
        // Real-time order: an operation that completed before another was
        // invoked must take effect before it.
        order.sort();
        let mut max_invoke = 0;
        let mut worst: Option<(usize, u64, u64)> = None;
        for (p, invoke, complete) in &order {
            if let Some(c) = complete {
                if *c < max_invoke && worst.is_none() {
                    worst = Some((*p, *c, max_invoke));
                }
            }
            max_invoke = max_invoke.max(*invoke);
        }
        if let Some((p, c, inv)) = worst {
            self.violation("linearizability", format!("operation at position {p} completed at {c} µs, before an operation ordered earlier was invoked at {inv} µs"));
        }
        self.check_reads(&reads, requests, &order, &versions, pos);

        // Liveness: everything issued completed once the faults healed.
        let pending = history.iter().filter(|o| o.outcome == Outcome::Pending).count();
        if pending > 0 {
            let first = history.iter().find(|o| o.outcome == Outcome::Pending).map(|o| (o.client, o.seq, o.invoke));
            self.violation("liveness", format!("{pending} operations still pending after the faults healed, e.g. {first:?}"));
        }

        // All replicas converge to the same executed state, equal to the model's.
        let top = finals.iter().map(|f| f.1).max().unwrap_or(Slot::ZERO);
        for (r, le, _) in finals {
            if *le != top {
                self.violation("convergence", format!("replica {r} executed up to {le}, others up to {top}"));
            }
        }
        if complete_log && top.0 as usize == slots.len() {
            for (r, le, kv) in states {
                if *le == top && *kv != model.kv {
                    self.violation("final-state", format!("replica {r}: key-value state differs from the replayed log"));
                }
            }
        }
        self.violations
    }

    /// Reads served without going through the log take effect between two
    /// executed requests: in "gap" `g` (after the requests at positions
    /// `< g`). A read is linearizable if some gap returns its value, comes
    /// after every executed request that completed before the read was
    /// invoked, before every one invoked after the read completed, and (per
    /// key) not before the gap of a read that completed before it was
    /// invoked. Reads are placed greedily in invocation order at the lowest
    /// such gap, which finds a placement whenever one exists.
    fn check_reads(
        &mut self,
        reads: &[&HistOp],
        requests: &BTreeMap<(ClientId, Seq), Request>,
        order: &[(usize, u64, Option<u64>)],
        versions: &BTreeMap<Bytes, Vec<(usize, Option<Bytes>)>>,
        gaps: usize,
    ) {
        if reads.is_empty() {
            return;
        }
        // Executed requests by completion time (prefix max of position + 1)
        // and by invocation time (suffix min of position).
        let mut by_complete: Vec<(u64, usize)> = order.iter().filter_map(|(p, _, c)| c.map(|c| (c, p + 1))).collect();
        by_complete.sort();
        for i in 1..by_complete.len() {
            by_complete[i].1 = by_complete[i].1.max(by_complete[i - 1].1);
        }
        let mut by_invoke: Vec<(u64, usize)> = order.iter().map(|(p, i, _)| (*i, *p)).collect();
        by_invoke.sort();
        for i in (0..by_invoke.len().saturating_sub(1)).rev() {
            by_invoke[i].1 = by_invoke[i].1.min(by_invoke[i + 1].1);
        }
        let mut reads: Vec<&HistOp> = reads.to_vec();
        reads.sort_by_key(|r| (r.invoke, r.client, r.seq));
        // Per key: (completion, gap) of the reads placed so far.
        let mut placed: BTreeMap<Bytes, Vec<(u64, usize)>> = BTreeMap::new();
        let none: Vec<(usize, Option<Bytes>)> = Vec::new();
        for r in reads {
            let (Some(req), Some(complete), Outcome::Ok { value, .. }) = (requests.get(&(r.client, r.seq)), r.complete, &r.outcome) else {
                continue;
            };
            let key = req.op.key().clone();
            // Lowest gap: after every request that completed before the read began.
            let n = by_complete.partition_point(|(c, _)| *c < r.invoke);
            let mut lo = if n == 0 { 0 } else { by_complete[n - 1].1 };
            if let Some(ps) = placed.get(&key) {
                lo = ps.iter().filter(|(c, _)| *c < r.invoke).map(|(_, g)| *g).fold(lo, usize::max);
            }
            // Highest gap: before every request invoked after the read ended.
            let m = by_invoke.partition_point(|(i, _)| *i <= complete);
            let hi = if m < by_invoke.len() { by_invoke[m].1 } else { gaps };
            // Gaps where the key holds the value read: version j holds from
            // just after its write to the write of version j + 1.
            let vs = versions.get(&key).unwrap_or(&none);
            let parse = |v: &Option<Bytes>| v.as_ref().and_then(|b| std::str::from_utf8(b).ok()?.parse::<u64>().ok()).unwrap_or(0);
            let mut ranges: Vec<(usize, usize)> = Vec::new();
            if *value == 0 {
                ranges.push((0, vs.first().map_or(gaps, |v| v.0)));
            }
            for (j, (p, v)) in vs.iter().enumerate() {
                if parse(v) == *value {
                    ranges.push((p + 1, vs.get(j + 1).map_or(gaps, |n| n.0)));
                }
            }
            let gap = ranges.iter().filter(|(_, end)| *end >= lo).map(|(start, _)| (*start).max(lo)).min();
            match gap {
                Some(g) if g <= hi => placed.entry(key).or_default().push((complete, g)),
                _ => {
                    let d = format!(
                        "client {} seq {} read k{} = {} (invoked {} µs, completed {} µs): no point between positions {lo} and {hi} of the executed log has that value",
                        r.client, r.seq, r.key, value, r.invoke, complete
                    );
                    self.violation("linearizability", d);
                }
            }
        }
    }
}

//! Linearizability, white-box: the executed log, replayed on an
//! independent key-value model with its session table, gives each
//! request's position and result. Every acknowledged operation must be in
//! it with the result it returned (an acknowledged write that never
//! executed is a lost write); an operation that completed before another
//! was invoked must come first; reads served outside the log (ReadIndex)
//! must fit between two positions of it.

use std::collections::BTreeMap;

use bytes::Bytes;
use stutter_core::{ClientId, ReplicaId, Request, Seq, Slot, Snapshot};

use super::Violations;
use crate::history::{HistOp, Outcome, F};
use crate::trace_value::Ids;

/// What replaying the executed log gave.
pub struct Replayed {
    /// The state after the whole log.
    pub model: Snapshot,
    /// Whether the log had no gap.
    pub complete: bool,
}

pub fn check(
    history: &[HistOp],
    requests: &BTreeMap<(ClientId, Seq), Request>,
    slots: &BTreeMap<Slot, (ReplicaId, Ids)>,
    v: &mut Violations,
) -> Replayed {
    // Replay the executed log on a model: where each request took
    // effect, and what it returned.
    let mut model = Snapshot::default();
    let mut position: BTreeMap<(ClientId, Seq), (usize, stutter_core::Reply)> = BTreeMap::new();
    // key ↦ (position, value after it) for every request that changed it.
    let mut versions: BTreeMap<Bytes, Vec<(usize, Option<Bytes>)>> = BTreeMap::new();
    let mut pos = 0usize;
    let mut expected_slot = Slot(1);
    let mut complete_log = true;
    for (slot, (_, ids)) in slots {
        if *slot != expected_slot {
            complete_log = false;
            break;
        }
        expected_slot += 1;
        for id in ids.iter().flatten() {
            let Some(req) = requests.get(id) else {
                v.add("linearizability", format!("slot {slot} executed unknown request {id:?}"));
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
        v.add("observability", format!("executed log has a gap before slot {expected_slot}"));
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
                    v.add(
                        "linearizability",
                        format!("client {} seq {} ({:?} k{}) answered {:?} but took effect as {reply:?}", op.client, op.seq, op.f, op.key, op.outcome),
                    );
                }
                order.push((*p, op.invoke, op.complete));
            }
            (Outcome::Ok { .. }, None) => {
                let what = if op.f == F::Write { "lost-write" } else { "linearizability" };
                v.add(what, format!("client {} seq {} ({:?} k{}) acknowledged but never executed", op.client, op.seq, op.f, op.key));
            }
            (Outcome::Fail(_), Some(_)) => {
                v.add("linearizability", format!("client {} seq {} failed but was executed", op.client, op.seq));
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
        v.add("linearizability", format!("operation at position {p} completed at {c} µs, before an operation ordered earlier was invoked at {inv} µs"));
    }
    check_reads(&reads, requests, &order, &versions, pos, v);
    Replayed { model, complete: complete_log }
}

/// Reads served without going through the log take effect between two
/// executed requests: in "gap" `g` (after the requests at positions
/// `< g`). A read is linearizable if some gap returns its value, comes
/// after every executed request that completed before the read was
/// invoked, before every one invoked after the read completed, and (per
/// key) not before the gap of a read that completed before it was
/// invoked. Reads are placed greedily in invocation order at the lowest
/// such gap, which finds a placement whenever one exists.
/// The reads of one key placed so far: not yet released, by completion
/// (earliest first), and the highest gap of those released.
type Placed = (std::collections::BinaryHeap<std::cmp::Reverse<(u64, usize)>>, usize);

fn check_reads(
    reads: &[&HistOp],
    requests: &BTreeMap<(ClientId, Seq), Request>,
    order: &[(usize, u64, Option<u64>)],
    versions: &BTreeMap<Bytes, Vec<(usize, Option<Bytes>)>>,
    gaps: usize,
    v: &mut Violations,
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
    // Per key: the value of each version (parsed once), and where each
    // value was written (values are unique per write; 0 is absent).
    let parse = |v: &Option<Bytes>| v.as_ref().and_then(|b| std::str::from_utf8(b).ok()?.parse::<u64>().ok()).unwrap_or(0);
    let mut written: BTreeMap<&Bytes, BTreeMap<u64, Vec<usize>>> = BTreeMap::new();
    for (key, vs) in versions {
        let by_value = written.entry(key).or_default();
        for (j, (_, v)) in vs.iter().enumerate() {
            by_value.entry(parse(v)).or_default().push(j);
        }
    }
    let mut reads: Vec<&HistOp> = reads.to_vec();
    reads.sort_by_key(|r| (r.invoke, r.client, r.seq));
    // Per key, the reads placed so far: those that completed before the
    // current read's invocation bound its gap from below. Reads come in
    // invocation order, so once released (completed before one read's
    // invocation) a placed read stays released: a heap by completion and
    // the running maximum of the released gaps.
    let mut placed: BTreeMap<Bytes, Placed> = BTreeMap::new();
    let none: Vec<(usize, Option<Bytes>)> = Vec::new();
    let no_values: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    for r in reads {
        let (Some(req), Some(complete), Outcome::Ok { value, .. }) = (requests.get(&(r.client, r.seq)), r.complete, &r.outcome) else {
            continue;
        };
        let key = req.op.key().clone();
        // Lowest gap: after every request that completed before the read began.
        let n = by_complete.partition_point(|(c, _)| *c < r.invoke);
        let mut lo = if n == 0 { 0 } else { by_complete[n - 1].1 };
        if let Some((heap, released)) = placed.get_mut(&key) {
            while heap.peek().is_some_and(|std::cmp::Reverse((c, _))| *c < r.invoke) {
                if let Some(std::cmp::Reverse((_, g))) = heap.pop() {
                    *released = (*released).max(g);
                }
            }
            lo = lo.max(*released);
        }
        // Highest gap: before every request invoked after the read ended.
        let m = by_invoke.partition_point(|(i, _)| *i <= complete);
        let hi = if m < by_invoke.len() { by_invoke[m].1 } else { gaps };
        // Gaps where the key holds the value read: version j holds from
        // just after its write to the write of version j + 1.
        let vs = versions.get(&key).unwrap_or(&none);
        let mut ranges: Vec<(usize, usize)> = Vec::new();
        if *value == 0 {
            ranges.push((0, vs.first().map_or(gaps, |v| v.0)));
        }
        let by_value = written.get(&key).unwrap_or(&no_values);
        for j in by_value.get(value).into_iter().flatten() {
            if let Some((p, _)) = vs.get(*j) {
                ranges.push((p + 1, vs.get(j + 1).map_or(gaps, |n| n.0)));
            }
        }
        let gap = ranges.iter().filter(|(_, end)| *end >= lo).map(|(start, _)| (*start).max(lo)).min();
        match gap {
            Some(g) if g <= hi => placed.entry(key).or_default().0.push(std::cmp::Reverse((complete, g))),
            _ => {
                let d = format!(
                    "client {} seq {} read k{} = {} (invoked {} µs, completed {} µs): no point between positions {lo} and {hi} of the executed log has that value",
                    r.client, r.seq, r.key, value, r.invoke, complete
                );
                v.add("linearizability", d);
            }
        }
    }
}

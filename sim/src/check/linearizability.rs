//! Linearizability, white-box: the executed log, replayed on the
//! reference key-value model (`model.rs`, written apart from the core) with
//! its session table, gives each request's position and result. Every acknowledged operation must be in
//! it with the result it returned (an acknowledged write that never
//! executed is a lost write); an operation that completed before another
//! was invoked must come first; reads served outside the log (ReadIndex)
//! must fit between two positions of it.

use std::collections::BTreeMap;

use bytes::Bytes;
use stutter_core::{ClientId, ReplicaId, Request, Seq, Slot};

use super::model::{Effect, Model};
use super::sessions::Sessions;
use super::slots::SlotMap;
use super::Violations;
use crate::history::{HistOp, Outcome, F};
use crate::trace_value::Ids;

/// What replaying the executed log gave.
pub struct Replayed {
    /// The state after the whole log.
    pub model: Model,
    /// Whether the log had no gap.
    pub complete: bool,
}

/// A value as the history counts it: a number, 0 for absent.
fn parse(v: Option<&Bytes>) -> u64 {
    v.and_then(|b| std::str::from_utf8(b).ok()?.parse::<u64>().ok())
        .unwrap_or(0)
}

/// The value a read's reply carries, as the history counts it.
fn read_value(reply: &stutter_core::Reply) -> Option<u64> {
    match reply {
        stutter_core::Reply::Value(v) => Some(parse(v.as_ref())),
        _ => None,
    }
}

/// `(client, seq)` ↦ history index (the last, should one repeat): per
/// client, its `(seq, index)` pairs, which a client issues in order (so
/// they come sorted; they are sorted if not).
struct Index(BTreeMap<ClientId, Vec<(Seq, usize)>>);

impl Index {
    fn new(history: &[HistOp]) -> Index {
        let mut by_client: BTreeMap<ClientId, Vec<(Seq, usize)>> = BTreeMap::new();
        for (i, op) in history.iter().enumerate() {
            by_client.entry(op.client).or_default().push((op.seq, i));
        }
        for pairs in by_client.values_mut() {
            if !pairs.is_sorted() {
                pairs.sort();
            }
        }
        Index(by_client)
    }

    fn get(&self, (client, seq): (ClientId, Seq)) -> Option<usize> {
        let pairs = self.0.get(&client)?;
        let end = pairs.partition_point(|(s, _)| *s <= seq);
        let (s, i) = pairs.get(end.checked_sub(1)?)?;
        (*s == seq).then_some(*i)
    }
}

/// Judges the history against the executed log; `requests[i]` is the
/// request of `history[i]` (same client, seq and key). The replicas'
/// session tables sampled in `sessions` are compared with the model's on
/// the way.
pub fn check(
    history: &[HistOp],
    requests: &[Request],
    slots: &SlotMap<(ReplicaId, Ids)>,
    sessions: &mut Sessions,
    session_limit: usize,
    registered_expiry: bool,
    v: &mut Violations,
) -> Replayed {
    let index = Index::new(history);
    // Replay the executed log on a model: where each request took
    // effect, and what it returned (by history index).
    let mut model = Model::bounded(session_limit);
    model.registered_expiry = registered_expiry;
    sessions.start_replay();
    sessions.compare_at(Slot::ZERO, &model, v);
    let mut position: Vec<Option<(usize, stutter_core::Reply)>> = vec![None; history.len()];
    // key ↦ (position, value after it) for every request that changed it.
    let mut versions: BTreeMap<u64, Vec<(usize, u64)>> = BTreeMap::new();
    let mut pos = 0usize;
    let mut expected_slot = Slot(1);
    let mut complete_log = true;
    for (slot, (_, ids)) in slots.iter() {
        if slot != expected_slot {
            complete_log = false;
            break;
        }
        expected_slot += 1;
        for id in ids.iter().flatten() {
            // Seq 0 is a `Register` (no history operation stands for it):
            // the model assigns the id the replicas did.
            if id.seq == 0 {
                model.slot = slot;
                model.apply(&Request::register(id.client));
                continue;
            }
            let Some((i, req, op)) = index
                .get(id.key())
                .and_then(|i| Some((i, requests.get(i)?, history.get(i)?)))
            else {
                v.add(
                    "linearizability",
                    format!("slot {slot} executed unknown request {id:?}"),
                );
                continue;
            };
            let key = req.op.key();
            let before = model.kv.get(key).cloned();
            model.slot = slot;
            if let Effect::Applied(reply) = model.apply(req) {
                if position[i].is_some() {
                    v.add(
                        "at-most-once",
                        format!(
                            "slot {slot} executed client {} seq {} a second time",
                            req.client, req.seq
                        ),
                    );
                }
                let after = model.kv.get(key);
                if after != before.as_ref() {
                    versions
                        .entry(op.key)
                        .or_default()
                        .push((pos, parse(after)));
                }
                position[i] = Some((pos, reply));
                pos += 1;
            }
        }
        sessions.compare_at(slot, &model, v);
    }
    if !complete_log {
        v.add(
            "observability",
            format!("executed log has a gap before slot {expected_slot}"),
        );
    }

    // Every acknowledged operation took effect exactly where its reply says.
    let mut order: Vec<(usize, u64, Option<u64>)> = Vec::with_capacity(history.len());
    let mut reads: Vec<usize> = Vec::new();
    for (i, op) in history.iter().enumerate() {
        let at = index
            .get((op.client, op.seq))
            .and_then(|j| position.get(j)?.as_ref());
        if op.f == F::Read && op.is_ok() && at.is_none() {
            // Served outside the log (ReadIndex): placed below.
            reads.push(i);
            continue;
        }
        if let (F::Read, Outcome::Ok { value, .. }, Some((p, reply))) = (op.f, &op.outcome, at) {
            if read_value(reply) != Some(*value) {
                // An attempt of this read executed in the log (at a
                // leader that had not executed the client's register yet)
                // but
                // its answer is not the one that came back: a later
                // attempt was served by ReadIndex (at a leader that had
                // not executed as far, or where the client had a session)
                // and answered first. A read changes nothing, so the log
                // attempt only stands where an unknown outcome would; the
                // answer must fit some point of the read's interval, as
                // any read served outside the log.
                order.push((*p, op.invoke, None));
                reads.push(i);
                continue;
            }
        }
        match (&op.outcome, at) {
            (Outcome::Ok { value, cas_ok }, Some((p, reply))) => {
                let consistent = match (op.f, reply) {
                    (F::Read, stutter_core::Reply::Value(v)) => {
                        let got = v
                            .as_ref()
                            .and_then(|b| std::str::from_utf8(b).ok()?.parse::<u64>().ok())
                            .unwrap_or(0);
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
                let what = if op.f == F::Write {
                    "lost-write"
                } else {
                    "linearizability"
                };
                v.add(
                    what,
                    format!(
                        "client {} seq {} ({:?} k{}) acknowledged but never executed",
                        op.client, op.seq, op.f, op.key
                    ),
                );
            }
            (Outcome::Fail(_), Some(_)) => {
                v.add(
                    "linearizability",
                    format!(
                        "client {} seq {} failed but was executed",
                        op.client, op.seq
                    ),
                );
            }
            // Pending, or answered "session expired": the outcome is
            // unknown, so an execution, if any, may be anywhere after the
            // invocation.
            (Outcome::Pending | Outcome::Unknown(_), Some((p, _))) => {
                order.push((*p, op.invoke, None))
            }
            _ => {}
        }
    }
    // By invocation: the history is in invocation order, so this comes
    // sorted (and is sorted if not; the order among equal times does not
    // matter, see `check_reads`).
    let mut by_invoke: Vec<(u64, usize)> = order.iter().map(|(p, i, _)| (*i, *p)).collect();
    if !by_invoke.is_sorted_by_key(|(i, _)| *i) {
        by_invoke.sort_unstable_by_key(|(i, _)| *i);
    }
    // Real-time order: an operation that completed before another was
    // invoked must take effect before it.
    sort_by_position(&mut order, pos);
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
    check_reads(history, &reads, &order, by_invoke, &versions, pos, v);
    Replayed {
        model,
        complete: complete_log,
    }
}

/// Sorts `(position, invoke, complete)` entries. Positions are distinct
/// unless the history repeats a request, so each entry goes straight to
/// its place; a repeat falls back to sorting.
fn sort_by_position(order: &mut Vec<(usize, u64, Option<u64>)>, positions: usize) {
    let mut placed: Vec<Option<(u64, Option<u64>)>> = vec![None; positions];
    for (p, invoke, complete) in order.iter() {
        match placed.get_mut(*p) {
            Some(cell @ None) => *cell = Some((*invoke, *complete)),
            _ => {
                order.sort();
                return;
            }
        }
    }
    order.clear();
    order.extend(
        placed
            .into_iter()
            .enumerate()
            .filter_map(|(p, e)| e.map(|(i, c)| (p, i, c))),
    );
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
type Placed = (
    std::collections::BinaryHeap<std::cmp::Reverse<(u64, usize)>>,
    usize,
);

fn check_reads(
    history: &[HistOp],
    reads: &[usize],
    order: &[(usize, u64, Option<u64>)],
    mut by_invoke: Vec<(u64, usize)>,
    versions: &BTreeMap<u64, Vec<(usize, u64)>>,
    gaps: usize,
    v: &mut Violations,
) {
    if reads.is_empty() {
        return;
    }
    // Executed requests by completion time (prefix max of position + 1)
    // and by invocation time (suffix min of position).
    let mut by_complete: Vec<(u64, usize)> = order
        .iter()
        .filter_map(|(p, _, c)| c.map(|c| (c, p + 1)))
        .collect();
    // Only the boundaries between distinct times are looked up (prefix
    // maxima and suffix minima there), so the order among equal times
    // does not matter.
    by_complete.sort_unstable_by_key(|(c, _)| *c);
    for i in 1..by_complete.len() {
        by_complete[i].1 = by_complete[i].1.max(by_complete[i - 1].1);
    }
    for i in (0..by_invoke.len().saturating_sub(1)).rev() {
        by_invoke[i].1 = by_invoke[i].1.min(by_invoke[i + 1].1);
    }
    // Per key: where each value was written, as (value, version index)
    // sorted by value (values are unique per write; 0 is absent).
    let mut written: BTreeMap<u64, Vec<(u64, usize)>> = BTreeMap::new();
    for (key, vs) in versions {
        let mut by_value: Vec<(u64, usize)> =
            vs.iter().enumerate().map(|(j, (_, v))| (*v, j)).collect();
        by_value.sort_unstable();
        written.insert(*key, by_value);
    }
    let mut reads: Vec<&HistOp> = reads.iter().filter_map(|i| history.get(*i)).collect();
    reads.sort_by_key(|r| (r.invoke, r.client, r.seq));
    // Per key, the reads placed so far: those that completed before the
    // current read's invocation bound its gap from below. Reads come in
    // invocation order, so once released (completed before one read's
    // invocation) a placed read stays released: a heap by completion and
    // the running maximum of the released gaps.
    let mut placed: BTreeMap<u64, Placed> = BTreeMap::new();
    let none: Vec<(usize, u64)> = Vec::new();
    let no_values: Vec<(u64, usize)> = Vec::new();
    for r in reads {
        let (Some(complete), Outcome::Ok { value, .. }) = (r.complete, &r.outcome) else {
            continue;
        };
        let key = r.key;
        // Lowest gap: after every request that completed before the read began.
        let n = by_complete.partition_point(|(c, _)| *c < r.invoke);
        let mut lo = if n == 0 { 0 } else { by_complete[n - 1].1 };
        if let Some((heap, released)) = placed.get_mut(&key) {
            while heap
                .peek()
                .is_some_and(|std::cmp::Reverse((c, _))| *c < r.invoke)
            {
                if let Some(std::cmp::Reverse((_, g))) = heap.pop() {
                    *released = (*released).max(g);
                }
            }
            lo = lo.max(*released);
        }
        // Highest gap: before every request invoked after the read ended.
        let m = by_invoke.partition_point(|(i, _)| *i <= complete);
        let hi = if m < by_invoke.len() {
            by_invoke[m].1
        } else {
            gaps
        };
        // Gaps where the key holds the value read: version j holds from
        // just after its write to the write of version j + 1.
        let vs = versions.get(&key).unwrap_or(&none);
        let absent = (*value == 0).then(|| (0, vs.first().map_or(gaps, |v| v.0)));
        let by_value = written.get(&key).unwrap_or(&no_values);
        let first = by_value.partition_point(|(v, _)| v < value);
        let same_value = by_value
            .get(first..)
            .unwrap_or_default()
            .iter()
            .take_while(|(v, _)| v == value)
            .map(|(_, j)| j);
        let held = same_value.filter_map(|j| {
            let (p, _) = vs.get(*j)?;
            Some((p + 1, vs.get(j + 1).map_or(gaps, |n| n.0)))
        });
        let gap = absent
            .into_iter()
            .chain(held)
            .filter(|(_, end)| *end >= lo)
            .map(|(start, _)| start.max(lo))
            .min();
        match gap {
            Some(g) if g <= hi => placed
                .entry(key)
                .or_default()
                .0
                .push(std::cmp::Reverse((complete, g))),
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

//! Judging a run, black-box, from what the clients saw:
//!
//! - **linearizability**, per key (a register: put and get), by the
//!   Wing-Gong search with memoization: some order of the operations
//!   respects real time (an operation that completed before another was
//!   invoked comes first) and gives every acknowledged get the value of the
//!   last put before it. A put with an unknown outcome may take effect at
//!   any point after its invocation or never; a get with an unknown outcome
//!   and any definitely rejected operation are left out. The final reads,
//!   issued after every fault was healed, are in the history: a write lost
//!   after its acknowledgement shows here.
//! - **lost acknowledged writes**, named as such: an acknowledged put `p`
//!   such that the final read of its key returned the value of a put that
//!   completed before `p` was invoked (or nothing, if none). Values are
//!   unique, so `p` was undone.
//! - **executed digests agree**: replicas that report the same
//!   `last_executed` report the same digest; and after healing, all
//!   replicas reach the same `last_executed` within 60 s.
//!
//! Unlike `sim`'s checker (sim/src/check/linearizability.rs) this sees no
//! replica's log: the node under test is a black box here.

use std::collections::{BTreeMap, BTreeSet};

use crate::history::{Finals, History, Kind, Op, Outcome};

pub fn all(h: &History, finals: &Finals) -> Vec<String> {
    let mut v = Vec::new();
    let mut keys: BTreeMap<u64, Vec<&Op>> = BTreeMap::new();
    for op in &h.ops {
        keys.entry(op.key).or_default().push(op);
    }
    for (key, ops) in &keys {
        if !linearizable(ops) {
            v.push(format!(
                "key {key}: the history is not linearizable ({} operations)",
                ops.len()
            ));
        }
        lost_writes(*key, ops, &mut v);
    }
    digests(finals, &mut v);
    v
}

/// An operation as the search sees it.
#[derive(Clone, Copy)]
struct Entry {
    invoke: u128,
    /// `u128::MAX`: unknown outcome (may take effect any time after).
    complete: u128,
    put: Option<u64>,
    /// For a get: the value read.
    read: Option<u64>,
    required: bool,
}

fn entries(ops: &[&Op]) -> Vec<Entry> {
    let mut es: Vec<Entry> = ops
        .iter()
        .filter_map(|o| {
            let (invoke, done) = (o.invoke.as_nanos(), o.complete.as_nanos());
            match (o.kind, o.outcome) {
                (_, Outcome::Failed) | (Kind::Get, Outcome::Unknown) => None,
                (Kind::Put(x), Outcome::Ok(_)) => Some(Entry {
                    invoke,
                    complete: done,
                    put: Some(x),
                    read: None,
                    required: true,
                }),
                (Kind::Put(x), Outcome::Unknown) => Some(Entry {
                    invoke,
                    complete: u128::MAX,
                    put: Some(x),
                    read: None,
                    required: false,
                }),
                (Kind::Get, Outcome::Ok(r)) => Some(Entry {
                    invoke,
                    complete: done,
                    put: None,
                    read: r,
                    required: true,
                }),
            }
        })
        .collect();
    // A put with an unknown outcome whose value no get returned can always
    // be taken as never having happened: in any linearization that has it,
    // no get sits between it and the next put (none read its value), so
    // removing it leaves a linearization. Left in, each such put doubles
    // the states the search may visit when it must backtrack: a run that
    // leaves many requests unanswered (a lost reply route) made the search
    // run for minutes.
    let read: BTreeSet<u64> = es
        .iter()
        .filter(|e| e.put.is_none())
        .filter_map(|e| e.read)
        .collect();
    es.retain(|e| e.required || e.put.is_some_and(|x| read.contains(&x)));
    es.sort_by_key(|e| (e.invoke, e.complete));
    es
}

/// Whether the register history `ops` (one key) is linearizable.
pub fn linearizable(ops: &[&Op]) -> bool {
    let es = entries(ops);
    let words = es.len().div_ceil(64).max(1);
    let mut seen: BTreeSet<(Vec<u64>, Option<u64>)> = BTreeSet::new();
    search(&es, &mut vec![0u64; words], None, &mut seen)
}

fn search(
    es: &[Entry],
    done: &mut Vec<u64>,
    value: Option<u64>,
    seen: &mut BTreeSet<(Vec<u64>, Option<u64>)>,
) -> bool {
    let is_done = |d: &Vec<u64>, i: usize| d[i / 64] >> (i % 64) & 1 == 1;
    if (0..es.len()).all(|i| is_done(done, i) || !es[i].required) {
        return true;
    }
    if !seen.insert((done.clone(), value)) {
        return false;
    }
    // Only an operation invoked before every pending one completed can go
    // next.
    let horizon = (0..es.len())
        .filter(|i| !is_done(done, *i))
        .map(|i| es[i].complete)
        .min()
        .unwrap_or(u128::MAX);
    for i in 0..es.len() {
        if is_done(done, i) || es[i].invoke > horizon {
            continue;
        }
        let e = es[i];
        let next = match e.put {
            Some(x) => Some(x),
            None if e.read == value => value,
            None => continue,
        };
        done[i / 64] |= 1 << (i % 64);
        if search(es, done, next, seen) {
            return true;
        }
        done[i / 64] &= !(1 << (i % 64));
    }
    false
}

fn lost_writes(key: u64, ops: &[&Op], v: &mut Vec<String>) {
    // The final reads come last in the history.
    let Some(last) = ops
        .iter()
        .rev()
        .find(|o| o.client == usize::MAX && o.acknowledged())
    else {
        return;
    };
    let Outcome::Ok(read) = last.outcome else {
        return;
    };
    let writer = read.and_then(|x| ops.iter().find(|o| o.kind == Kind::Put(x)));
    for p in ops
        .iter()
        .filter(|o| o.acknowledged() && matches!(o.kind, Kind::Put(_)))
    {
        let undone = match writer {
            Some(w) => w.complete < p.invoke && w.outcome != Outcome::Unknown,
            None => read.is_none(),
        };
        if undone {
            v.push(format!(
                "key {key}: acknowledged {:?} (at {:?}) lost: the final read returned {read:?}",
                p.kind, p.complete
            ));
        }
    }
}

fn digests(finals: &Finals, v: &mut Vec<String>) {
    let mut by_slot: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    for (le, d) in finals.status.iter().flatten() {
        by_slot.entry(*le).or_default().insert(*d);
    }
    for (le, ds) in by_slot {
        if ds.len() > 1 {
            v.push(format!(
                "replicas executed to slot {le} disagree: digests {ds:?}"
            ));
        }
    }
    if !finals.converged {
        v.push(format!(
            "replicas did not converge within 60 s of healing: {:?}",
            finals.detail
        ));
    }
}

/// The liveness judge's bound, in election timeouts (`ELECTION_TIMEOUT`
/// of the core's default configuration, which the simulated replicas run).
///
/// Why 10 (3 s): once every fault is healed, the slowest correct path to
/// an answer is a deposed leader's election timeout with its jitter (up to
/// 2 timeouts), a pre-vote and a prepare round (milliseconds), a request
/// that went to a replica which lost its leadership and is retried after
/// the client's 500 ms attempt timeout (under 2 timeouts), and a restarted
/// replica's catch-up, which the leader serves at once. That is under 5
/// timeouts; 10 leave a factor of two. The longest wait the correct node
/// showed after healing is in docs/simulator-turmoil.md ("Liveness";
/// the figures in docs/notes/). It must also stay below the client library's 5 s deadline
/// per call, so an operation that is never answered is judged by its wait
/// and not only by its `Unknown` outcome.
pub const LIVENESS_BOUND_ELECTION_TIMEOUTS: u32 = 10;

/// The core's default election timeout (`stutter_core::Config`), which the
/// simulated replicas run with.
pub fn election_timeout() -> std::time::Duration {
    std::time::Duration::from_micros(stutter_core::Config::default().election_timeout)
}

/// The liveness judge: after the last fault has healed (at `healed`: every
/// partition and hold released, every replica that did not refuse on
/// damaged state running), every client operation must be answered (done
/// or definitely rejected) within `bound`, counted from its invocation or
/// from `healed`, whichever is later. An operation whose wait exceeds the
/// bound, answered late or never (`Unknown` after the client's deadline),
/// is a violation. Lost messages and lost reply routes are not safety
/// bugs (a client times out and retries), so only this judge sees them.
/// Operations that ended (even as `Unknown`) before waiting `bound` are not
/// judged: the client gave up before the judge could.
pub fn liveness(
    h: &History,
    healed: std::time::Duration,
    bound: std::time::Duration,
) -> Vec<String> {
    let late: Vec<(usize, &Op, std::time::Duration)> = h
        .ops
        .iter()
        .enumerate()
        .filter(|(_, op)| op.complete > healed)
        .map(|(i, op)| (i, op, op.complete.saturating_sub(op.invoke.max(healed))))
        .filter(|(_, _, waited)| *waited > bound)
        .collect();
    let Some((i, op, waited)) = late.first() else {
        return Vec::new();
    };
    // One violation per run: the first late operation, and how many more.
    let who = if op.client == usize::MAX {
        "the final reader".to_string()
    } else {
        format!("client c{}", op.client)
    };
    let what = if op.outcome == Outcome::Unknown {
        "never answered"
    } else {
        "answered late"
    };
    vec![format!(
        "liveness: {who} op #{i} ({:?} key {}) invoked at {} ms, healed at {} ms: {what} after waiting {} ms > bound {} ms ({} operations in all waited past the bound)",
        op.kind,
        op.key,
        op.invoke.as_millis(),
        healed.as_millis(),
        waited.as_millis(),
        bound.as_millis(),
        late.len()
    )]
}

/// The longest wait of any operation after `healed` (for measuring the
/// correct node against the bound).
pub fn longest_wait_after(h: &History, healed: std::time::Duration) -> std::time::Duration {
    h.ops
        .iter()
        .filter(|o| o.complete > healed)
        .map(|o| o.complete.saturating_sub(o.invoke.max(healed)))
        .max()
        .unwrap_or_default()
}

/// FNV-1a over the run's observations, in order.
pub fn hash(h: &History, faults: &[String], finals: &Finals) -> u64 {
    let mut x: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |s: &str| {
        for b in s.bytes() {
            x ^= u64::from(b);
            x = x.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for op in &h.ops {
        feed(&format!("{op:?}\n"));
    }
    for f in faults {
        feed(f);
    }
    feed(&format!("{finals:?}"));
    x
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn op(key: u64, kind: Kind, invoke: u64, complete: u64, outcome: Outcome) -> Op {
        Op {
            client: 0,
            key,
            kind,
            invoke: Duration::from_millis(invoke),
            complete: Duration::from_millis(complete),
            outcome,
        }
    }

    #[test]
    fn a_read_of_an_overwritten_value_is_not_linearizable() {
        let h = [
            op(0, Kind::Put(1), 0, 10, Outcome::Ok(None)),
            op(0, Kind::Put(2), 20, 30, Outcome::Ok(None)),
            op(0, Kind::Get, 40, 50, Outcome::Ok(Some(1))),
        ];
        assert!(!linearizable(&h.iter().collect::<Vec<_>>()));
    }

    #[test]
    fn concurrent_writes_may_be_read_in_either_order() {
        let h = [
            op(0, Kind::Put(1), 0, 30, Outcome::Ok(None)),
            op(0, Kind::Put(2), 5, 35, Outcome::Ok(None)),
            op(0, Kind::Get, 40, 50, Outcome::Ok(Some(1))),
            op(0, Kind::Get, 60, 70, Outcome::Ok(Some(1))),
        ];
        assert!(linearizable(&h.iter().collect::<Vec<_>>()));
    }

    #[test]
    fn a_timed_out_write_may_take_effect_late_or_never() {
        let late = [
            op(0, Kind::Put(1), 0, 10, Outcome::Ok(None)),
            op(0, Kind::Put(2), 20, 30, Outcome::Unknown),
            op(0, Kind::Get, 40, 50, Outcome::Ok(Some(1))),
            op(0, Kind::Get, 60, 70, Outcome::Ok(Some(2))),
        ];
        assert!(linearizable(&late.iter().collect::<Vec<_>>()));
        let back = [
            op(0, Kind::Put(1), 0, 10, Outcome::Ok(None)),
            op(0, Kind::Put(2), 20, 30, Outcome::Unknown),
            op(0, Kind::Get, 40, 50, Outcome::Ok(Some(2))),
            op(0, Kind::Get, 60, 70, Outcome::Ok(Some(1))),
        ];
        assert!(!linearizable(&back.iter().collect::<Vec<_>>()));
    }

    /// Many requests left unanswered (a lost reply route) used to make the
    /// search visit every subset of them before it could reject a history;
    /// puts whose value nobody read are now left out, so this ends at once.
    #[test]
    fn unanswered_puts_nobody_read_do_not_slow_the_search() {
        let mut h: Vec<Op> = (0..60)
            .map(|i| op(0, Kind::Put(100 + i), i, i + 1, Outcome::Unknown))
            .collect();
        h.push(op(0, Kind::Put(1), 0, 200, Outcome::Ok(None)));
        h.push(op(0, Kind::Get, 300, 310, Outcome::Ok(Some(1))));
        assert!(linearizable(&h.iter().collect::<Vec<_>>()));
        // A read of a value never written: rejected, after a short search.
        h.push(op(0, Kind::Get, 400, 410, Outcome::Ok(Some(7))));
        assert!(!linearizable(&h.iter().collect::<Vec<_>>()));
        // An unanswered put that was read still counts: it took effect late.
        h.pop();
        h.push(op(0, Kind::Get, 500, 510, Outcome::Ok(Some(100))));
        assert!(linearizable(&h.iter().collect::<Vec<_>>()));
    }

    #[test]
    fn a_final_read_of_an_older_value_names_the_lost_write() {
        let mut last = op(0, Kind::Get, 100, 110, Outcome::Ok(Some(1)));
        last.client = usize::MAX;
        let h = [
            op(0, Kind::Put(1), 0, 10, Outcome::Ok(None)),
            op(0, Kind::Put(2), 20, 30, Outcome::Ok(None)),
            last,
        ];
        let mut v = Vec::new();
        lost_writes(0, &h.iter().collect::<Vec<_>>(), &mut v);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].contains("Put(2)"), "{v:?}");
    }

    /// The judge counts from the later of invocation and healing: an
    /// operation that straddles the heal is judged by its wait after it,
    /// one that ended before it is not judged, and one never answered
    /// within the bound after healing is named, late answers too.
    #[test]
    fn the_liveness_judge_counts_the_wait_after_healing() {
        let healed = Duration::from_millis(1_000);
        let bound = Duration::from_millis(3_000);
        let h = |ops: Vec<Op>| History { ops };
        // Before the heal, however long: not judged.
        assert!(liveness(
            &h(vec![op(0, Kind::Get, 0, 900, Outcome::Unknown)]),
            healed,
            bound
        )
        .is_empty());
        // Straddling: 3.5 s in all, 2.5 s after the heal: within the bound.
        assert!(liveness(
            &h(vec![op(0, Kind::Get, 0, 3_500, Outcome::Ok(None))]),
            healed,
            bound
        )
        .is_empty());
        // After the heal, answered after 3.1 s: late.
        let v = liveness(
            &h(vec![op(0, Kind::Put(1), 2_000, 5_100, Outcome::Ok(None))]),
            healed,
            bound,
        );
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].contains("answered late") && v[0].contains("3100 ms"),
            "{v:?}"
        );
        // Never answered (the client's deadline): named as such, one
        // violation for the run with the count of late operations.
        let v = liveness(
            &h(vec![
                op(0, Kind::Get, 2_000, 7_000, Outcome::Unknown),
                op(1, Kind::Get, 2_000, 7_000, Outcome::Unknown),
            ]),
            healed,
            bound,
        );
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].contains("never answered") && v[0].contains("2 operations"),
            "{v:?}"
        );
        // A client that gave up before the bound is not judged.
        assert!(liveness(
            &h(vec![op(0, Kind::Get, 2_000, 4_000, Outcome::Unknown)]),
            healed,
            bound
        )
        .is_empty());
    }
}

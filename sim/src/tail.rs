//! Where the GC study's tail comes from: each measured operation is put in
//! the first class whose window it was in flight during (from its intended
//! start to its reply), in this order: a leadership hand-off (from the
//! leader stopping its proposals to the new leader's election), the
//! `AFTER_HAND_OFF` that follows (the new leader works off what queued up
//! meanwhile), the old leader's own collection after it, a follower's collection under a
//! grant, a collection forced at its deadline (or without headroom), a
//! pause the runtime took without asking, and none of these. For each
//! class: how many operations, their latency percentiles, and how many of
//! the run's slowest 0.1 % and 0.01 % it holds.

use serde::Serialize;
use stutter_core::{ReplicaId, Time};

use crate::history::Outcome;
use crate::scenario::{MS, SEC};
use crate::study::Setup;
use crate::world::{GcMark, GcStep};

/// How long after a new leader's election an operation still counts as
/// delayed by the hand-off (its stall is about 3 ms, and the backlog it
/// leaves takes about as long again to work off at half of capacity).
pub const AFTER_HAND_OFF: Time = 10 * MS;

pub const CLASSES: [&str; 7] = [
    "hand-off",
    "after hand-off",
    "old leader collecting",
    "follower collecting",
    "forced collection",
    "runtime pause",
    "none",
];

#[derive(Clone, Debug, Serialize)]
pub struct Class {
    pub name: &'static str,
    /// Windows of this class in the measured part of the run.
    pub windows: usize,
    /// Their mean length, ms.
    pub mean_window_ms: f64,
    pub ops: usize,
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    /// Operations of this class at or above the run's p99.9 / p99.99.
    pub above_p999: usize,
    pub above_p9999: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct Split {
    pub rate: f64,
    pub p99: f64,
    pub p999: f64,
    pub p9999: f64,
    pub max: f64,
    pub hand_offs: usize,
    /// Mean of a hand-off's two parts, ms: the leader's wait for its
    /// target to accept what is in flight, then the target's election.
    pub transfer_ms: f64,
    pub election_ms: f64,
    pub classes: Vec<Class>,
}

/// Mean `(transfer, election)` of the hand-offs, ms.
fn hand_off_parts(log: &[GcStep]) -> (f64, f64) {
    let mut parts = Vec::new();
    for (i, s) in log.iter().enumerate() {
        let GcMark::HandOff { to } = s.mark else {
            continue;
        };
        let start = log[..i]
            .iter()
            .rev()
            .find(|p| {
                p.replica == s.replica && p.mark == GcMark::HandOffStart && p.at + 200 * MS >= s.at
            })
            .map_or(s.at, |p| p.at);
        if let Some(e) = log[i..]
            .iter()
            .find(|p| p.replica == to && p.mark == GcMark::Elected)
        {
            parts.push(((s.at - start) as f64, (e.at - s.at) as f64));
        }
    }
    if parts.is_empty() {
        return (0.0, 0.0);
    }
    let n = parts.len() as f64 * MS as f64;
    (
        parts.iter().map(|p| p.0).sum::<f64>() / n,
        parts.iter().map(|p| p.1).sum::<f64>() / n,
    )
}

/// `[from, to)` windows, µs, per class.
fn windows(
    log: &[GcStep],
    pauses: &[(ReplicaId, Time, Time)],
    end: Time,
) -> [Vec<(Time, Time)>; 6] {
    let mut w: [Vec<(Time, Time)>; 6] = Default::default();
    // Collections: from `Collect` to the same replica's next `Done`.
    let done_after = |r: ReplicaId, t: Time| {
        log.iter()
            .find(|s| s.replica == r && s.at >= t && s.mark == GcMark::Done)
            .map_or(end, |s| s.at)
    };
    for (i, s) in log.iter().enumerate() {
        match s.mark {
            GcMark::HandOff { to } => {
                // From the leader's last `HandOffStart` (if this hand-off's:
                // within the transfer wait and some) to `to`'s election.
                let start = log[..i]
                    .iter()
                    .rev()
                    .find(|p| {
                        p.replica == s.replica
                            && p.mark == GcMark::HandOffStart
                            && p.at + 200 * MS >= s.at
                    })
                    .map_or(s.at, |p| p.at);
                let elected = log[i..]
                    .iter()
                    .find(|p| p.replica == to && p.mark == GcMark::Elected)
                    .map_or(end, |p| p.at);
                w[0].push((start, elected));
                w[1].push((elected, elected.saturating_add(AFTER_HAND_OFF)));
            }
            GcMark::Collect { granted } => {
                let until = done_after(s.replica, s.at);
                // The replica's previous coordination step that is not its
                // due notice: a hand-off means it collects as the old leader.
                let prev = log[..i]
                    .iter()
                    .rev()
                    .find(|p| p.replica == s.replica && p.mark != GcMark::Due)
                    .map(|p| p.mark);
                let k = match (granted, prev) {
                    (_, Some(GcMark::HandOff { .. })) => 2,
                    (true, _) => 3,
                    (false, _) => 4,
                };
                w[k].push((s.at, until));
            }
            _ => {}
        }
    }
    // Runtime pauses not inside a coordinated collection of their replica.
    for &(r, at, d) in pauses {
        let inside = log.iter().enumerate().any(|(i, s)| {
            s.replica == r
                && matches!(s.mark, GcMark::Collect { .. })
                && s.at <= at
                && log[i..]
                    .iter()
                    .find(|p| p.replica == r && p.mark == GcMark::Done)
                    .is_none_or(|p| p.at >= at)
        });
        if !inside {
            w[5].push((at, at + d));
        }
    }
    w
}

fn pct(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

pub fn split(setup: &Setup, rate: f64, seed: u64) -> Option<Split> {
    let s = setup.scenario(rate)?;
    let out = crate::run(s.clone(), seed);
    let from = (setup.warmup * SEC as f64) as Time;
    let until = s.duration;
    let pauses: Vec<(ReplicaId, Time, Time)> = out
        .gc
        .iter()
        .flat_map(|(r, st)| st.pauses.iter().map(move |(t, d, _)| (*r, *t, *d)))
        .collect();
    let w = windows(&out.gc_log, &pauses, out.end);
    // (latency ms, class) of every measured operation.
    let mut ops: Vec<(f64, usize)> = Vec::new();
    for op in out
        .history
        .iter()
        .filter(|o| o.intended >= from && o.intended < until)
    {
        let done = match (op.complete, &op.outcome) {
            (Some(c), Outcome::Ok { .. }) => c,
            (_, Outcome::Fail(_)) => continue,
            _ => out.end,
        };
        let class = w
            .iter()
            .position(|ws| ws.iter().any(|(a, b)| *a < done && op.intended < *b))
            .unwrap_or(CLASSES.len() - 1);
        ops.push(((done - op.intended) as f64 / MS as f64, class));
    }
    let mut all: Vec<f64> = ops.iter().map(|o| o.0).collect();
    all.sort_by(f64::total_cmp);
    let (p999, p9999) = (pct(&all, 0.999), pct(&all, 0.9999));
    let classes = CLASSES
        .iter()
        .enumerate()
        .map(|(k, name)| {
            let mut lat: Vec<f64> = ops.iter().filter(|o| o.1 == k).map(|o| o.0).collect();
            lat.sort_by(f64::total_cmp);
            let ws: Vec<&(Time, Time)> = w.get(k).map_or_else(Vec::new, |v| {
                v.iter().filter(|(a, b)| *b > from && *a < until).collect()
            });
            let mean = if ws.is_empty() {
                0.0
            } else {
                ws.iter().map(|(a, b)| (b - a) as f64).sum::<f64>() / ws.len() as f64 / MS as f64
            };
            Class {
                name,
                windows: ws.len(),
                mean_window_ms: mean,
                ops: lat.len(),
                p50: pct(&lat, 0.5),
                p99: pct(&lat, 0.99),
                p999: pct(&lat, 0.999),
                max: lat.last().copied().unwrap_or(0.0),
                above_p999: lat.iter().filter(|l| **l >= p999).count(),
                above_p9999: lat.iter().filter(|l| **l >= p9999).count(),
            }
        })
        .collect();
    let (transfer_ms, election_ms) = hand_off_parts(&out.gc_log);
    Some(Split {
        rate,
        transfer_ms,
        election_ms,
        p99: pct(&all, 0.99),
        p999,
        p9999,
        max: all.last().copied().unwrap_or(0.0),
        hand_offs: w[0].iter().filter(|(a, b)| *b > from && *a < until).count(),
        classes,
    })
}

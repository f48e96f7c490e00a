//! The open-loop load generator. Operations are scheduled at a fixed rate
//! whatever the system does; each one's latency is measured from its
//! *intended* start time, so a stalled system is charged for every request
//! it delayed (no coordinated omission). A pool of connections, each with
//! one request outstanding, serves the schedule.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::text_target::{Answer, CallError, TextConn};
use crate::workload::{value_matches_key, Generator, Op};

#[derive(Clone, Debug)]
pub struct RunSpec {
    pub addrs: Vec<SocketAddr>,
    pub rate: f64,
    pub duration: Duration,
    pub warmup: Duration,
    pub connections: usize,
    pub timeout: Duration,
}

#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct RunResult {
    pub offered: f64,
    pub achieved: f64,
    pub ok: u64,
    pub io_errors: u64,
    pub redirects: u64,
    /// Replies that are not a correct answer: a run with any is invalid.
    pub wrong: u64,
    /// Scheduled operations that never completed before the drain deadline.
    pub unfinished: u64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    /// Latency distribution as (quantile, ms) points, for CDF plots.
    pub cdf: Vec<(f64, f64)>,
    #[serde(skip)]
    pub first_wrong: Option<String>,
}

/// Latencies from 1 µs to 10 minutes, 3 significant digits.
fn new_histogram() -> Histogram<u64> {
    match Histogram::<u64>::new_with_bounds(1, 600_000_000, 3) {
        Ok(h) => h,
        Err(_) => unreachable!("constant histogram bounds are valid"),
    }
}

const CDF_QUANTILES: [f64; 15] =
    [0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9995, 0.9999, 0.99995, 0.99999, 1.0];

struct Shared {
    hist: Histogram<u64>,
    /// When the last measured operation completed.
    last_done: Option<Instant>,
    ok: u64,
    io_errors: u64,
    redirects: u64,
    wrong: u64,
    first_wrong: Option<String>,
}

impl Shared {
    fn new() -> Shared {
        Shared { hist: new_histogram(), last_done: None, ok: 0, io_errors: 0, redirects: 0, wrong: 0, first_wrong: None }
    }
}

/// How many times one operation is retried on other replicas before it
/// counts as an error (a leader change takes a few tries to find).
const MAX_TRIES: usize = 10;

async fn execute(conn: &mut TextConn, op: &Op, shared_redirects: &mut u64) -> Result<Answer, CallError> {
    let mut last = CallError::NotLeader;
    for _ in 0..MAX_TRIES {
        match conn.call(op).await {
            Ok(a) => return Ok(a),
            Err(CallError::NotLeader) => {
                *shared_redirects += 1;
                conn.next_replica();
                last = CallError::NotLeader;
            }
            Err(CallError::Io(e)) => {
                conn.next_replica();
                last = CallError::Io(e);
            }
            Err(e @ CallError::Unexpected(_)) => return Err(e),
        }
    }
    Err(last)
}

/// Checks an answer. `preloaded`: every key was written before the run, so
/// a read must find a value, and that value must belong to the key.
pub fn check(op: &Op, answer: &Answer, preloaded: bool) -> Result<(), String> {
    match (op, answer) {
        (Op::Read { key }, Answer::Value(Some(v))) if value_matches_key(key, v) => Ok(()),
        (Op::Read { .. }, Answer::Value(None)) if !preloaded => Ok(()),
        (Op::Update { .. }, Answer::Written) => Ok(()),
        (op, a) => Err(format!("{op:?} answered {a:?}")),
    }
}

/// Writes every key once, with `connections` connections in parallel.
pub async fn preload(spec: &RunSpec, gen: &mut Generator) -> anyhow::Result<()> {
    let keys = gen.keys;
    let mut ops = Vec::with_capacity(keys as usize);
    for i in 0..keys {
        let key = gen.key(i);
        let value = gen.value(&key);
        ops.push(Op::Update { key, value });
    }
    let ops = Arc::new(Mutex::new(ops));
    let mut tasks = Vec::new();
    for c in 0..spec.connections.max(1) {
        let ops = ops.clone();
        let mut conn = TextConn::new(spec.addrs.clone(), c, spec.timeout);
        tasks.push(tokio::spawn(async move {
            let mut redirects = 0;
            loop {
                let Some(op) = ops.lock().await.pop() else { return Ok::<(), anyhow::Error>(()) };
                match execute(&mut conn, &op, &mut redirects).await {
                    Ok(Answer::Written) => {}
                    Ok(a) => anyhow::bail!("preload: {op:?} answered {a:?}"),
                    Err(e) => anyhow::bail!("preload failed: {e:?}"),
                }
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

pub async fn run(spec: &RunSpec, mut gen: Generator, preloaded: bool) -> RunResult {
    let (tx, rx) = async_channel::unbounded::<(Instant, Op)>();
    let start = Instant::now() + Duration::from_millis(20);
    let measure_from = start + spec.warmup;
    let end = start + spec.warmup + spec.duration;
    let drain_deadline = end + spec.timeout * 2;

    let mut workers = Vec::new();
    for c in 0..spec.connections.max(1) {
        let rx = rx.clone();
        let mut conn = TextConn::new(spec.addrs.clone(), c, spec.timeout);
        workers.push(tokio::spawn(async move {
            let mut s = Shared::new();
            while let Ok((intended, op)) = rx.recv().await {
                if Instant::now() > drain_deadline {
                    break;
                }
                let result = execute(&mut conn, &op, &mut s.redirects).await;
                let done = Instant::now();
                let measured = intended >= measure_from;
                match result {
                    Ok(answer) => match check(&op, &answer, preloaded) {
                        Ok(()) => {
                            if measured {
                                s.ok += 1;
                                s.last_done = Some(s.last_done.map_or(done, |t| t.max(done)));
                                let us = done.saturating_duration_since(intended).as_micros() as u64;
                                let _ = s.hist.record(us.max(1));
                            }
                        }
                        Err(e) => {
                            s.wrong += 1;
                            s.first_wrong.get_or_insert(e);
                        }
                    },
                    Err(CallError::Unexpected(e)) => {
                        s.wrong += 1;
                        s.first_wrong.get_or_insert(e);
                    }
                    Err(_) => {
                        if measured {
                            s.io_errors += 1
                        }
                    }
                }
            }
            s
        }));
    }
    drop(rx);

    // The schedule: operation i is due at start + i / rate.
    let interval = 1.0 / spec.rate.max(0.001);
    let mut scheduled_measured: u64 = 0;
    let mut i: u64 = 0;
    loop {
        let due = start + Duration::from_secs_f64(i as f64 * interval);
        if due >= end {
            break;
        }
        if due > Instant::now() {
            tokio::time::sleep_until(due).await;
        }
        if due >= measure_from {
            scheduled_measured += 1;
        }
        if tx.send((due, gen.next_op())).await.is_err() {
            break;
        }
        i += 1;
    }
    tx.close();

    let mut total = Shared::new();
    for w in workers {
        if let Ok(s) = w.await {
            let _ = total.hist.add(&s.hist);
            total.ok += s.ok;
            total.last_done = total.last_done.max(s.last_done);
            total.io_errors += s.io_errors;
            total.redirects += s.redirects;
            total.wrong += s.wrong;
            if total.first_wrong.is_none() {
                total.first_wrong = s.first_wrong;
            }
        }
    }
    // Throughput over the time it took to complete the measured schedule: a
    // system that falls behind finishes late and is charged for it.
    let finished = total.last_done.map_or(end, |t| t.max(end));
    let secs = finished.saturating_duration_since(measure_from).as_secs_f64().max(1e-9);
    let ms = |q: f64| total.hist.value_at_quantile(q) as f64 / 1000.0;
    let unfinished = scheduled_measured.saturating_sub(total.ok + total.io_errors);
    RunResult {
        offered: spec.rate,
        achieved: total.ok as f64 / secs,
        ok: total.ok,
        io_errors: total.io_errors,
        redirects: total.redirects,
        wrong: total.wrong,
        unfinished,
        p50_ms: ms(0.5),
        p90_ms: ms(0.9),
        p99_ms: ms(0.99),
        p999_ms: ms(0.999),
        max_ms: total.hist.max() as f64 / 1000.0,
        cdf: CDF_QUANTILES.iter().map(|q| (*q, ms(*q))).collect(),
        first_wrong: total.first_wrong,
    }
}

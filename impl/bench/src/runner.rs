//! The open-loop load generator. Operations are scheduled at a fixed rate
//! whatever the system does; each one's latency is measured from its
//! *intended* start time, so a stalled system is charged for every request
//! it delayed (no coordinated omission). A pool of connections, each with
//! one request outstanding, serves the schedule.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use std::time::Instant;
use tokio::sync::Mutex;

use crate::text_target::{parse_reply, Answer, CallError, TextConn};
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

/// One operation being served: its intended start, and how many calls
/// (one per replica tried) it has used.
struct Job {
    intended: Instant,
    op: Op,
    tries: usize,
}

/// One client connection of the pool, with at most one request outstanding.
struct Conn {
    /// Index into the addresses of the replica it talks to (or will).
    replica: usize,
    stream: Option<mio::net::TcpStream>,
    connected: bool,
    job: Option<Job>,
    /// When the current call started (its timeout runs from here).
    call_started: Instant,
    wbuf: Vec<u8>,
    wpos: usize,
    rbuf: Vec<u8>,
}

/// The outcome of one event on a connection.
enum Step {
    /// Nothing to do yet (more bytes to come, or still connecting).
    Wait,
    /// The call ended with this reply line (in `rbuf`, without its newline).
    Line,
    Failed(CallError),
}

impl Conn {
    fn new(replica: usize) -> Conn {
        Conn {
            replica,
            stream: None,
            connected: false,
            job: None,
            call_started: Instant::now(),
            wbuf: Vec::with_capacity(1024),
            wpos: 0,
            rbuf: Vec::with_capacity(1024),
        }
    }

    /// Starts a call of the current job on the current replica, connecting
    /// first if needed.
    fn start_call(&mut self, token: mio::Token, poll: &mio::Poll, addrs: &[SocketAddr], now: Instant) -> Step {
        let Some(job) = &self.job else { return Step::Wait };
        self.call_started = now;
        self.wbuf.clear();
        self.wpos = 0;
        self.rbuf.clear();
        crate::text_target::encode_request(&job.op, &mut self.wbuf);
        if self.stream.is_none() {
            let Some(addr) = addrs.get(self.replica) else { return Step::Failed(CallError::Io("no addresses".into())) };
            let mut s = match mio::net::TcpStream::connect(*addr) {
                Ok(s) => s,
                Err(e) => return Step::Failed(CallError::Io(format!("connect to {addr}: {e}"))),
            };
            if let Err(e) = poll.registry().register(&mut s, token, mio::Interest::READABLE | mio::Interest::WRITABLE) {
                return Step::Failed(CallError::Io(format!("register: {e}")));
            }
            self.stream = Some(s);
            self.connected = false;
            return Step::Wait;
        }
        self.flush()
    }

    /// Writes what is left of the request.
    fn flush(&mut self) -> Step {
        use std::io::Write;
        let Some(s) = self.stream.as_mut() else { return Step::Failed(CallError::Io("not connected".into())) };
        while self.wpos < self.wbuf.len() {
            match s.write(&self.wbuf[self.wpos..]) {
                Ok(0) => return Step::Failed(CallError::Io("connection closed".into())),
                Ok(n) => self.wpos += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Step::Wait,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Step::Failed(CallError::Io(e.to_string())),
            }
        }
        Step::Wait
    }

    /// Handles readiness: finishes connecting, writes, reads the reply.
    fn on_ready(&mut self, scratch: &mut [u8]) -> Step {
        use std::io::Read;
        let Some(s) = self.stream.as_mut() else { return Step::Wait };
        if !self.connected {
            match s.take_error() {
                Ok(Some(e)) | Err(e) => return Step::Failed(CallError::Io(format!("connect: {e}"))),
                Ok(None) => {}
            }
            match s.peer_addr() {
                Ok(_) => {
                    self.connected = true;
                    let _ = s.set_nodelay(true);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotConnected => return Step::Wait,
                Err(e) => return Step::Failed(CallError::Io(format!("connect: {e}"))),
            }
        }
        if self.job.is_some() && self.wpos < self.wbuf.len() {
            if let Step::Failed(e) = self.flush() {
                return Step::Failed(e);
            }
        }
        let Some(s) = self.stream.as_mut() else { return Step::Wait };
        loop {
            match s.read(scratch) {
                Ok(0) => return Step::Failed(CallError::Io("connection closed".into())),
                Ok(n) => {
                    self.rbuf.extend_from_slice(&scratch[..n]);
                    if self.rbuf.contains(&b'\n') {
                        break;
                    }
                    // A short read drained the socket; the rest of the
                    // line comes with a new readiness event.
                    if n < scratch.len() {
                        return Step::Wait;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Step::Wait,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Step::Failed(CallError::Io(e.to_string())),
            }
        }
        if self.job.is_none() {
            self.stream = None;
            self.connected = false;
            return Step::Failed(CallError::Unexpected(format!(
                "a reply with no request outstanding: {:?}",
                String::from_utf8_lossy(&self.rbuf)
            )));
        }
        // One request outstanding: exactly one line may come back.
        let Some(nl) = self.rbuf.iter().position(|b| *b == b'\n') else { return Step::Wait };
        if nl + 1 != self.rbuf.len() {
            self.stream = None;
            self.connected = false;
            return Step::Failed(CallError::Unexpected(format!(
                "more than one reply line to one request: {:?}",
                String::from_utf8_lossy(&self.rbuf)
            )));
        }
        self.rbuf.truncate(nl);
        while self.rbuf.last() == Some(&b'\r') {
            self.rbuf.pop();
        }
        Step::Line
    }

    /// Drops the connection and moves to the next replica (after a redirect
    /// or a failure).
    fn next_replica(&mut self, n: usize) {
        self.stream = None;
        self.connected = false;
        self.replica = (self.replica + 1) % n.max(1);
    }
}

/// Runs one measured run: one thread, one `epoll` loop over all the
/// connections (non-blocking sockets), so that the load generator spends
/// as little CPU per operation as it can (a write and a read per call, and
/// a share of one `epoll_wait`) and takes as little of the machine from the
/// measured system as possible.
pub fn run(spec: &RunSpec, mut gen: Generator, preloaded: bool) -> RunResult {
    let nconn = spec.connections.max(1);
    let naddr = spec.addrs.len().max(1);
    let start = Instant::now() + Duration::from_millis(20);
    let measure_from = start + spec.warmup;
    let end = start + spec.warmup + spec.duration;
    let drain_deadline = end + spec.timeout * 2;
    let mut s = Shared::new();
    let mut poll = match mio::Poll::new() {
        Ok(p) => p,
        Err(e) => {
            s.io_errors += 1;
            s.first_wrong = Some(format!("cannot create a poller: {e}"));
            return finish(spec, s, 0, end, measure_from);
        }
    };
    let mut events = mio::Events::with_capacity(1024);
    let mut scratch = vec![0u8; 64 << 10];
    let mut conns: Vec<Conn> = (0..nconn).map(|c| Conn::new(c % naddr)).collect();
    let mut idle: Vec<usize> = (0..nconn).rev().collect();
    let mut queue: std::collections::VecDeque<Job> = std::collections::VecDeque::new();
    let mut busy = 0usize;

    // The schedule: operation i is due at start + i / rate.
    let interval = 1.0 / spec.rate.max(0.001);
    let due = |i: u64| start + Duration::from_secs_f64(i as f64 * interval);
    let mut i: u64 = 0;
    let mut next_due = due(0);
    let mut scheduled_measured: u64 = 0;
    let mut last_timeout_check = Instant::now();

    // Ends one call of connection `c`: records a finished job, retries a
    // redirected or failed one on the next replica, or frees the connection.
    #[allow(clippy::too_many_arguments)]
    fn end_call(
        c: usize,
        step: Step,
        conns: &mut [Conn],
        s: &mut Shared,
        poll: &mio::Poll,
        addrs: &[SocketAddr],
        measure_from: Instant,
        preloaded: bool,
        idle: &mut Vec<usize>,
        busy: &mut usize,
    ) {
        let mut step = step;
        if conns[c].job.is_none() {
            // An idle connection: closed by the replica, or bytes nobody
            // asked for (the connection is out of step and was dropped).
            match step {
                Step::Failed(CallError::Unexpected(e)) => {
                    s.wrong += 1;
                    s.first_wrong.get_or_insert(e);
                }
                Step::Failed(_) => {
                    conns[c].stream = None;
                    conns[c].connected = false;
                }
                _ => {}
            }
            return;
        }
        loop {
            let conn = &mut conns[c];
            let result = match step {
                Step::Wait => return,
                Step::Line => {
                    let Some(job) = conn.job.as_ref() else { return };
                    parse_reply(&job.op, &conn.rbuf)
                }
                Step::Failed(e) => Err(e),
            };
            let retry = match &result {
                Err(CallError::NotLeader) => {
                    s.redirects += 1;
                    true
                }
                Err(CallError::Io(_)) => true,
                _ => false,
            };
            if retry {
                conn.next_replica(addrs.len());
                if let Some(job) = conn.job.as_mut() {
                    job.tries += 1;
                    if job.tries < MAX_TRIES {
                        step = conn.start_call(mio::Token(c), poll, addrs, Instant::now());
                        continue;
                    }
                }
            }
            let done = Instant::now();
            let Some(job) = conn.job.take() else { return };
            *busy -= 1;
            idle.push(c);
            let measured = job.intended >= measure_from;
            match result {
                Ok(answer) => match check(&job.op, &answer, preloaded) {
                    Ok(()) => {
                        if measured {
                            s.ok += 1;
                            s.last_done = Some(s.last_done.map_or(done, |t| t.max(done)));
                            let us = done.saturating_duration_since(job.intended).as_micros() as u64;
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
            return;
        }
    }

    loop {
        let now = Instant::now();
        if now > drain_deadline {
            break;
        }
        while next_due < end && next_due <= now {
            if next_due >= measure_from {
                scheduled_measured += 1;
            }
            queue.push_back(Job { intended: next_due, op: gen.next_op(), tries: 0 });
            i += 1;
            next_due = due(i);
        }
        while !queue.is_empty() {
            let Some(c) = idle.pop() else { break };
            conns[c].job = queue.pop_front();
            busy += 1;
            let step = conns[c].start_call(mio::Token(c), &poll, &spec.addrs, now);
            end_call(c, step, &mut conns, &mut s, &poll, &spec.addrs, measure_from, preloaded, &mut idle, &mut busy);
        }
        if next_due >= end && queue.is_empty() && busy == 0 {
            break;
        }
        if now.saturating_duration_since(last_timeout_check) >= Duration::from_millis(10) {
            last_timeout_check = now;
            for c in 0..conns.len() {
                if conns[c].job.is_some() && now.saturating_duration_since(conns[c].call_started) > spec.timeout {
                    let step = Step::Failed(CallError::Io("timed out".into()));
                    end_call(c, step, &mut conns, &mut s, &poll, &spec.addrs, measure_from, preloaded, &mut idle, &mut busy);
                }
            }
        }
        let mut wait = Duration::from_millis(10);
        if next_due < end && queue.is_empty() {
            wait = wait.min(next_due.saturating_duration_since(now));
        }
        if let Err(e) = poll.poll(&mut events, Some(wait)) {
            if e.kind() != std::io::ErrorKind::Interrupted {
                s.first_wrong.get_or_insert(format!("poll failed: {e}"));
                break;
            }
        }
        for ev in events.iter() {
            let c = ev.token().0;
            if c >= conns.len() {
                continue;
            }
            let step = conns[c].on_ready(&mut scratch);
            end_call(c, step, &mut conns, &mut s, &poll, &spec.addrs, measure_from, preloaded, &mut idle, &mut busy);
        }
    }
    finish(spec, s, scheduled_measured, end, measure_from)
}

fn finish(spec: &RunSpec, total: Shared, scheduled_measured: u64, end: Instant, measure_from: Instant) -> RunResult {
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

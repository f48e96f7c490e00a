//! The open-loop load generator. Operations are scheduled at a fixed rate
//! whatever the system does; each one's latency is measured from its
//! *intended* start time, so a stalled system is charged for every request
//! it delayed (no coordinated omission). A pool of connections, each with
//! up to `window` requests outstanding, serves the schedule.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use std::time::Instant;
use stutter_core::{ClientId, Seq};
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
    /// Requests outstanding per connection at most.
    pub window: usize,
    pub protocol: Protocol,
    pub timeout: Duration,
    /// Keep every measured operation's (intended start, latency).
    pub timeline: bool,
}

/// The client protocol a run speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Protocol {
    /// Replicant's line protocol (both systems speak it): no request ids,
    /// replies in request order; a `window` above 1 queues requests behind
    /// each other on the connection.
    Text,
    /// stutter's framed protocol: each of a connection's `window` positions
    /// is a logical client of its own, answered independently.
    Framed,
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
    /// With `RunSpec::timeline`: (intended start in ms since the measured
    /// part began, latency in µs) of every measured operation that succeeded.
    #[serde(skip)]
    pub timeline: Vec<(u32, u32)>,
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
    timeline: Option<Vec<(u32, u32)>>,
}

impl Shared {
    fn new(timeline: bool) -> Shared {
        Shared {
            hist: new_histogram(),
            last_done: None,
            ok: 0,
            io_errors: 0,
            redirects: 0,
            wrong: 0,
            first_wrong: None,
            timeline: timeline.then(Vec::new),
        }
    }
}

/// How many times one operation is sent before it counts as an error. A
/// leader change takes a few tries to find; with the back-off below, 20
/// tries span about 2.5 s of retrying, longer than an election.
const MAX_TRIES: usize = 20;

/// Back-off before a connection reconnects after a failure or a redirect
/// to an unknown leader: doubling from the first to the last value (a
/// cluster without a leader answers at once, and retrying at once would
/// spend every try within milliseconds).
const BACKOFF_FIRST: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_millis(160);

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

/// One request position of a connection. In stutter's framed protocol it
/// is a logical client of its own (`client`, with its own sequence
/// numbers); in the text protocol the connection is the client and the
/// positions are only answered in the order they were sent.
struct Slot {
    client: ClientId,
    seq: Seq,
    job: Option<Job>,
    /// When the current call of `job` was sent (its timeout runs from here).
    sent: Instant,
}

/// One client connection of the pool, with up to `window` requests
/// outstanding.
struct Conn {
    /// Index into the addresses of the replica it talks to (or will).
    replica: usize,
    stream: Option<mio::net::TcpStream>,
    connected: bool,
    slots: Vec<Slot>,
    in_flight: usize,
    /// Text protocol: the slots in the order their requests were sent.
    order: VecDeque<usize>,
    /// Requests not yet written, from `wpos`.
    wbuf: Vec<u8>,
    wpos: usize,
    /// Reply bytes not yet parsed, from `rpos`.
    rbuf: Vec<u8>,
    rpos: usize,
    /// Queued for a flush at the end of this turn of the loop.
    dirty: bool,
    /// Not before this instant does it reconnect (back-off after a failure).
    retry_at: Option<Instant>,
    backoff: Duration,
}

/// What the loop needs besides the connections.
struct Ctx<'a> {
    s: Shared,
    poll: mio::Poll,
    addrs: &'a [SocketAddr],
    protocol: Protocol,
    measure_from: Instant,
    preloaded: bool,
    /// Free `(connection, slot)` positions; the last pushed is used first.
    idle: Vec<(usize, usize)>,
    busy: usize,
    dirty: Vec<usize>,
}

impl Ctx<'_> {
    /// Ends a job: records its outcome and frees its position.
    fn complete(&mut self, c: usize, slot: usize, job: Job, result: Result<Answer, CallError>) {
        let done = Instant::now();
        self.busy -= 1;
        self.idle.push((c, slot));
        let measured = job.intended >= self.measure_from;
        let s = &mut self.s;
        match result {
            Ok(answer) => match check(&job.op, &answer, self.preloaded) {
                Ok(()) => {
                    if measured {
                        s.ok += 1;
                        s.last_done = Some(s.last_done.map_or(done, |t| t.max(done)));
                        let us = done.saturating_duration_since(job.intended).as_micros() as u64;
                        let _ = s.hist.record(us.max(1));
                        if let Some(t) = s.timeline.as_mut() {
                            let at = job.intended.saturating_duration_since(self.measure_from).as_millis();
                            t.push((at.min(u32::MAX as u128) as u32, us.min(u32::MAX as u64) as u32));
                        }
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

    fn mark_dirty(&mut self, c: usize, conn: &mut Conn) {
        if !conn.dirty {
            conn.dirty = true;
            self.dirty.push(c);
        }
    }
}

impl Conn {
    fn new(c: usize, replica: usize, window: usize, first_client: ClientId) -> Conn {
        let slots = (0..window)
            .map(|s| Slot {
                client: first_client.wrapping_add((c * window + s) as u64) & CLIENT_ID_MASK,
                seq: 0,
                job: None,
                sent: Instant::now(),
            })
            .collect();
        Conn {
            replica,
            stream: None,
            connected: false,
            slots,
            in_flight: 0,
            order: VecDeque::new(),
            wbuf: Vec::with_capacity(4096),
            wpos: 0,
            rbuf: Vec::with_capacity(4096),
            rpos: 0,
            dirty: false,
            retry_at: None,
            backoff: BACKOFF_FIRST,
        }
    }

    /// Queues the request of `slot`'s job (a new call, or a retry of the
    /// same `(client, seq)`) for the next flush.
    fn send(&mut self, c: usize, slot: usize, ctx: &mut Ctx) {
        let Some(sl) = self.slots.get_mut(slot) else { return };
        let Some(job) = &sl.job else { return };
        sl.sent = Instant::now();
        let encoded = match ctx.protocol {
            Protocol::Text => {
                crate::text_target::encode_request(&job.op, &mut self.wbuf);
                self.order.push_back(slot);
                Ok(())
            }
            Protocol::Framed => crate::framed_target::encode_request(sl.client, sl.seq, &job.op, &mut self.wbuf),
        };
        match encoded {
            Ok(()) => ctx.mark_dirty(c, self),
            Err(e) => {
                if let Some(job) = self.slots[slot].job.take() {
                    self.in_flight -= 1;
                    ctx.complete(c, slot, job, Err(e));
                }
            }
        }
    }

    /// Starts a new job on a free slot.
    fn start(&mut self, c: usize, slot: usize, job: Job, ctx: &mut Ctx) {
        let Some(sl) = self.slots.get_mut(slot) else { return };
        sl.seq += 1;
        sl.job = Some(job);
        self.in_flight += 1;
        ctx.busy += 1;
        self.send(c, slot, ctx);
    }

    /// Writes what is queued, connecting first if needed.
    fn flush(&mut self, c: usize, ctx: &mut Ctx) {
        use std::io::Write;
        self.dirty = false;
        if self.stream.is_none() {
            if self.retry_at.is_some_and(|t| t > Instant::now()) {
                // The loop flushes it again once the back-off is over.
                return;
            }
            self.retry_at = None;
            let Some(addr) = ctx.addrs.get(self.replica) else { return };
            let registered = mio::net::TcpStream::connect(*addr).and_then(|mut s| {
                ctx.poll.registry().register(&mut s, mio::Token(c), mio::Interest::READABLE | mio::Interest::WRITABLE)?;
                Ok(s)
            });
            match registered {
                Ok(s) => {
                    self.stream = Some(s);
                    self.connected = false;
                }
                Err(e) => return self.reset(c, None, CallError::Io(format!("connect to {addr}: {e}")), ctx),
            }
            return;
        }
        if !self.connected {
            return;
        }
        let Some(s) = self.stream.as_mut() else { return };
        while self.wpos < self.wbuf.len() {
            match s.write(&self.wbuf[self.wpos..]) {
                Ok(0) => return self.reset(c, None, CallError::Io("connection closed".into()), ctx),
                Ok(n) => self.wpos += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return self.reset(c, None, CallError::Io(e.to_string()), ctx),
            }
        }
        self.wbuf.clear();
        self.wpos = 0;
    }

    /// Drops the connection, moves to replica `to` (or the next one) and
    /// re-sends every request in flight there, each charged one try; a job
    /// out of tries ends with `why`. After a redirect or a failure.
    fn reset(&mut self, c: usize, to: Option<usize>, why: CallError, ctx: &mut Ctx) {
        self.stream = None;
        self.connected = false;
        self.wbuf.clear();
        self.wpos = 0;
        self.rbuf.clear();
        self.rpos = 0;
        self.order.clear();
        let n = ctx.addrs.len().max(1);
        let known = to.filter(|t| *t < n);
        self.replica = known.unwrap_or((self.replica + 1) % n);
        // A redirect to a named leader is followed at once; anything else
        // waits, longer each time until a reply comes.
        if known.is_none() {
            self.retry_at = Some(Instant::now() + self.backoff);
            self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
        }
        if matches!(why, CallError::NotLeader) {
            ctx.s.redirects += 1;
        }
        for slot in 0..self.slots.len() {
            let Some(job) = self.slots[slot].job.as_mut() else { continue };
            job.tries += 1;
            if job.tries >= MAX_TRIES {
                if let Some(job) = self.slots[slot].job.take() {
                    self.in_flight -= 1;
                    let err = match &why {
                        CallError::NotLeader => CallError::NotLeader,
                        CallError::Io(e) => CallError::Io(e.clone()),
                        CallError::Unexpected(e) => CallError::Io(e.clone()),
                    };
                    ctx.complete(c, slot, job, Err(err));
                }
            } else {
                self.send(c, slot, ctx);
            }
        }
    }

    /// Handles readiness: finishes connecting, writes, reads and handles
    /// every complete reply.
    fn on_ready(&mut self, c: usize, scratch: &mut [u8], ctx: &mut Ctx) {
        use std::io::Read;
        let Some(s) = self.stream.as_mut() else { return };
        if !self.connected {
            match s.take_error() {
                Ok(Some(e)) | Err(e) => return self.reset(c, None, CallError::Io(format!("connect: {e}")), ctx),
                Ok(None) => {}
            }
            match s.peer_addr() {
                Ok(_) => {
                    self.connected = true;
                    let _ = s.set_nodelay(true);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotConnected => return,
                Err(e) => return self.reset(c, None, CallError::Io(format!("connect: {e}")), ctx),
            }
        }
        if self.wpos < self.wbuf.len() {
            self.flush(c, ctx);
        }
        let Some(s) = self.stream.as_mut() else { return };
        loop {
            match s.read(scratch) {
                Ok(0) => {
                    if self.in_flight == 0 {
                        // An idle connection the replica closed: reconnect
                        // when there is work.
                        self.stream = None;
                        self.connected = false;
                        return;
                    }
                    return self.reset(c, None, CallError::Io("connection closed".into()), ctx);
                }
                Ok(n) => {
                    self.rbuf.extend_from_slice(&scratch[..n]);
                    // A short read drained the socket.
                    if n < scratch.len() {
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return self.reset(c, None, CallError::Io(e.to_string()), ctx),
            }
        }
        let before = self.in_flight;
        match ctx.protocol {
            Protocol::Text => self.text_replies(c, ctx),
            Protocol::Framed => self.framed_replies(c, ctx),
        }
        if self.in_flight < before && self.stream.is_some() {
            // Answers came: the replica serves, the back-off starts over.
            self.backoff = BACKOFF_FIRST;
        }
        if self.rpos == self.rbuf.len() {
            self.rbuf.clear();
            self.rpos = 0;
        } else if self.rpos > 0 && self.stream.is_some() {
            self.rbuf.drain(..self.rpos);
            self.rpos = 0;
        }
    }

    /// A bad reply: counted as a wrong answer, and the connection, out of
    /// step, is replaced (its requests are re-sent).
    fn out_of_step(&mut self, c: usize, what: String, ctx: &mut Ctx) {
        ctx.s.wrong += 1;
        ctx.s.first_wrong.get_or_insert(what.clone());
        self.reset(c, Some(self.replica), CallError::Unexpected(what), ctx);
    }

    /// Text replies: one line per request, in request order.
    fn text_replies(&mut self, c: usize, ctx: &mut Ctx) {
        while let Some(nl) = self.rbuf[self.rpos..].iter().position(|b| *b == b'\n') {
            let mut line = self.rpos..self.rpos + nl;
            self.rpos += nl + 1;
            while line.end > line.start && self.rbuf[line.end - 1] == b'\r' {
                line.end -= 1;
            }
            let Some(slot) = self.order.pop_front() else {
                let text = String::from_utf8_lossy(&self.rbuf[line]).into_owned();
                return self.out_of_step(c, format!("a reply with no request outstanding: {text:?}"), ctx);
            };
            let Some(job) = self.slots[slot].job.as_ref() else { continue };
            match parse_reply(&job.op, &self.rbuf[line]) {
                Err(CallError::NotLeader) => return self.reset(c, None, CallError::NotLeader, ctx),
                result => {
                    if let Some(job) = self.slots[slot].job.take() {
                        self.in_flight -= 1;
                        ctx.complete(c, slot, job, result);
                    }
                }
            }
        }
    }

    /// Framed replies: each names its `(client, seq)`.
    fn framed_replies(&mut self, c: usize, ctx: &mut Ctx) {
        use crate::framed_target::{next_frame, parse_frame, Event};
        loop {
            let (body, next) = match next_frame(&self.rbuf, self.rpos) {
                Ok(Some(f)) => f,
                Ok(None) => return,
                Err(e) => return self.out_of_step(c, e, ctx),
            };
            self.rpos = next;
            match parse_frame(&self.rbuf[body]) {
                Event::Reply { client, seq, result } => {
                    let slot = self.slots.iter().position(|s| s.client == client && s.seq == seq && s.job.is_some());
                    let Some(slot) = slot else {
                        return self.out_of_step(c, format!("a reply to ({client}, {seq}), which is not in flight"), ctx);
                    };
                    match result {
                        // Busy (nothing was proposed) or outcome unknown:
                        // send the same (client, seq) again.
                        Err(e @ (CallError::NotLeader | CallError::Io(_))) => {
                            if let Some(job) = self.slots[slot].job.as_mut() {
                                job.tries += 1;
                                if job.tries < MAX_TRIES {
                                    self.send(c, slot, ctx);
                                    continue;
                                }
                            }
                            if let Some(job) = self.slots[slot].job.take() {
                                self.in_flight -= 1;
                                ctx.complete(c, slot, job, Err(e));
                            }
                        }
                        result => {
                            if let Some(job) = self.slots[slot].job.take() {
                                self.in_flight -= 1;
                                ctx.complete(c, slot, job, result);
                            }
                        }
                    }
                }
                Event::Redirect { addr } => {
                    let to = addr.and_then(|a| a.parse::<SocketAddr>().ok()).and_then(|a| ctx.addrs.iter().position(|x| *x == a));
                    return self.reset(c, to, CallError::NotLeader, ctx);
                }
                Event::Unexpected(what) => return self.out_of_step(c, what, ctx),
            }
        }
    }
}

/// Client ids are 48 bits (the replica's text sessions use the bits above).
const CLIENT_ID_MASK: u64 = 0x0000_ffff_ffff_ffff;

/// Runs one measured run: one thread, one `epoll` loop over all the
/// connections (non-blocking sockets), so that the load generator spends
/// as little CPU per operation as it can (requests queued in one turn of
/// the loop leave in one write per connection; each readiness event reads
/// every reply that arrived) and takes as little of the machine from the
/// measured system as possible.
pub fn run(spec: &RunSpec, mut gen: Generator, preloaded: bool) -> RunResult {
    let nconn = spec.connections.max(1);
    let window = spec.window.max(1);
    let naddr = spec.addrs.len().max(1);
    let start = Instant::now() + Duration::from_millis(20);
    let measure_from = start + spec.warmup;
    let end = start + spec.warmup + spec.duration;
    let drain_deadline = end + spec.timeout * 2;
    let poll = match mio::Poll::new() {
        Ok(p) => p,
        Err(e) => {
            let mut s = Shared::new(false);
            s.io_errors += 1;
            s.first_wrong = Some(format!("cannot create a poller: {e}"));
            return finish(spec, s, 0, end, measure_from);
        }
    };
    // Fresh client ids for every run: the cluster remembers each client's
    // last sequence number, so ids must never be reused with a new count.
    let first_client = stutter_replica::client::fresh_client_id();
    let mut conns: Vec<Conn> = (0..nconn).map(|c| Conn::new(c, c % naddr, window, first_client)).collect();
    // Used from the end: one request on every connection before a second
    // on any (spreads the load), then the most recently freed first.
    let mut idle: Vec<(usize, usize)> = Vec::with_capacity(nconn * window);
    for s in (0..window).rev() {
        for c in (0..nconn).rev() {
            idle.push((c, s));
        }
    }
    let mut ctx = Ctx {
        s: Shared::new(spec.timeline),
        poll,
        addrs: &spec.addrs,
        protocol: spec.protocol,
        measure_from,
        preloaded,
        idle,
        busy: 0,
        dirty: Vec::new(),
    };
    let mut events = mio::Events::with_capacity(1024);
    let mut scratch = vec![0u8; 64 << 10];
    let mut queue: VecDeque<Job> = VecDeque::new();

    // The schedule: operation i is due at start + i / rate.
    let interval = 1.0 / spec.rate.max(0.001);
    let due = |i: u64| start + Duration::from_secs_f64(i as f64 * interval);
    let mut i: u64 = 0;
    let mut next_due = due(0);
    let mut scheduled_measured: u64 = 0;
    let mut last_timeout_check = Instant::now();

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
            let Some((c, slot)) = ctx.idle.pop() else { break };
            let Some(job) = queue.pop_front() else { break };
            conns[c].start(c, slot, job, &mut ctx);
        }
        while let Some(c) = ctx.dirty.pop() {
            conns[c].flush(c, &mut ctx);
        }
        if next_due >= end && queue.is_empty() && ctx.busy == 0 {
            break;
        }
        if now.saturating_duration_since(last_timeout_check) >= Duration::from_millis(10) {
            last_timeout_check = now;
            for (c, conn) in conns.iter_mut().enumerate() {
                let late = conn.slots.iter().any(|s| s.job.is_some() && now.saturating_duration_since(s.sent) > spec.timeout);
                if late {
                    conn.reset(c, None, CallError::Io("timed out".into()), &mut ctx);
                } else if conn.retry_at.is_some_and(|t| t <= now) && conn.in_flight > 0 {
                    conn.flush(c, &mut ctx);
                }
            }
            continue;
        }
        let mut wait = Duration::from_millis(10);
        if next_due < end && queue.is_empty() {
            wait = wait.min(next_due.saturating_duration_since(now));
        }
        if let Err(e) = ctx.poll.poll(&mut events, Some(wait)) {
            if e.kind() != std::io::ErrorKind::Interrupted {
                ctx.s.first_wrong.get_or_insert(format!("poll failed: {e}"));
                break;
            }
        }
        for ev in events.iter() {
            let c = ev.token().0;
            if let Some(conn) = conns.get_mut(c) {
                conn.on_ready(c, &mut scratch, &mut ctx);
            }
        }
    }
    finish(spec, ctx.s, scheduled_measured, end, measure_from)
}

fn finish(spec: &RunSpec, mut total: Shared, scheduled_measured: u64, end: Instant, measure_from: Instant) -> RunResult {
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
        first_wrong: total.first_wrong.take(),
        timeline: total.timeline.take().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::atomic::{AtomicBool, Ordering};
    use stutter_core::{Op as CoreOp, Reply};
    use stutter_replica::wire::{self, ClientRequest, ClientResponse};

    use crate::workload::{Distribution, Mix};

    /// A stand-in for a framed replica: a key-value map behind a lock. On
    /// each connection it holds a request back until the next one arrives
    /// (or 2 ms pass) and answers the newer one first, so pipelined replies
    /// come back out of order. The very first request it ever sees is
    /// answered with a redirect to an unknown leader.
    fn mock_framed_replica(redirect_first: bool) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let kv = Arc::new(std::sync::Mutex::new(BTreeMap::<Vec<u8>, Vec<u8>>::new()));
        let redirected = Arc::new(AtomicBool::new(!redirect_first));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let (kv, redirected) = (kv.clone(), redirected.clone());
                std::thread::spawn(move || serve(stream, kv, redirected));
            }
        });
        addr
    }

    fn serve(mut s: TcpStream, kv: Arc<std::sync::Mutex<BTreeMap<Vec<u8>, Vec<u8>>>>, redirected: Arc<AtomicBool>) {
        s.set_read_timeout(Some(Duration::from_millis(2))).unwrap();
        let mut held: Option<ClientRequest> = None;
        let answer = |s: &mut TcpStream, req: ClientRequest| -> bool {
            let ClientRequest::Op { client, seq, op } = req else { return false };
            let resp = if !redirected.swap(true, Ordering::SeqCst) {
                ClientResponse::Redirect { client, seq, leader: None, addr: None }
            } else {
                let mut kv = kv.lock().unwrap();
                let reply = match op {
                    CoreOp::Get { key } => Reply::Value(kv.get(&key[..]).map(|v| v.clone().into())),
                    CoreOp::Put { key, value } => {
                        kv.insert(key.to_vec(), value.to_vec());
                        Reply::Done
                    }
                    _ => return false,
                };
                ClientResponse::Reply { client, seq, reply }
            };
            s.write_all(&wire::encode(&resp).unwrap()).is_ok()
        };
        loop {
            let mut len = [0u8; 4];
            match s.read_exact(&mut len) {
                Ok(()) => {}
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                    if let Some(r) = held.take() {
                        if !answer(&mut s, r) {
                            return;
                        }
                    }
                    continue;
                }
                Err(_) => return,
            }
            let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
            s.set_read_timeout(None).unwrap();
            if s.read_exact(&mut body).is_err() {
                return;
            }
            s.set_read_timeout(Some(Duration::from_millis(2))).unwrap();
            let req: ClientRequest = wire::decode(&body).unwrap();
            match held.take() {
                None => held = Some(req),
                Some(older) => {
                    if !answer(&mut s, req) || !answer(&mut s, older) {
                        return;
                    }
                }
            }
        }
    }

    fn spec(addrs: Vec<SocketAddr>, protocol: Protocol, connections: usize, window: usize) -> RunSpec {
        RunSpec {
            addrs,
            rate: 4000.0,
            duration: Duration::from_millis(500),
            warmup: Duration::from_millis(100),
            connections,
            window,
            protocol,
            timeout: Duration::from_secs(2),
            timeline: true,
        }
    }

    #[test]
    fn framed_runs_many_clients_per_connection_and_matches_out_of_order_replies() {
        // Two "replicas": the first redirects its first request to an
        // unknown leader, so one connection moves (after a back-off) and
        // re-sends its requests in flight.
        let addrs = vec![mock_framed_replica(true), mock_framed_replica(false)];
        let gen = Generator::new(7, Mix::A, Distribution::Uniform, 50, 23, 100);
        let r = run(&spec(addrs, Protocol::Framed, 2, 8), gen, false);
        assert_eq!(r.wrong, 0, "{:?}", r.first_wrong);
        assert_eq!((r.io_errors, r.unfinished), (0, 0));
        assert!(r.redirects >= 1);
        // Every measured operation of the schedule (4,000/s for 0.5 s).
        assert!((1990..=2010).contains(&r.ok), "ok {}", r.ok);
        assert_eq!(r.timeline.len() as u64, r.ok);
    }

    #[test]
    fn a_reply_naming_no_request_in_flight_is_a_wrong_answer() {
        // A replica that answers every request twice: the second copy
        // names a (client, seq) no longer in flight.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut s) = stream else { return };
                std::thread::spawn(move || loop {
                    let mut len = [0u8; 4];
                    if s.read_exact(&mut len).is_err() {
                        return;
                    }
                    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
                    if s.read_exact(&mut body).is_err() {
                        return;
                    }
                    let Ok(ClientRequest::Op { client, seq, .. }) = wire::decode(&body) else { return };
                    let f = wire::encode(&ClientResponse::Reply { client, seq, reply: Reply::Value(None) }).unwrap();
                    if s.write_all(&f).and_then(|_| s.write_all(&f)).is_err() {
                        return;
                    }
                });
            }
        });
        let gen = Generator::new(7, Mix::B, Distribution::Uniform, 50, 23, 100);
        let mut sp = spec(vec![addr], Protocol::Framed, 1, 1);
        sp.duration = Duration::from_millis(100);
        let r = run(&sp, gen, false);
        assert!(r.wrong > 0);
        assert!(r.first_wrong.unwrap_or_default().contains("not in flight"));
    }
}

//! One client connection of the open loop's pool, on a non-blocking
//! socket: up to `window` requests outstanding, each in a position of its
//! own, retried on another replica after a redirect or a failure.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use stutter_core::{ClientId, Seq};

use crate::spec::{Protocol, MAX_TRIES};
use crate::tally::Tally;
use crate::text_target::{parse_reply, Answer, CallError};
use crate::workload::Op;

/// Back-off before a connection reconnects after a failure or a redirect
/// to an unknown leader: doubling from the first to the last value (a
/// cluster without a leader answers at once, and retrying at once would
/// spend every try within milliseconds).
const BACKOFF_FIRST: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_millis(160);

/// Client ids are 48 bits (the replica's text sessions use the bits above).
pub const CLIENT_ID_MASK: u64 = 0x0000_ffff_ffff_ffff;

/// One operation being served: its intended start, and how many calls
/// (one per replica tried) it has used.
pub struct Job {
    pub intended: Instant,
    pub op: Op,
    pub tries: usize,
}

/// One request position of a connection (not the core's log slot). In
/// stutter's framed protocol it is a logical client of its own (`client`,
/// with its own sequence numbers); in the text protocol the connection is
/// the client and the positions are only answered in the order they were
/// sent.
struct RequestPosition {
    /// Framed: the nonce of its registration until `registered`, then the
    /// id the log assigned.
    client: ClientId,
    /// Framed: 0 while its registration is in flight.
    seq: Seq,
    /// Framed: `client` is an id the log assigned; until then the job
    /// waits while a `Register` under the nonce goes out.
    registered: bool,
    job: Option<Job>,
    /// When the current call of `job` was sent (its timeout runs from here).
    sent: Instant,
}

/// One client connection of the pool, with up to `window` requests
/// outstanding.
pub struct Conn {
    /// Index into the addresses of the replica it talks to (or will).
    replica: usize,
    stream: Option<mio::net::TcpStream>,
    connected: bool,
    positions: Vec<RequestPosition>,
    in_flight: usize,
    /// Text protocol: the positions in the order their requests were sent.
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

/// What the connections share with the loop that drives them.
pub struct LoopCtx<'a> {
    pub tally: Tally,
    pub poll: mio::Poll,
    pub addrs: &'a [SocketAddr],
    pub protocol: Protocol,
    pub measure_from: Instant,
    pub preloaded: bool,
    /// Free `(connection, position)` pairs; the last pushed is used first.
    pub idle: Vec<(usize, usize)>,
    /// Jobs in flight.
    pub busy: usize,
    /// Connections with requests queued for this turn's flush.
    pub dirty: Vec<usize>,
    /// `RunSpec::ops_per_client`.
    pub ops_per_client: u64,
    /// The next client id to hand out (churn, expired sessions).
    pub next_client: ClientId,
}

impl LoopCtx<'_> {
    /// A client id never used in this run.
    fn fresh_client(&mut self) -> ClientId {
        let id = self.next_client & CLIENT_ID_MASK;
        self.next_client = self.next_client.wrapping_add(1);
        self.tally.clients += 1;
        id
    }

    /// Ends a job: records its outcome and frees its position.
    pub fn complete(&mut self, c: usize, pos: usize, job: Job, result: Result<Answer, CallError>) {
        self.busy -= 1;
        self.idle.push((c, pos));
        self.tally.record(
            &job.op,
            job.intended,
            result,
            self.measure_from,
            self.preloaded,
        );
    }

    fn mark_dirty(&mut self, c: usize, conn: &mut Conn) {
        if !conn.dirty {
            conn.dirty = true;
            self.dirty.push(c);
        }
    }
}

impl Conn {
    pub fn new(c: usize, replica: usize, window: usize, first_client: ClientId) -> Conn {
        let positions = (0..window)
            .map(|s| RequestPosition {
                client: first_client.wrapping_add((c * window + s) as u64) & CLIENT_ID_MASK,
                seq: 0,
                registered: false,
                job: None,
                sent: Instant::now(),
            })
            .collect();
        Conn {
            replica,
            stream: None,
            connected: false,
            positions,
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

    /// A request of this connection has waited longer than `timeout`.
    pub fn timed_out(&self, now: Instant, timeout: Duration) -> bool {
        self.positions
            .iter()
            .any(|p| p.job.is_some() && now.saturating_duration_since(p.sent) > timeout)
    }

    /// Its back-off is over and requests wait to be re-sent.
    pub fn retry_due(&self, now: Instant) -> bool {
        self.retry_at.is_some_and(|t| t <= now) && self.in_flight > 0
    }

    /// Queues the request of `pos`'s job (a new call, or a retry of the
    /// same `(client, seq)`) for the next flush.
    fn send(&mut self, c: usize, pos: usize, ctx: &mut LoopCtx<'_>) {
        let Some(sl) = self.positions.get_mut(pos) else {
            return;
        };
        let Some(job) = &sl.job else { return };
        sl.sent = Instant::now();
        let encoded = match ctx.protocol {
            Protocol::Text => {
                crate::text_target::encode_request(&job.op, &mut self.wbuf);
                self.order.push_back(pos);
                Ok(())
            }
            Protocol::Framed if !sl.registered => {
                crate::framed_target::encode_register(sl.client, &mut self.wbuf)
            }
            Protocol::Framed => {
                crate::framed_target::encode_request(sl.client, sl.seq, &job.op, &mut self.wbuf)
            }
        };
        match encoded {
            Ok(()) => ctx.mark_dirty(c, self),
            Err(e) => {
                if let Some(job) = self.positions[pos].job.take() {
                    self.in_flight -= 1;
                    ctx.complete(c, pos, job, Err(e));
                }
            }
        }
    }

    /// Starts a new job on a free position.
    pub fn start(&mut self, c: usize, pos: usize, job: Job, ctx: &mut LoopCtx<'_>) {
        let Some(sl) = self.positions.get_mut(pos) else {
            return;
        };
        // Churn: a new logical client every `ops_per_client` operations,
        // numbering from 1 as every client does.
        if ctx.ops_per_client > 0 && sl.seq >= ctx.ops_per_client {
            sl.client = ctx.fresh_client();
            sl.seq = 0;
            sl.registered = false;
        }
        // Framed: an unregistered position registers first (seq 0); the
        // job's seq follows once the id is assigned.
        if sl.registered || ctx.protocol == Protocol::Text {
            sl.seq += 1;
        }
        sl.job = Some(job);
        self.in_flight += 1;
        ctx.busy += 1;
        self.send(c, pos, ctx);
    }

    /// Writes what is queued, connecting first if needed.
    pub fn flush(&mut self, c: usize, ctx: &mut LoopCtx<'_>) {
        use std::io::Write;
        self.dirty = false;
        if self.stream.is_none() {
            if self.retry_at.is_some_and(|t| t > Instant::now()) {
                // The loop flushes it again once the back-off is over.
                return;
            }
            self.retry_at = None;
            let Some(addr) = ctx.addrs.get(self.replica) else {
                return;
            };
            let registered = mio::net::TcpStream::connect(*addr).and_then(|mut s| {
                ctx.poll.registry().register(
                    &mut s,
                    mio::Token(c),
                    mio::Interest::READABLE | mio::Interest::WRITABLE,
                )?;
                Ok(s)
            });
            match registered {
                Ok(s) => {
                    self.stream = Some(s);
                    self.connected = false;
                }
                Err(e) => {
                    return self.reset(
                        c,
                        None,
                        CallError::Io(format!("connect to {addr}: {e}")),
                        ctx,
                    )
                }
            }
            return;
        }
        if !self.connected {
            return;
        }
        let Some(s) = self.stream.as_mut() else {
            return;
        };
        while self.wpos < self.wbuf.len() {
            match s.write(&self.wbuf[self.wpos..]) {
                Ok(0) => {
                    return self.reset(c, None, CallError::Io("connection closed".into()), ctx)
                }
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
    pub fn reset(&mut self, c: usize, to: Option<usize>, why: CallError, ctx: &mut LoopCtx<'_>) {
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
            ctx.tally.redirects += 1;
        }
        for pos in 0..self.positions.len() {
            let Some(job) = self.positions[pos].job.as_mut() else {
                continue;
            };
            job.tries += 1;
            if job.tries >= MAX_TRIES {
                if let Some(job) = self.positions[pos].job.take() {
                    self.in_flight -= 1;
                    let err = match &why {
                        CallError::NotLeader => CallError::NotLeader,
                        CallError::Io(e) => CallError::Io(e.clone()),
                        CallError::Unexpected(e) => CallError::Io(e.clone()),
                        CallError::SessionExpired => CallError::SessionExpired,
                    };
                    ctx.complete(c, pos, job, Err(err));
                }
            } else {
                self.send(c, pos, ctx);
            }
        }
    }

    /// Handles readiness: finishes connecting, writes, reads and handles
    /// every complete reply.
    pub fn on_ready(&mut self, c: usize, scratch: &mut [u8], ctx: &mut LoopCtx<'_>) {
        use std::io::Read;
        let Some(s) = self.stream.as_mut() else {
            return;
        };
        if !self.connected {
            match s.take_error() {
                Ok(Some(e)) | Err(e) => {
                    return self.reset(c, None, CallError::Io(format!("connect: {e}")), ctx)
                }
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
        let Some(s) = self.stream.as_mut() else {
            return;
        };
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
    fn out_of_step(&mut self, c: usize, what: String, ctx: &mut LoopCtx<'_>) {
        ctx.tally.wrong(what.clone());
        self.reset(c, Some(self.replica), CallError::Unexpected(what), ctx);
    }

    /// Text replies: one line per request, in request order.
    fn text_replies(&mut self, c: usize, ctx: &mut LoopCtx<'_>) {
        while let Some(nl) = self.rbuf[self.rpos..].iter().position(|b| *b == b'\n') {
            let mut line = self.rpos..self.rpos + nl;
            self.rpos += nl + 1;
            while line.end > line.start && self.rbuf[line.end - 1] == b'\r' {
                line.end -= 1;
            }
            let Some(pos) = self.order.pop_front() else {
                let text = String::from_utf8_lossy(&self.rbuf[line]).into_owned();
                return self.out_of_step(
                    c,
                    format!("a reply with no request outstanding: {text:?}"),
                    ctx,
                );
            };
            let Some(job) = self.positions[pos].job.as_ref() else {
                continue;
            };
            match parse_reply(&job.op, &self.rbuf[line]) {
                Err(CallError::NotLeader) => return self.reset(c, None, CallError::NotLeader, ctx),
                result => {
                    if let Some(job) = self.positions[pos].job.take() {
                        self.in_flight -= 1;
                        ctx.complete(c, pos, job, result);
                    }
                }
            }
        }
    }

    /// Framed replies: each names its `(client, seq)`.
    fn framed_replies(&mut self, c: usize, ctx: &mut LoopCtx<'_>) {
        use crate::framed_target::{next_frame, parse_frame, Event};
        loop {
            let (body, next) = match next_frame(&self.rbuf, self.rpos) {
                Ok(Some(f)) => f,
                Ok(None) => return,
                Err(e) => return self.out_of_step(c, e, ctx),
            };
            self.rpos = next;
            match parse_frame(&self.rbuf[body]) {
                Event::Reply {
                    client,
                    seq,
                    result,
                } => {
                    let pos = self
                        .positions
                        .iter()
                        .position(|s| s.client == client && s.seq == seq && s.job.is_some());
                    let Some(pos) = pos else {
                        return self.out_of_step(
                            c,
                            format!("a reply to ({client}, {seq}), which is not in flight"),
                            ctx,
                        );
                    };
                    match result {
                        // Busy (nothing was proposed) or outcome unknown:
                        // send the same (client, seq) again.
                        Err(e @ (CallError::NotLeader | CallError::Io(_))) => {
                            if let Some(job) = self.positions[pos].job.as_mut() {
                                job.tries += 1;
                                if job.tries < MAX_TRIES {
                                    self.send(c, pos, ctx);
                                    continue;
                                }
                            }
                            if let Some(job) = self.positions[pos].job.take() {
                                self.in_flight -= 1;
                                ctx.complete(c, pos, job, Err(e));
                            }
                        }
                        result => {
                            let expired = matches!(result, Err(CallError::SessionExpired));
                            if let Some(job) = self.positions[pos].job.take() {
                                self.in_flight -= 1;
                                ctx.complete(c, pos, job, result);
                            }
                            if expired {
                                // The id is dead: every later request of it
                                // would expire too.
                                let id = ctx.fresh_client();
                                if let Some(sl) = self.positions.get_mut(pos) {
                                    sl.client = id;
                                    sl.seq = 0;
                                    sl.registered = false;
                                }
                            }
                        }
                    }
                }
                Event::Registered { nonce, id } => {
                    let pos = self
                        .positions
                        .iter()
                        .position(|s| !s.registered && s.client == nonce && s.job.is_some());
                    // A late answer to a resent registration: that id is
                    // wasted, the position registered already.
                    let Some(pos) = pos else { continue };
                    let sl = &mut self.positions[pos];
                    sl.client = id;
                    sl.seq = 1;
                    sl.registered = true;
                    self.send(c, pos, ctx);
                }
                Event::Redirect { addr } => {
                    let to = addr
                        .and_then(|a| a.parse::<SocketAddr>().ok())
                        .and_then(|a| ctx.addrs.iter().position(|x| *x == a));
                    return self.reset(c, to, CallError::NotLeader, ctx);
                }
                Event::Unexpected(what) => return self.out_of_step(c, what, ctx),
            }
        }
    }
}

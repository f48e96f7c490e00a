//! The open-loop load generator. Operations are scheduled at a fixed rate
//! whatever the system does; each one's latency is measured from its
//! *intended* start time, so a stalled system is charged for every request
//! it delayed (no coordinated omission). A pool of connections, each with
//! up to `window` requests outstanding, serves the schedule.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::connection::{Conn, Job, LoopCtx};
use crate::spec::{RunResult, RunSpec};
use crate::tally::Tally;
use crate::text_target::CallError;
use crate::workload::Generator;

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
            let mut t = Tally::new(false);
            t.broken(format!("cannot create a poller: {e}"));
            return t.finish(spec, 0, end, measure_from);
        }
    };
    // Fresh client ids for every run: the cluster remembers each client's
    // last sequence number, so ids must never be reused with a new count.
    let first_client = stutter_replica::client::fresh_client_id();
    let mut conns: Vec<Conn> = (0..nconn)
        .map(|c| Conn::new(c, c % naddr, window, first_client))
        .collect();
    // Used from the end: one request on every connection before a second
    // on any (spreads the load), then the most recently freed first.
    let mut idle: Vec<(usize, usize)> = Vec::with_capacity(nconn * window);
    for s in (0..window).rev() {
        for c in (0..nconn).rev() {
            idle.push((c, s));
        }
    }
    let mut ctx = LoopCtx {
        tally: Tally::new(spec.timeline),
        poll,
        addrs: &spec.addrs,
        protocol: spec.protocol,
        measure_from,
        preloaded,
        idle,
        busy: 0,
        dirty: Vec::new(),
        ops_per_client: spec.ops_per_client,
        next_client: first_client.wrapping_add((nconn * window) as u64),
    };
    ctx.tally.clients = (nconn * window) as u64;
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
            queue.push_back(Job {
                intended: next_due,
                op: gen.next_op(),
                tries: 0,
            });
            i += 1;
            next_due = due(i);
        }
        while !queue.is_empty() {
            let Some((c, pos)) = ctx.idle.pop() else {
                break;
            };
            let Some(job) = queue.pop_front() else { break };
            conns[c].start(c, pos, job, &mut ctx);
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
                if conn.timed_out(now, spec.timeout) {
                    conn.reset(c, None, CallError::Io("timed out".into()), &mut ctx);
                } else if conn.retry_due(now) {
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
                ctx.tally.note(format!("poll failed: {e}"));
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
    ctx.tally
        .finish(spec, scheduled_measured, end, measure_from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Protocol;
    use std::collections::BTreeMap;
    use std::io::{Read, Write};
    use std::net::SocketAddr;
    use std::net::{TcpListener, TcpStream};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
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

    fn serve(
        mut s: TcpStream,
        kv: Arc<std::sync::Mutex<BTreeMap<Vec<u8>, Vec<u8>>>>,
        redirected: Arc<AtomicBool>,
    ) {
        s.set_read_timeout(Some(Duration::from_millis(2))).unwrap();
        let mut held: Option<ClientRequest> = None;
        let answer = |s: &mut TcpStream, req: ClientRequest| -> bool {
            let ClientRequest::Op {
                client, seq, op, ..
            } = req
            else {
                return false;
            };
            let resp = if !redirected.swap(true, Ordering::SeqCst) {
                ClientResponse::Redirect {
                    client,
                    seq,
                    leader: None,
                    addr: None,
                }
            } else {
                let mut kv = kv.lock().unwrap();
                let reply = match op {
                    CoreOp::Get { key } => Reply::Value(kv.get(&key[..]).map(|v| v.clone().into())),
                    CoreOp::Put { key, value } => {
                        kv.insert(key.to_vec(), value.to_vec());
                        Reply::Done
                    }
                    // Ids unique across the mock replicas of a test.
                    CoreOp::Register => {
                        static NEXT: std::sync::atomic::AtomicU64 =
                            std::sync::atomic::AtomicU64::new(0);
                        Reply::Registered {
                            client: stutter_core::REGISTERED_BASE
                                + NEXT.fetch_add(1, Ordering::SeqCst),
                        }
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
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
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

    fn spec(
        addrs: Vec<SocketAddr>,
        protocol: Protocol,
        connections: usize,
        window: usize,
    ) -> RunSpec {
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
            ops_per_client: 0,
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
                    let Ok(ClientRequest::Op { client, seq, .. }) = wire::decode(&body) else {
                        return;
                    };
                    let f = wire::encode(&ClientResponse::Reply {
                        client,
                        seq,
                        reply: Reply::Value(None),
                    })
                    .unwrap();
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

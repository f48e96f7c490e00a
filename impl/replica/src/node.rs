//! The replica process: one task owns the protocol core and turns its
//! outputs into TCP sends, write-ahead-log appends (group commit on a
//! dedicated thread), timers, client replies and trace lines. Everything
//! else (peer links, client connections) talks to it through one channel.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use rand_core::SeedableRng;
use stutter_core::{ClientId, Input, Message, Output, Record, Replica, ReplicaId, Reply, Request, Seq, Timer};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::config::{resolve, ClusterConfig};
use crate::text;
use crate::wal::Wal;
use crate::wire::{self, ClientRequest, ClientResponse, PeerFrame, StatusInfo};

pub struct NodeOptions {
    pub config: ClusterConfig,
    pub id: ReplicaId,
    pub data_dir: PathBuf,
    pub trace: Option<PathBuf>,
    /// Skip fsync: acknowledges writes that a crash can lose. Negative
    /// controls only.
    pub unsafe_no_fsync: bool,
    /// Answer `get` from the local state on any replica, without the log:
    /// stale reads. Negative controls only (jepsen/run --unsafe local-reads).
    pub unsafe_local_reads: bool,
}

/// Where the replies to one client connection go.
pub type ConnTx = mpsc::UnboundedSender<ClientResponse>;

pub enum Event {
    Peer { from: ReplicaId, msg: Message },
    Client { conn: ConnTx, req: Request },
    Status(oneshot::Sender<StatusInfo>),
    Persisted(u64),
    Fatal(String),
    /// SIGTERM or SIGINT: stop serving (the trace file is flushed when the
    /// loop is dropped; everything acknowledged is in the write-ahead log).
    Shutdown,
}

/// How long a client request may wait for its reply before the client is
/// told that its outcome is unknown.
const ROUTE_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs a replica until a fatal error (a failed disk write).
pub async fn run(opts: NodeOptions) -> Result<()> {
    let cfg = opts.config.clone();
    let me = cfg.get(opts.id).with_context(|| format!("id {} is not in the config", opts.id))?.clone();
    let mut core_cfg = cfg.core_config();
    core_cfg.trace = opts.trace.is_some();

    let (wal, durable) = Wal::open(&opts.data_dir, !opts.unsafe_no_fsync)
        .with_context(|| format!("opening the write-ahead log in {}", opts.data_dir.display()))?;
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
        ^ ((opts.id as u64) << 56);
    let rng = Box::new(rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed));
    // An empty write-ahead log is a first start: no Recover step to trace.
    let replica = if durable == stutter_core::DurableState::default() {
        Replica::new(opts.id, core_cfg, rng)
    } else {
        Replica::recover(opts.id, core_cfg, durable, rng)
    };

    let (tx, rx) = mpsc::unbounded_channel::<Event>();

    // Group commit: the WAL thread takes everything queued, writes it, syncs
    // once and reports the highest token.
    let (wal_tx, wal_rx) = std::sync::mpsc::channel::<(u64, Vec<Record>)>();
    {
        let tx = tx.clone();
        let interval = Duration::from_micros(cfg.storage.sync_interval_us.unwrap_or(crate::config::DEFAULT_SYNC_INTERVAL_US));
        std::thread::Builder::new().name("wal".into()).spawn(move || wal_thread(wal, wal_rx, tx, interval))?;
    }

    let peer_listener = TcpListener::bind(resolve(&me.peer_addr)?).await.with_context(|| format!("listening on {}", me.peer_addr))?;
    let client_listener =
        TcpListener::bind(resolve(&me.client_addr)?).await.with_context(|| format!("listening on {}", me.client_addr))?;
    tracing::info!(id = opts.id, peer = %me.peer_addr, client = %me.client_addr, "replica listening");

    tokio::spawn(accept_peers(peer_listener, tx.clone(), cfg.n()));
    tokio::spawn(forward_shutdown(tx.clone()));
    // Text clients are identified per connection; the numbering must not
    // restart at 1 after a restart, or a new connection would reuse the
    // (client, seq) of an executed request in the replicated session table
    // and get its recorded reply (found by the jepsen campaigns: a put
    // acknowledged without being executed). Start from the clock instead.
    let first_conn = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_micros() as u64)
        & 0xffff_ffff_ffff;
    let client_ids = Arc::new(std::sync::atomic::AtomicU64::new(first_conn.max(1)));
    tokio::spawn(accept_clients(client_listener, tx.clone(), opts.id, client_ids));

    let mut peers: HashMap<ReplicaId, mpsc::Sender<Message>> = HashMap::new();
    for r in &cfg.replica {
        if r.id != opts.id {
            let (ptx, prx) = mpsc::channel(1 << 16);
            tokio::spawn(peer_sender(opts.id, r.peer_addr.clone(), prx));
            peers.insert(r.id, ptx);
        }
    }

    let trace = match &opts.trace {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        )),
        None => None,
    };
    // The core's clock: microseconds since the Unix epoch, read once and
    // advanced by the monotonic clock, so that trace times of the replicas
    // of one machine are comparable (spec/trace/merge.py orders by them).
    let epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0);
    let mut lp = Loop {
        replica,
        start: Instant::now(),
        epoch,
        timers: HashMap::new(),
        peers,
        wal: wal_tx,
        routes: HashMap::new(),
        last_sweep: Instant::now(),
        trace,
        cfg,
        unsafe_local_reads: opts.unsafe_local_reads,
        stopping: false,
    };
    lp.run(rx).await
}

/// A group commit or a protocol-loop turn slower than this is logged (a
/// stall here is what tail latency is made of).
const SLOW: Duration = Duration::from_millis(15);

fn wal_thread(
    mut wal: Wal,
    rx: std::sync::mpsc::Receiver<(u64, Vec<Record>)>,
    tx: mpsc::UnboundedSender<Event>,
    interval: Duration,
) {
    let mut last_sync: Option<std::time::Instant> = None;
    while let Ok((mut top, records)) = rx.recv() {
        // At most one sync per `interval`: what arrives while waiting joins
        // this group commit.
        if let Some(wait) = last_sync.and_then(|t| (t + interval).checked_duration_since(std::time::Instant::now())) {
            std::thread::sleep(wait);
        }
        let started = std::time::Instant::now();
        last_sync = Some(started);
        let mut result = wal.append(records);
        while result.is_ok() {
            match rx.try_recv() {
                Ok((t, more)) => {
                    top = t;
                    result = wal.append(more);
                }
                Err(_) => break,
            }
        }
        let written = started.elapsed();
        let result = result.and_then(|_| wal.sync());
        if started.elapsed() > SLOW {
            tracing::warn!(write_ms = written.as_millis() as u64, total_ms = started.elapsed().as_millis() as u64, "slow group commit");
        }
        let ev = match result {
            Ok(()) => Event::Persisted(top),
            Err(e) => Event::Fatal(format!("write-ahead log: {e}")),
        };
        if tx.send(ev).is_err() {
            return;
        }
    }
}

struct Loop {
    replica: Replica,
    start: Instant,
    epoch: u64,
    timers: HashMap<Timer, Instant>,
    peers: HashMap<ReplicaId, mpsc::Sender<Message>>,
    wal: std::sync::mpsc::Sender<(u64, Vec<Record>)>,
    /// Who waits for the reply to `(client, seq)`, since when.
    routes: HashMap<(ClientId, Seq), (ConnTx, Instant)>,
    last_sweep: Instant,
    trace: Option<std::io::BufWriter<std::fs::File>>,
    cfg: ClusterConfig,
    unsafe_local_reads: bool,
    stopping: bool,
}

impl Loop {
    fn now(&self) -> u64 {
        self.epoch + self.start.elapsed().as_micros() as u64
    }

    async fn run(&mut self, mut rx: mpsc::UnboundedReceiver<Event>) -> Result<()> {
        let mut out = Vec::with_capacity(1024);
        self.replica.handle(self.now(), Input::Start, &mut out);
        self.apply(&mut out);
        let mut turn;
        loop {
            let next_timer = self.timers.values().min().copied();
            let sleep = async {
                match next_timer {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                ev = rx.recv() => {
                    let Some(ev) = ev else { return Ok(()) };
                    turn = std::time::Instant::now();
                    self.event(ev, &mut out)?;
                    // Take whatever else is ready before acting: replies,
                    // sends and persists of the whole batch go out together.
                    for _ in 0..4096 {
                        match rx.try_recv() {
                            Ok(ev) => self.event(ev, &mut out)?,
                            Err(_) => break,
                        }
                    }
                }
                _ = sleep => {
                    turn = std::time::Instant::now();
                    let now = Instant::now();
                    let due: Vec<Timer> = self.timers.iter().filter(|(_, at)| **at <= now).map(|(t, _)| *t).collect();
                    for t in due {
                        self.timers.remove(&t);
                        self.replica.handle(self.now(), Input::Timer(t), &mut out);
                    }
                }
            }
            self.apply(&mut out);
            if self.stopping {
                tracing::info!("shutting down on signal");
                return Ok(());
            }
            if turn.elapsed() > SLOW {
                tracing::warn!(ms = turn.elapsed().as_millis() as u64, "slow protocol-loop turn");
            }
            if self.last_sweep.elapsed() > Duration::from_secs(1) {
                self.sweep_routes();
            }
            // Flushed every turn, before the turn's messages leave (the
            // peer tasks run when the loop yields): a trace cut short by a
            // kill never shows a message received whose sending it lost.
            if let Some(w) = self.trace.as_mut() {
                use std::io::Write;
                let _ = w.flush();
            }
        }
    }

    fn event(&mut self, ev: Event, out: &mut Vec<Output>) -> Result<()> {
        let now = self.now();
        match ev {
            Event::Peer { from, msg } => self.replica.handle(now, Input::Message { from, msg }, out),
            Event::Client { conn, req } => {
                if self.unsafe_local_reads {
                    if let stutter_core::Op::Get { key } = &req.op {
                        let value = self.replica.state_machine().kv.get(key).cloned();
                        let reply = Reply::Value(value);
                        let _ = conn.send(ClientResponse::Reply { client: req.client, seq: req.seq, reply });
                        return Ok(());
                    }
                }
                self.routes.insert((req.client, req.seq), (conn, Instant::now()));
                self.replica.handle(now, Input::Request(req), out);
            }
            Event::Persisted(token) => self.replica.handle(now, Input::Persisted { token }, out),
            Event::Status(reply) => {
                let _ = reply.send(self.status());
            }
            Event::Fatal(e) => anyhow::bail!(e),
            Event::Shutdown => self.stopping = true,
        }
        Ok(())
    }

    /// A request proposed by a leader that lost its leadership may never be
    /// executed (the next leader can fill its slot with a no-op), so no reply
    /// would ever come. After `ROUTE_TIMEOUT` the client is told the outcome
    /// is unknown (a framed client retries with the same `(client, seq)`,
    /// which is safe); the route is dropped so it does not leak.
    fn sweep_routes(&mut self) {
        self.last_sweep = Instant::now();
        let stale: Vec<(ClientId, Seq)> =
            self.routes.iter().filter(|(_, (_, since))| since.elapsed() > ROUTE_TIMEOUT).map(|(k, _)| *k).collect();
        for key in stale {
            if let Some((conn, _)) = self.routes.remove(&key) {
                let _ = conn.send(ClientResponse::Unknown { client: key.0, seq: key.1 });
            }
        }
    }

    fn status(&self) -> StatusInfo {
        let r = &self.replica;
        StatusInfo {
            id: r.id(),
            role: r.role(),
            ballot: r.ballot(),
            leader: r.leader(),
            last_executed: r.last_executed(),
            global_last_executed: r.global_last_executed(),
            last_index: r.last_index(),
            digest: r.executed_digest(),
        }
    }

    fn apply(&mut self, out: &mut Vec<Output>) {
        for o in out.drain(..) {
            match o {
                Output::Send { to, msg } => {
                    if let Some(p) = self.peers.get(&to) {
                        // A full queue means the peer is gone or far behind:
                        // dropping is what the network would do.
                        let _ = p.try_send(msg);
                    }
                }
                Output::SetTimer { timer, at } => {
                    let at = self.start + Duration::from_micros(at.saturating_sub(self.epoch));
                    self.timers.insert(timer, at);
                }
                Output::Persist { token, records } => {
                    let _ = self.wal.send((token, records));
                }
                Output::Reply { client, seq, reply } => {
                    if let Some((conn, _)) = self.routes.remove(&(client, seq)) {
                        let resp = match reply {
                            Reply::Redirect { leader } => ClientResponse::Redirect {
                                client,
                                seq,
                                leader,
                                addr: leader.and_then(|l| self.cfg.get(l)).map(|r| r.client_addr.clone()),
                            },
                            reply => ClientResponse::Reply { client, seq, reply },
                        };
                        let _ = conn.send(resp);
                    }
                }
                Output::Trace(ev) => {
                    if let Some(w) = self.trace.as_mut() {
                        use std::io::Write;
                        if let Ok(line) = serde_json::to_string(&ev) {
                            let _ = writeln!(w, "{line}");
                        }
                    }
                }
            }
        }
    }
}

/// Turns SIGTERM and SIGINT into [`Event::Shutdown`].
async fn forward_shutdown(tx: mpsc::UnboundedSender<Event>) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        tracing::warn!("cannot install signal handlers; SIGTERM will kill without flushing the trace");
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    let _ = tx.send(Event::Shutdown);
}

async fn accept_peers(listener: TcpListener, tx: mpsc::UnboundedSender<Event>, n: usize) {
    loop {
        let Ok((stream, addr)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let tx = tx.clone();
        tokio::spawn(async move {
            let mut r = BufReader::with_capacity(1 << 16, stream);
            loop {
                match wire::read_frame(&mut r, wire::MAX_PEER_FRAME).await {
                    Ok(Some(body)) => match wire::decode::<PeerFrame>(&body) {
                        Ok(f) if (f.from as usize) < n => {
                            if tx.send(Event::Peer { from: f.from, msg: f.msg }).is_err() {
                                return;
                            }
                        }
                        Ok(f) => {
                            tracing::warn!(%addr, from = f.from, "peer frame from an unknown id; closing");
                            return;
                        }
                        Err(e) => {
                            tracing::warn!(%addr, error = %e, "malformed peer frame; closing");
                            return;
                        }
                    },
                    Ok(None) => return,
                    Err(e) => {
                        tracing::debug!(%addr, error = %e, "peer connection ended");
                        return;
                    }
                }
            }
        });
    }
}

/// Keeps one outbound connection to a peer, reconnecting with backoff.
/// Messages queued while it is down are dropped (Paxos tolerates loss; the
/// core resends what matters).
async fn peer_sender(me: ReplicaId, addr: String, mut rx: mpsc::Receiver<Message>) {
    let mut backoff = Duration::from_millis(10);
    loop {
        let stream = match resolve(&addr) {
            Ok(a) => tokio::time::timeout(Duration::from_secs(1), TcpStream::connect(a)).await,
            Err(e) => {
                tracing::error!(%addr, error = %e, "bad peer address");
                return;
            }
        };
        let stream = match stream {
            Ok(Ok(s)) => s,
            _ => {
                // Drain what piled up: stale messages are worse than none.
                while rx.try_recv().is_ok() {}
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_millis(500));
                continue;
            }
        };
        backoff = Duration::from_millis(10);
        let _ = stream.set_nodelay(true);
        tracing::info!(%addr, "connected to peer");
        let mut w = BufWriter::with_capacity(1 << 16, stream);
        'conn: loop {
            let Some(msg) = rx.recv().await else { return };
            let mut batch = vec![msg];
            while batch.len() < 1024 {
                match rx.try_recv() {
                    Ok(m) => batch.push(m),
                    Err(_) => break,
                }
            }
            for msg in batch {
                if wire::write_frame(&mut w, &PeerFrame { from: me, msg }).await.is_err() {
                    break 'conn;
                }
            }
            if w.flush().await.is_err() {
                break 'conn;
            }
        }
        tracing::info!(%addr, "peer connection lost; reconnecting");
    }
}

async fn accept_clients(listener: TcpListener, tx: mpsc::UnboundedSender<Event>, me: ReplicaId, ids: Arc<std::sync::atomic::AtomicU64>) {
    loop {
        let Ok((stream, addr)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let tx = tx.clone();
        let conn_no = ids.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tokio::spawn(async move {
            if let Err(e) = serve_client(stream, tx, me, conn_no).await {
                tracing::debug!(%addr, error = %e, "client connection ended");
            }
        });
    }
}

/// One client connection. The first byte tells the protocol: stutter's
/// frames start with a length whose first byte is 0 (frames are < 16 MiB);
/// Replicant's text lines start with a letter.
async fn serve_client(stream: TcpStream, tx: mpsc::UnboundedSender<Event>, me: ReplicaId, conn_no: u64) -> std::io::Result<()> {
    let (r, w) = stream.into_split();
    let mut r = BufReader::with_capacity(1 << 16, r);
    let first = match r.fill_buf().await?.first() {
        Some(b) => *b,
        None => return Ok(()),
    };
    if first == 0 {
        let (ctx, crx) = mpsc::unbounded_channel::<ClientResponse>();
        tokio::spawn(write_frames(w, crx));
        serve_framed(r, tx, ctx).await
    } else {
        // Text clients have no identity of their own: one per connection.
        let client: ClientId = ((me as u64 + 1) << 48) | (conn_no & 0xffff_ffff_ffff);
        text::serve(r, w, tx, client).await
    }
}

async fn write_frames(w: tokio::net::tcp::OwnedWriteHalf, mut rx: mpsc::UnboundedReceiver<ClientResponse>) {
    let mut w = BufWriter::new(w);
    while let Some(resp) = rx.recv().await {
        if wire::write_frame(&mut w, &resp).await.is_err() {
            return;
        }
        while let Ok(more) = rx.try_recv() {
            if wire::write_frame(&mut w, &more).await.is_err() {
                return;
            }
        }
        if w.flush().await.is_err() {
            return;
        }
    }
}

async fn serve_framed(
    mut r: BufReader<tokio::net::tcp::OwnedReadHalf>,
    tx: mpsc::UnboundedSender<Event>,
    ctx: ConnTx,
) -> std::io::Result<()> {
    loop {
        let body = match wire::read_frame(&mut r, wire::MAX_CLIENT_FRAME).await {
            Ok(Some(b)) => b,
            Ok(None) => return Ok(()),
            Err(e) => {
                let _ = ctx.send(ClientResponse::Error(format!("bad frame: {e}")));
                return Err(e);
            }
        };
        match wire::decode::<ClientRequest>(&body) {
            Ok(ClientRequest::Op { client, seq, op }) => {
                if tx.send(Event::Client { conn: ctx.clone(), req: Request { client, seq, op } }).is_err() {
                    return Ok(());
                }
            }
            Ok(ClientRequest::Status) => {
                let (otx, orx) = oneshot::channel();
                let _ = tx.send(Event::Status(otx));
                if let Ok(s) = orx.await {
                    let _ = ctx.send(ClientResponse::Status(s));
                }
            }
            Ok(ClientRequest::Digest) => {
                let (otx, orx) = oneshot::channel();
                let _ = tx.send(Event::Status(otx));
                if let Ok(s) = orx.await {
                    let _ = ctx.send(ClientResponse::Digest { last_executed: s.last_executed, digest: s.digest });
                }
            }
            Err(e) => {
                // The frame boundary is intact: answer and keep serving.
                let _ = ctx.send(ClientResponse::Error(format!("malformed request: {e}")));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(slot: u64) -> Record {
        Record::Accept { slot: stutter_core::Slot(slot), ballot: stutter_core::Ballot(1), value: stutter_core::Value::Noop }
    }

    /// Two persists handed over right after a sync wait for the interval
    /// and leave in one group commit, reported by the higher token. (No
    /// fsync here: the interval does not depend on it, and a slow shared
    /// disk must not make the timing of this test flaky.)
    #[test]
    fn persists_within_the_sync_interval_share_one_group_commit() {
        let dir = tempfile::tempdir().unwrap();
        let (wal, _) = Wal::open(dir.path(), false).unwrap();
        let (wal_tx, wal_rx) = std::sync::mpsc::channel();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let interval = Duration::from_millis(300);
        let thread = std::thread::spawn(move || wal_thread(wal, wal_rx, tx, interval));

        let before_first = std::time::Instant::now();
        wal_tx.send((1, vec![Record::Ballot(stutter_core::Ballot(1)), accept(1)])).unwrap();
        assert!(matches!(rx.blocking_recv(), Some(Event::Persisted(1))));
        wal_tx.send((2, vec![accept(2)])).unwrap();
        wal_tx.send((3, vec![accept(3)])).unwrap();
        assert!(matches!(rx.blocking_recv(), Some(Event::Persisted(3))));
        // The second sync started no earlier than one interval after the first.
        assert!(before_first.elapsed() >= interval, "synced again after {:?}", before_first.elapsed());

        drop(wal_tx);
        thread.join().unwrap();
        let (_, durable) = Wal::open(dir.path(), true).unwrap();
        assert_eq!(durable.accepted.len(), 3, "all three accepts are durable: {durable:?}");
    }
}

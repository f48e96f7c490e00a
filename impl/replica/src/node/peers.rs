//! Links between replicas: one outbound connection per peer that sends
//! (reconnected with backoff), and a listener whose connections receive.
//! Every connection starts with the handshake of `peer_auth`; the sender
//! of a received message is the replica that connection authenticated.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use stutter_core::{Message, ReplicaId};
use tokio::io::{AsyncWriteExt, BufReader, BufWriter};
use tokio::sync::{mpsc, Notify, Semaphore};
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::event::{Event, Events};
use crate::config::resolve;
use crate::peer_auth::{self, ClusterKey};
use crate::peer_frame::{PeerFrame, SnapshotAssembly, SnapshotParts, PART_BYTES};
use crate::platform;
use crate::platform::net::{TcpListener, TcpStream};

/// Messages queued for one peer at most. A full queue means the peer is
/// gone or far behind: the message is dropped, as the network would drop
/// it (Paxos tolerates loss; the core resends what matters).
pub const PEER_QUEUE: usize = 1 << 16;
/// A connection that has not completed the handshake by then is closed.
/// Generous: the handshake is two round trips, and the campaigns delay
/// peer links by up to 200 ms each way and drop up to 30% of packets.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// A connection attempt that takes longer is given up and retried (a peer
/// behind a partition never answers).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// A write to a peer that makes no progress for this long ends the
/// connection, which is then redialled. A peer that vanished without a
/// reset (power loss, a black-holing network) leaves the socket buffer full
/// and the write waiting until the kernel gives up (minutes; the simulated
/// TCP of dsim/turmoil never does), while every message to that peer is
/// dropped: a follower that cannot reach the leader cannot ask it for the
/// slots it missed. Generous enough for the largest snapshot frame on a
/// slow link.
const WRITE_STALL: Duration = Duration::from_secs(10);
/// The stall allowed instead while the link is suspect: for `WRITE_STALL`
/// after the peer opened a new connection to us in place of its old one.
/// A peer that re-dials has restarted or found its own link to us broken;
/// if our writes to it are blocked meanwhile, they are blocked on a
/// connection to its previous incarnation, which a real kernel would
/// reset at our next segment, but a black-holing network (or the
/// simulated TCP of dsim/turmoil, turmoil seed 144) leaves waiting the
/// whole `WRITE_STALL`, while the peer waits for our pre-vote replies
/// and accepts. Long enough for a healthy link's writes, which complete
/// into the socket buffer at once; a large snapshot frame on a slow link
/// that is cut by it is sent again by the core's catch-up.
const SUSPECT_STALL: Duration = Duration::from_secs(1);
/// Injected bug `drop-on-reconnect` (feature `node-bugs` with
/// `STUTTER_NODE_BUG=drop-on-reconnect`,
/// for the simulation layers' teeth; never in a real build): once a link
/// to a peer has been re-established after a break, the sender drops the
/// first message of what it had queued for that peer instead of sending
/// it. The real mistake it models: skipping "the stale message pulled
/// before the link broke" on a reconnect, with the flag that says so kept
/// in the task's state and never cleared after the first batch, so from
/// the first reconnect on, the first message of every batch to that peer
/// is lost (at low load most batches are one message: the link goes
/// nearly silent). Paxos tolerates lost messages, so no safety check sees
/// it; the replicas behind that link stop hearing heartbeats, accepts and
/// catch-up, which only a liveness judge sees.
fn bug_drop_on_reconnect() -> bool {
    crate::node_bug::active(crate::node_bug::NodeBug::DropOnReconnect)
}

/// Inbound connections in their handshake at once; more are closed at
/// once. Authenticated ones are not counted: there is one per peer (a
/// newer one from the same peer replaces it).
pub const MAX_PENDING_HANDSHAKES: usize = 16;

/// What both ends of a link need to know.
#[derive(Clone)]
pub struct LinkParams {
    pub me: ReplicaId,
    pub n: usize,
    pub key: ClusterKey,
    /// Largest frame sent or accepted (`[limits] max_peer_frame_mb`).
    pub max_frame: usize,
    /// Per peer: signalled when the peer replaces its connection to us.
    pub redialled: Redials,
}

/// One signal per replica id, raised by the listener when that peer's new
/// authenticated connection replaces an older one, and read by the sender
/// to that peer (see `SUSPECT_STALL`).
#[derive(Clone)]
pub struct Redials(Arc<BTreeMap<ReplicaId, Arc<Notify>>>);

impl Redials {
    pub fn new(n: usize) -> Redials {
        Redials(Arc::new(
            (0..n)
                .filter_map(|i| ReplicaId::try_from(i).ok())
                .map(|i| (i, Arc::new(Notify::new())))
                .collect(),
        ))
    }

    fn of(&self, peer: ReplicaId) -> Arc<Notify> {
        self.0.get(&peer).cloned().unwrap_or_default()
    }
}

/// The outbound side: one queue and one sender task per peer.
pub struct PeerLinks {
    queues: BTreeMap<ReplicaId, mpsc::Sender<Message>>,
}

impl PeerLinks {
    /// Starts a sender task for every `(id, peer address)`.
    pub fn start(
        params: &LinkParams,
        peers: impl IntoIterator<Item = (ReplicaId, String)>,
    ) -> PeerLinks {
        let mut queues = BTreeMap::new();
        for (id, addr) in peers {
            let (tx, rx) = mpsc::channel(PEER_QUEUE);
            tokio::spawn(sender(params.clone(), id, addr, rx));
            queues.insert(id, tx);
        }
        PeerLinks { queues }
    }

    /// Queues `msg` for `to`, or drops it if that queue is full.
    pub fn send(&self, to: ReplicaId, msg: Message) {
        if let Some(q) = self.queues.get(&to) {
            let _ = q.try_send(msg);
        }
    }
}

/// Keeps one outbound connection to peer `to`, reconnecting with backoff.
/// Messages queued while it is down are dropped: stale messages are worse
/// than none.
async fn sender(p: LinkParams, to: ReplicaId, addr: String, mut rx: mpsc::Receiver<Message>) {
    let mut backoff = Duration::from_millis(10);
    let mut last_error: Option<String> = None;
    // A connection to this peer existed and broke (only the injected bug
    // `drop-on-reconnect` reads it).
    let mut reconnecting = false;
    let redialled = p.redialled.of(to);
    // Until then the link is suspect (see `SUSPECT_STALL`).
    let mut suspect_until: Option<Instant> = None;
    loop {
        let sa = match resolve(&addr) {
            Ok(a) => a,
            Err(e) => {
                tracing::error!(%addr, error = %e, "bad peer address");
                return;
            }
        };
        let linked = async {
            let mut s = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(sa)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => return Err(e.to_string()),
                Err(_) => return Err("connect timed out".to_string()),
            };
            let _ = s.set_nodelay(true);
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, peer_auth::dial(&mut s, &p.key, p.me, to))
                .await
            {
                Ok(Ok(sealer)) => Ok((s, sealer)),
                Ok(Err(e)) => Err(format!("handshake: {e}")),
                Err(_) => Err("handshake: timed out".to_string()),
            }
        }
        .await;
        let (stream, mut sealer) = match linked {
            Ok(l) => l,
            Err(e) => {
                // A refused handshake is a misconfiguration worth a warning
                // (a timed-out one is a slow network); a peer that is down
                // is not. Each distinct error once.
                if e.starts_with("handshake")
                    && !e.ends_with("timed out")
                    && last_error.as_deref() != Some(&e)
                {
                    tracing::warn!(%addr, peer = to, error = %e, "peer link refused");
                }
                last_error = Some(e);
                while rx.try_recv().is_ok() {}
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_millis(500));
                continue;
            }
        };
        last_error = None;
        backoff = Duration::from_millis(10);
        tracing::info!(%addr, peer = to, authenticated = p.key.authenticates(), "connected to peer");
        let mut w = BufWriter::with_capacity(1 << 16, stream);
        let mut buf = Vec::with_capacity(1 << 16);
        'conn: loop {
            let Some(msg) = rx.recv().await else { return };
            let mut batch = vec![msg];
            while batch.len() < 1024 {
                match rx.try_recv() {
                    Ok(m) => batch.push(m),
                    Err(_) => break,
                }
            }
            if bug_drop_on_reconnect() && reconnecting {
                // Injected bug (see `bug_drop_on_reconnect`): the first message of
                // the batch is dropped, on every batch since the first
                // reconnect, for `reconnecting` is never cleared.
                batch.remove(0);
            }
            // A snapshot sent while an earlier one still waited here
            // supersedes it: the follower would install the newer anyway.
            let newest_snapshot = batch
                .iter()
                .rposition(|m| matches!(m, Message::InstallSnapshot { .. }));
            for (i, msg) in batch.into_iter().enumerate() {
                if let Message::InstallSnapshot { ballot, snapshot } = msg {
                    if Some(i) != newest_snapshot {
                        continue;
                    }
                    let mut parts = SnapshotParts::new(ballot, snapshot);
                    loop {
                        buf.clear();
                        let sealed =
                            parts.next_part(|part| sealer.seal(part, p.max_frame, &mut buf));
                        match sealed {
                            None => break,
                            Some(Err(e)) => {
                                // A part is about 1 MiB, or one entry: only
                                // a limit below that refuses it.
                                tracing::error!(peer = to, error = %e, "snapshot not sent: raise [limits] max_peer_frame_mb");
                                break 'conn;
                            }
                            Some(Ok(())) => {}
                        }
                        if !unstalled(w.write_all(&buf), &redialled, &mut suspect_until).await {
                            break 'conn;
                        }
                        // The protocol loop shares this thread: it runs
                        // between parts (peer_frame.rs).
                        platform::yield_once().await;
                    }
                    continue;
                }
                buf.clear();
                if let Err(e) = sealer.seal_message(&msg, p.max_frame, &mut buf) {
                    tracing::error!(peer = to, kind = msg.kind(), error = %e, "message not sent: raise [limits] max_peer_frame_mb");
                    continue;
                }
                if !unstalled(w.write_all(&buf), &redialled, &mut suspect_until).await {
                    break 'conn;
                }
            }
            if !unstalled(w.flush(), &redialled, &mut suspect_until).await {
                break 'conn;
            }
        }
        tracing::info!(%addr, peer = to, "peer connection lost; reconnecting");
        reconnecting = true;
    }
}

/// Runs one write to a peer; false if it failed or stalled: made no
/// progress for `WRITE_STALL`, or for `SUSPECT_STALL` while the link is
/// suspect, which a redial of the peer (now or earlier) makes it.
async fn unstalled(
    write: impl Future<Output = std::io::Result<()>>,
    redialled: &Notify,
    suspect_until: &mut Option<Instant>,
) -> bool {
    tokio::pin!(write);
    let started = Instant::now();
    loop {
        let suspect = suspect_until.is_some_and(|until| Instant::now() < until);
        let deadline = started + if suspect { SUSPECT_STALL } else { WRITE_STALL };
        // Biased: the simulation layers need the same choice on every run.
        tokio::select! {
            biased;
            done = &mut write => return done.is_ok(),
            _ = tokio::time::sleep_until(deadline) => return false,
            _ = redialled.notified() => *suspect_until = Some(Instant::now() + WRITE_STALL),
        }
    }
}

/// Accepts peer connections: each is authenticated, then read frame by
/// frame into the protocol loop.
pub async fn listen(listener: TcpListener, events: Events, p: LinkParams) {
    let pending = Arc::new(Semaphore::new(MAX_PENDING_HANDSHAKES));
    let current: Arc<Mutex<BTreeMap<ReplicaId, AbortHandle>>> = Arc::default();
    loop {
        let Ok((stream, addr)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let Ok(permit) = pending.clone().try_acquire_owned() else {
            tracing::warn!(%addr, "too many peer connections in their handshake; closing");
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (events, p, current) = (events.clone(), p.clone(), current.clone());
        tokio::spawn(async move {
            let mut stream = stream;
            let authed = tokio::time::timeout(
                HANDSHAKE_TIMEOUT,
                peer_auth::accept(&mut stream, &p.key, p.me, p.n),
            )
            .await;
            drop(permit);
            let (from, opener) = match authed {
                Ok(Ok(a)) => a,
                Ok(Err(e)) => {
                    tracing::warn!(%addr, error = %e, "peer handshake refused; closing");
                    return;
                }
                Err(_) => {
                    tracing::warn!(%addr, "peer handshake timed out; closing");
                    return;
                }
            };
            tracing::info!(%addr, peer = from, authenticated = p.key.authenticates(), "peer connected");
            let max = p.max_frame;
            let reader = tokio::spawn(receive(stream, opener, from, max, events));
            // One connection per peer: a newer one means the older is dead,
            // and perhaps our link to the peer too (`SUSPECT_STALL`).
            let old = current
                .lock()
                .ok()
                .and_then(|mut c| c.insert(from, reader.abort_handle()));
            if let Some(old) = old {
                old.abort();
                p.redialled.of(from).notify_one();
            }
        });
    }
}

/// Reads one authenticated connection until it ends or breaks a rule.
async fn receive(
    stream: TcpStream,
    mut opener: peer_auth::FrameOpener,
    from: ReplicaId,
    max: usize,
    events: Events,
) {
    let addr = stream.peer_addr().ok();
    let mut r = BufReader::with_capacity(1 << 16, stream);
    let mut buf = Vec::new();
    let mut snapshot = SnapshotAssembly::default();
    loop {
        let msg = match peer_auth::read_sealed(&mut r, &mut opener, max, &mut buf).await {
            Ok(Some(PeerFrame::Message(msg))) => Some(msg),
            Ok(Some(PeerFrame::SnapshotPart(part))) => match snapshot.add(part) {
                Ok(whole) => whole,
                Err(e) => {
                    tracing::warn!(?addr, peer = from, error = %e, "bad peer frame; closing");
                    return;
                }
            },
            Ok(None) => return,
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                tracing::warn!(?addr, peer = from, error = %e, "bad peer frame; closing");
                return;
            }
            Err(e) => {
                tracing::debug!(?addr, peer = from, error = %e, "peer connection ended");
                return;
            }
        };
        if let Some(msg) = msg {
            if events.send(Event::Peer { from, msg }).await.is_err() {
                return;
            }
        }
        // A large frame's buffer is not kept for the small ones after it
        // (a snapshot part, about `PART_BYTES`, is not large).
        if buf.capacity() > 2 * PART_BYTES {
            buf = Vec::new();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A write that makes no progress ends after `WRITE_STALL`; once the
    /// peer has re-dialled, at once if it has been blocked longer than
    /// `SUSPECT_STALL`, and for `WRITE_STALL` after the re-dial every
    /// blocked write ends after `SUSPECT_STALL`. Time is tokio's paused
    /// clock: the figures are exact.
    #[tokio::test(start_paused = true)]
    async fn a_blocked_write_gives_way_soon_after_the_peer_redials() {
        let redialled = Notify::new();
        let mut suspect = None;
        let blocked = || std::future::pending::<std::io::Result<()>>();

        let t = Instant::now();
        assert!(!unstalled(blocked(), &redialled, &mut suspect).await);
        assert_eq!(t.elapsed(), WRITE_STALL);

        let t = Instant::now();
        let redial = async {
            tokio::time::sleep(Duration::from_secs(3)).await;
            redialled.notify_one();
        };
        let (written, ()) = tokio::join!(unstalled(blocked(), &redialled, &mut suspect), redial);
        assert!(!written);
        assert_eq!(
            t.elapsed(),
            Duration::from_secs(3),
            "blocked past SUSPECT_STALL when the peer re-dialled"
        );

        let t = Instant::now();
        assert!(!unstalled(blocked(), &redialled, &mut suspect).await);
        assert_eq!(t.elapsed(), SUSPECT_STALL, "still suspect");
        assert!(
            unstalled(async { Ok(()) }, &redialled, &mut suspect).await,
            "a write that completes is not cut"
        );

        tokio::time::sleep(WRITE_STALL).await;
        let t = Instant::now();
        assert!(!unstalled(blocked(), &redialled, &mut suspect).await);
        assert_eq!(t.elapsed(), WRITE_STALL, "no longer suspect");

        // A re-dial while no write was under way counts at the next write.
        redialled.notify_one();
        let t = Instant::now();
        assert!(!unstalled(blocked(), &redialled, &mut suspect).await);
        assert_eq!(t.elapsed(), SUSPECT_STALL);
    }

    /// Replica 1's outbound link to a listening replica 0 on this runtime,
    /// with frames up to `max_frame`; replica 0's events come out of the
    /// receiver.
    async fn link_from_1_to_0(max_frame: usize) -> (PeerLinks, mpsc::Receiver<Event>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (events, rx) = mpsc::channel(16);
        let params = |me| LinkParams {
            me,
            n: 2,
            key: ClusterKey::new(Some(b"peers test secret!")),
            max_frame,
            redialled: Redials::new(2),
        };
        tokio::spawn(listen(listener, events, params(0)));
        (PeerLinks::start(&params(1), [(0, addr.to_string())]), rx)
    }

    /// A snapshot six times the frame limit goes through the real link in
    /// parts and arrives whole, in order between the messages sent around
    /// it; of two snapshots queued together only the newer is sent.
    #[tokio::test]
    async fn a_snapshot_larger_than_a_frame_arrives_whole_and_in_order() {
        let (links, mut rx) = link_from_1_to_0(2 * PART_BYTES).await;

        let snapshot = |tag: u8| {
            let kv = (0..3000u32)
                .map(|i| {
                    (
                        bytes::Bytes::from(i.to_be_bytes().to_vec()),
                        bytes::Bytes::from(vec![tag; 4096]),
                    )
                })
                .collect();
            Message::InstallSnapshot {
                ballot: stutter_core::Ballot(257),
                snapshot: Arc::new(stutter_core::Snapshot {
                    last_executed: stutter_core::Slot(u64::from(tag)),
                    kv,
                    ..Default::default()
                }),
            }
        };
        let probe = |id| Message::ReadProbe {
            ballot: stutter_core::Ballot(257),
            id,
        };
        // Queued before the link is up, so that all four go in one batch.
        for m in [probe(1), snapshot(1), snapshot(2), probe(2)] {
            links.send(0, m);
        }
        let mut got = Vec::new();
        while got.len() < 3 {
            match tokio::time::timeout(Duration::from_secs(20), rx.recv()).await {
                Ok(Some(Event::Peer { from: 1, msg })) => got.push(msg),
                Ok(Some(_)) => {}
                other => panic!("no message: {}", other.is_err()),
            }
        }
        assert_eq!(got, vec![probe(1), snapshot(2), probe(2)]);
    }

    /// The sender shares its thread with the protocol loop (one runtime
    /// thread by default): while a 24 MB snapshot is sealed and sent, a
    /// timer on that thread still fires between its parts. Sealed in one
    /// piece it stood still for 250-290 ms, most of an election timeout
    /// (docs/notes/2026-11-28-rejoin.md); a yield that did not let the
    /// runtime poll its timers would let it fire only every 61 parts.
    #[tokio::test(flavor = "current_thread")]
    async fn a_timer_on_the_senders_thread_fires_between_snapshot_parts() {
        let (links, mut rx) = link_from_1_to_0(256 << 20).await;
        // The link up first, so that the time measured is the snapshot's.
        let probe = Message::ReadProbe {
            ballot: stutter_core::Ballot(1),
            id: 0,
        };
        links.send(0, probe.clone());
        assert!(matches!(rx.recv().await, Some(Event::Peer { msg, .. }) if msg == probe));

        let ticks = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = ticks.clone();
        let timer = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(1)).await;
                counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        });
        let kv = (0..3000u32)
            .map(|i| {
                (
                    bytes::Bytes::from(i.to_be_bytes().to_vec()),
                    bytes::Bytes::from(vec![7u8; 8192]),
                )
            })
            .collect();
        let snapshot = Message::InstallSnapshot {
            ballot: stutter_core::Ballot(1),
            snapshot: Arc::new(stutter_core::Snapshot {
                kv,
                ..Default::default()
            }),
        };
        let parts = 24;
        links.send(0, snapshot.clone());
        let got = tokio::time::timeout(Duration::from_secs(60), rx.recv()).await;
        let fired = ticks.load(std::sync::atomic::Ordering::Relaxed);
        timer.abort();
        assert!(matches!(got, Ok(Some(Event::Peer { msg, .. })) if msg == snapshot));
        assert!(
            fired >= parts / 2,
            "the timer fired {fired} times while {parts} parts were sent"
        );
    }

    /// The sender of a received message is the replica the connection
    /// authenticated as; frames name no sender. A dialer that claims an
    /// id with the wrong key gets nothing through.
    #[tokio::test]
    async fn messages_are_attributed_to_the_authenticated_peer_only() {
        let key = ClusterKey::new(Some(b"peers test secret!"));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (events, mut rx) = mpsc::channel(16);
        let params = LinkParams {
            me: 0,
            n: 3,
            key: key.clone(),
            max_frame: 1 << 20,
            redialled: Redials::new(3),
        };
        tokio::spawn(listen(listener, events, params));

        let mut s = TcpStream::connect(addr).await.unwrap();
        let mut sealer = peer_auth::dial(&mut s, &key, 2, 0).await.unwrap();
        let mut frame = Vec::new();
        sealer
            .seal_message(
                &Message::Prepare {
                    ballot: stutter_core::Ballot(258),
                    last_executed: stutter_core::Slot(0),
                },
                1 << 20,
                &mut frame,
            )
            .unwrap();
        s.write_all(&frame).await.unwrap();
        match rx.recv().await {
            Some(Event::Peer { from, msg }) => {
                assert_eq!(from, 2);
                assert_eq!(
                    msg,
                    Message::Prepare {
                        ballot: stutter_core::Ballot(258),
                        last_executed: stutter_core::Slot(0)
                    }
                );
            }
            _ => panic!("expected the message"),
        }

        let mut forged = TcpStream::connect(addr).await.unwrap();
        let wrong = ClusterKey::new(Some(b"not the secret at all"));
        assert!(peer_auth::dial(&mut forged, &wrong, 1, 0).await.is_err());
        let _ = forged.write_all(&frame).await;
        let nothing = tokio::time::timeout(Duration::from_millis(300), rx.recv()).await;
        assert!(
            nothing.is_err(),
            "nothing arrives from a connection that failed the handshake"
        );
    }
}

//! The client port: accepts connections up to the cap and tells the two
//! protocols apart by the first byte. stutter's frames start with a length
//! whose first byte is 0 (client frames are far below 16 MiB); Replicant's
//! text lines start with a letter.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use stutter_core::{ClientId, ReplicaId};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::Semaphore;

use super::event::Events;
use super::idle::{self, Activity, Registry};
use super::{framed_session, text_session};
use crate::config::Caps;
use crate::platform::net::{TcpListener, TcpStream};
use crate::wire::{self, ClientResponse};

/// Connections over the cap that are still told why before they are
/// closed; past this many at once they are closed without a word.
const MAX_REJECTING: usize = 64;
/// How long a rejected connection gets to show its protocol.
const REJECT_WAIT: Duration = Duration::from_secs(1);
/// How long a new connection waits for the place of an evicted one.
const EVICT_WAIT: Duration = Duration::from_millis(500);

pub struct ClientPort {
    pub me: ReplicaId,
    pub caps: Caps,
    pub events: Events,
}

pub async fn listen(listener: TcpListener, port: ClientPort) {
    let port = Arc::new(port);
    let open = Arc::new(Semaphore::new(port.caps.max_client_connections));
    let rejecting = Arc::new(Semaphore::new(MAX_REJECTING));
    // Text clients are identified per connection; the numbering must not
    // restart at 1 after a restart, or a new connection would reuse the
    // (client, seq) of an executed request in the replicated session table
    // and get its recorded reply (found by the jepsen campaigns: a put
    // acknowledged without being executed). Start from the clock instead.
    // And no two replicas may hand out the same id: replicas started in
    // the same microsecond (every host of a turmoil run; processes started
    // together) would otherwise number alike, and a connection to a later
    // leader could take over a session another replica's client left. So
    // the replica's id + 1 is in bits 48..56: text ids lie in [2^48, 2^57),
    // apart from each replica's and from the framed client library's
    // (`client::fresh_client_id`, below 2^48).
    let micros = crate::platform::since_epoch().as_micros() as u64 & 0xffff_ffff_ffff;
    let first = (u64::from(port.me) + 1) << 48 | micros;
    let numbers = AtomicU64::new(first);
    let registry = Arc::new(Registry::default());
    loop {
        let Ok((stream, addr)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let permit = open.clone().try_acquire_owned().ok();
        if permit.is_none() && registry.evict_idle(port.caps.client_evict_idle) {
            // The evicted connection's task gives its place back when it
            // ends, on its next turn: the new one waits for it in a task
            // of its own, so that the accept loop never waits.
            let (open, port, registry) = (open.clone(), port.clone(), registry.clone());
            let conn_no = numbers.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                if let Ok(Ok(p)) = tokio::time::timeout(EVICT_WAIT, open.acquire_owned()).await {
                    run(stream, addr, &port, conn_no, &registry).await;
                    drop(p);
                }
            });
            continue;
        }
        let Some(permit) = permit else {
            tracing::warn!(%addr, max = port.caps.max_client_connections, "client connection over the cap, none idle; refusing");
            if let Ok(r) = rejecting.clone().try_acquire_owned() {
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(REJECT_WAIT, refuse(stream)).await;
                    drop(r);
                });
            }
            continue;
        };
        let conn_no = numbers.fetch_add(1, Ordering::Relaxed);
        let port = port.clone();
        let registry = registry.clone();
        tokio::spawn(async move {
            run(stream, addr, &port, conn_no, &registry).await;
            drop(permit);
        });
    }
}

/// Serves a connection that holds a place until it ends, is idle too
/// long, or is evicted.
async fn run(
    stream: TcpStream,
    addr: std::net::SocketAddr,
    port: &ClientPort,
    conn_no: u64,
    registry: &Registry,
) {
    let act = registry.open(conn_no);
    tokio::select! {
        r = serve(stream, port, conn_no, &act) => {
            if let Err(e) = r {
                tracing::debug!(%addr, error = %e, "client connection ended");
            }
        }
        _ = idle::watchdog(&act, port.caps.client_idle_timeout) => {
            tracing::debug!(%addr, "idle client connection closed");
        }
    }
    registry.closed(conn_no);
}

async fn serve(
    stream: TcpStream,
    port: &ClientPort,
    conn_no: u64,
    act: &Activity,
) -> std::io::Result<()> {
    let (r, w) = stream.into_split();
    let mut r = BufReader::with_capacity(1 << 16, r);
    let first = match r.fill_buf().await?.first() {
        Some(b) => *b,
        None => return Ok(()),
    };
    if first == 0 {
        framed_session::serve(r, w, port.events.clone(), port.caps, act).await
    } else {
        // Text clients have no identity of their own: one per connection.
        let client: ClientId = ((port.me as u64 + 1) << 48) | (conn_no & 0xffff_ffff_ffff);
        text_session::serve(
            r,
            w,
            port.events.clone(),
            client,
            port.caps.max_client_frame,
            port.caps.client_request_timeout,
            act,
        )
        .await
    }
}

/// Tells a connection over the cap why it is closed, in its protocol.
async fn refuse(stream: TcpStream) -> std::io::Result<()> {
    let (r, mut w) = stream.into_split();
    let mut r = BufReader::with_capacity(64, r);
    let framed = r.fill_buf().await?.first() == Some(&0);
    let why = "too many client connections; try again later";
    if framed {
        w.write_all(&wire::encode(&ClientResponse::Error(why.into()))?)
            .await
    } else {
        w.write_all(format!("error {why}\n").as_bytes()).await
    }
}

//! One connection of stutter's framed client protocol: requests are read
//! as they come, each a logical client's; replies go out as the protocol
//! loop produces them, in any order, through a writer task.

use stutter_core::Request;
use tokio::io::{AsyncWriteExt, BufReader, BufWriter};
use tokio::sync::{mpsc, oneshot};

use super::event::{Event, Events};
use super::idle::{self, Activity};
use crate::config::Caps;
use crate::platform::net::{OwnedReadHalf, OwnedWriteHalf};
use crate::wire::{self, ClientRequest, ClientResponse};

/// Serves the connection until it ends. At most
/// `caps.max_inflight_per_connection` requests wait for replies: the reply
/// queue has that many places, each request reserves one before it goes to
/// the loop, and while none is free the socket is not read (back-pressure).
/// A frame over `caps.max_client_frame` is answered with an error and
/// closes the connection (the stream would be out of step).
pub async fn serve(
    mut r: BufReader<OwnedReadHalf>,
    w: OwnedWriteHalf,
    events: Events,
    caps: Caps,
    act: &Activity,
) -> std::io::Result<()> {
    let (tx, rx) = mpsc::channel::<ClientResponse>(caps.max_inflight_per_connection);
    tokio::spawn(write_replies(w, rx));
    let mut body = Vec::new();
    loop {
        // Idle until a frame begins (the port's watchdog bounds that);
        // then the whole frame within the request timeout.
        if !idle::request_begins(&mut r).await? {
            return Ok(());
        }
        let limit = caps.client_request_timeout;
        let started = tokio::time::Instant::now();
        let len = match idle::within(limit, wire::read_len(&mut r)).await? {
            Some(len) if len <= caps.max_client_frame => len,
            Some(len) => {
                let e = wire::oversize(len, caps.max_client_frame);
                tracing::warn!(error = %e, "client frame over the limit; closing");
                if let Ok(slot) = tx.clone().reserve_owned().await {
                    slot.send(ClientResponse::Error(format!("bad frame: {e}")));
                }
                return Err(e);
            }
            None => return Ok(()),
        };
        let left = limit.saturating_sub(started.elapsed());
        idle::within(left, wire::read_body(&mut r, len, &mut body)).await?;
        act.touch();
        let Ok(slot) = tx.clone().reserve_owned().await else {
            return Ok(());
        };
        match wire::decode::<ClientRequest>(&body) {
            Ok(ClientRequest::Op { client, seq, op }) => {
                if events
                    .send(Event::Client {
                        reply: slot,
                        req: Request { client, seq, op },
                    })
                    .await
                    .is_err()
                {
                    return Ok(());
                }
            }
            Ok(ClientRequest::Status) => {
                let (otx, orx) = oneshot::channel();
                let _ = events.send(Event::Status(otx)).await;
                if let Ok(s) = orx.await {
                    slot.send(ClientResponse::Status(s));
                }
            }
            Ok(ClientRequest::Digest) => {
                let (otx, orx) = oneshot::channel();
                let _ = events.send(Event::Status(otx)).await;
                if let Ok(s) = orx.await {
                    slot.send(ClientResponse::Digest {
                        last_executed: s.last_executed,
                        digest: s.digest,
                    });
                }
            }
            Err(e) => {
                // The frame boundary is intact: answer and keep serving.
                slot.send(ClientResponse::Error(format!("malformed request: {e}")));
            }
        }
        if body.capacity() > 1 << 20 {
            body = Vec::new();
        }
    }
}

/// Writes replies as they come, everything ready in one flush. Ends when
/// the reader and every reserved reply place are gone, or on a write error.
async fn write_replies(w: OwnedWriteHalf, mut rx: mpsc::Receiver<ClientResponse>) {
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

//! One connection of Replicant's text protocol (`crate::text` is its codec).

use stutter_core::{ClientId, Op, Reply, Request};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

use super::event::{Event, Events};
use super::idle::{self, Activity};
use crate::platform::net::{OwnedReadHalf, OwnedWriteHalf};
use crate::text::{self, Command, Line};
use crate::wire::ClientResponse;

/// Serves one text connection. Requests are handed to the protocol loop one
/// at a time: the next line is read only once the previous one is
/// answered, so replies come back in request order (the protocol has no
/// request ids) and the connection, a client of its own, never has two
/// requests outstanding (the core assumes that of every client; reads, which
/// bypass the log, would otherwise overtake the writes sent before them).
/// Its reply queue therefore has one place. A line over `max_line` bytes
/// gets an error line and closes the connection. So does an expired
/// session (`error session expired`): the connection is the client, and a
/// new connection is a new client with a session of its own.
///
/// The connection registers (`Op::Register`, under `client` as the nonce)
/// before its first write and uses the id the log assigns, so that a
/// delayed request of it is never executed after its session was
/// forgotten (`stutter_core::sessions`). Until a registration succeeds,
/// a write line is answered as the registration was (a redirect, or
/// `retry`): the write itself was not sent. Reads need no session (a
/// replica takes them from any id and never logs them), so a connection
/// that only reads costs no consensus
/// round, and a read is answered by whichever replica the connection
/// reached as before (a follower redirects it).
pub async fn serve(
    mut r: BufReader<OwnedReadHalf>,
    mut w: OwnedWriteHalf,
    events: Events,
    client: ClientId,
    max_line: usize,
    limit: std::time::Duration,
    act: &Activity,
) -> std::io::Result<()> {
    let (tx, mut rx) = mpsc::channel::<ClientResponse>(1);
    let nonce = client;
    let mut client: Option<ClientId> = None;
    let mut seq = 0u64;
    let mut line = Vec::new();
    let mut out = Vec::new();
    loop {
        // Idle until a line begins (the port's watchdog bounds that); then
        // the whole line within the request timeout.
        if !idle::request_begins(&mut r).await? {
            return Ok(());
        }
        match idle::within(limit, text::read_line(&mut r, max_line, &mut line)).await? {
            Line::Request => act.touch(),
            Line::End => return Ok(()),
            Line::TooLong => {
                tracing::warn!(max_line, "client line over the limit; closing");
                return write_reply(
                    &mut w,
                    &mut out,
                    &ClientResponse::Error("line too long".into()),
                )
                .await;
            }
        }
        let resp = match text::parse(&line) {
            Ok(Command::Op(op)) => 'op: {
                let id = match client {
                    Some(id) => id,
                    None if matches!(op, Op::Get { .. }) => nonce,
                    None => {
                        let Ok(slot) = tx.clone().reserve_owned().await else {
                            return Ok(());
                        };
                        if events
                            .send(Event::Client {
                                reply: slot,
                                req: Request::register(nonce),
                            })
                            .await
                            .is_err()
                        {
                            return Ok(());
                        }
                        match rx.recv().await {
                            Some(ClientResponse::Reply {
                                reply: Reply::Registered { client: id },
                                ..
                            }) => {
                                client = Some(id);
                                // The new id's session starts at seq 0;
                                // the reads sent under the nonce had
                                // seqs of their own.
                                seq = 0;
                                id
                            }
                            // Not registered (not the leader, busy, the
                            // disk full, no outcome in time): the operation
                            // was not sent, so the line may be sent again.
                            Some(
                                resp @ (ClientResponse::Redirect { .. }
                                | ClientResponse::Reply {
                                    reply: Reply::Redirect { .. } | Reply::StorageFull,
                                    ..
                                }),
                            ) => {
                                break 'op resp;
                            }
                            Some(_) => {
                                break 'op ClientResponse::Reply {
                                    client: nonce,
                                    seq: 0,
                                    reply: Reply::Busy,
                                }
                            }
                            None => return Ok(()),
                        }
                    }
                };
                seq += 1;
                let Ok(slot) = tx.clone().reserve_owned().await else {
                    return Ok(());
                };
                // Each line is a new seq; a line whose outcome is unknown
                // is not resent under it.
                if events
                    .send(Event::Client {
                        reply: slot,
                        req: Request::new(id, seq, op),
                    })
                    .await
                    .is_err()
                {
                    return Ok(());
                }
                match rx.recv().await {
                    Some(resp) => resp,
                    None => return Ok(()),
                }
            }
            Ok(Command::Status) => {
                let (otx, orx) = oneshot::channel();
                let _ = events.send(Event::Status(otx)).await;
                match orx.await {
                    Ok(s) => ClientResponse::Status(s),
                    Err(_) => return Ok(()),
                }
            }
            Err(e) => ClientResponse::Error(e),
        };
        write_reply(&mut w, &mut out, &resp).await?;
        if matches!(
            resp,
            ClientResponse::Reply {
                reply: Reply::SessionExpired,
                ..
            }
        ) {
            return Ok(());
        }
        if line.capacity() > 1 << 20 {
            line = Vec::new();
        }
    }
}

async fn write_reply(
    w: &mut OwnedWriteHalf,
    out: &mut Vec<u8>,
    resp: &ClientResponse,
) -> std::io::Result<()> {
    out.clear();
    text::render_into(resp, out);
    out.push(b'\n');
    w.write_all(out).await
}

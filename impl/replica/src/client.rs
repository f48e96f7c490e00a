//! An async client of stutter's framed protocol. Each request carries this
//! client's id and an increasing sequence number, so that retrying it after
//! a timeout or a leader change is safe: the cluster executes it at most
//! once and answers a retry with the original reply.
//!
//! The client id is the cluster's: before its first request, and again
//! after its session expired, the client registers (`Op::Register`) under
//! a nonce and continues under the id the log assigns. A delayed request
//! of an id whose session was evicted is then always expired, never run
//! again (`stutter_core::sessions`).

use std::time::Duration;

use stutter_core::{ClientId, Op, Reply, Seq};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::time::Instant;

use crate::config::resolve;
use crate::platform::net::{OwnedReadHalf, OwnedWriteHalf, TcpStream};
use crate::wire::{self, ClientRequest, ClientResponse, StatusInfo};

#[derive(Debug)]
pub enum ClientError {
    /// No answer before the deadline: the request may or may not take effect.
    Timeout,
    /// A definite rejection: the request did not and will not take effect.
    Rejected(Reply),
    /// The server could not parse the request.
    Protocol(String),
    /// The cluster evicted this client's session (`stutter_core::sessions`):
    /// the request's outcome is unknown (an earlier attempt may have
    /// executed), and every later request under this client id gets the
    /// same answer. The client registers again before its next request;
    /// the request is not retried under the same `(client, seq)`.
    SessionExpired,
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Timeout => write!(f, "no answer before the deadline (outcome unknown)"),
            ClientError::Rejected(Reply::StorageFull) => write!(
                f,
                "rejected: disk full (the leader's storage alarm is on; writes refused, reads served)"
            ),
            ClientError::Rejected(r) => write!(f, "rejected: {r:?}"),
            ClientError::Protocol(e) => write!(f, "protocol error: {e}"),
            ClientError::SessionExpired => write!(
                f,
                "session expired (outcome unknown): the next request registers a new client id"
            ),
        }
    }
}

impl std::error::Error for ClientError {}

type Conn = (BufReader<OwnedReadHalf>, OwnedWriteHalf);

pub struct Client {
    addrs: Vec<String>,
    current: usize,
    conn: Option<Conn>,
    /// Routes the answer to this client's `Register` (below 2^63).
    nonce: ClientId,
    /// The id the cluster assigned, once registered.
    id: Option<ClientId>,
    seq: Seq,
    /// Per attempt on one replica.
    attempt_timeout: Duration,
    /// For the whole call, retries included.
    deadline: Duration,
}

/// A client id unlikely to collide with another process's.
pub fn fresh_client_id() -> ClientId {
    let t = crate::platform::since_epoch().as_nanos() as u64;
    (t ^ ((std::process::id() as u64) << 40)) & 0x0000_ffff_ffff_ffff
}

async fn connect(addr: &str, timeout: Duration) -> std::io::Result<Conn> {
    let a = resolve(addr)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
    let s = tokio::time::timeout(timeout, TcpStream::connect(a))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out"))??;
    s.set_nodelay(true)?;
    let (r, w) = s.into_split();
    Ok((BufReader::new(r), w))
}

async fn round_trip(
    conn: &mut Conn,
    req: &ClientRequest,
    timeout: Duration,
) -> std::io::Result<ClientResponse> {
    let io = async {
        conn.1.write_all(&wire::encode(req)?).await?;
        match wire::read_frame(&mut conn.0, wire::MAX_REPLY_FRAME).await? {
            Some(body) => wire::decode::<ClientResponse>(&body),
            None => Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "connection closed",
            )),
        }
    };
    tokio::time::timeout(timeout, io)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no reply"))?
}

impl Client {
    /// A client of the replicas at `addrs`; `nonce` (below 2^63, e.g.
    /// [`fresh_client_id`]) routes the answers to its registrations.
    pub fn new(addrs: Vec<String>, nonce: ClientId) -> Client {
        Client {
            addrs,
            current: 0,
            conn: None,
            nonce,
            id: None,
            seq: 0,
            attempt_timeout: Duration::from_secs(1),
            deadline: Duration::from_secs(10),
        }
    }

    pub fn with_timeouts(mut self, attempt: Duration, deadline: Duration) -> Client {
        self.attempt_timeout = attempt;
        self.deadline = deadline;
        self
    }

    /// The id the cluster assigned, once registered.
    pub fn id(&self) -> Option<ClientId> {
        self.id
    }

    /// Registers again before the next request, under nonce `nonce`.
    pub fn renew(&mut self, nonce: ClientId) {
        self.nonce = nonce;
        self.id = None;
        self.seq = 0;
    }

    /// Has the cluster assign this client an id (`Op::Register`), retried
    /// as any request until the deadline.
    pub async fn register(&mut self) -> Result<ClientId, ClientError> {
        let req = ClientRequest::Op {
            client: self.nonce,
            seq: 0,
            op: Op::Register,
        };
        match self.exchange(req).await? {
            Reply::Registered { client } => {
                self.id = Some(client);
                self.seq = 0;
                Ok(client)
            }
            other => Err(ClientError::Protocol(format!(
                "register answered {other:?}"
            ))),
        }
    }

    fn move_to(&mut self, addr: Option<&str>) {
        self.conn = None;
        match addr.and_then(|a| self.addrs.iter().position(|x| x == a)) {
            Some(i) => self.current = i,
            None => self.current = (self.current + 1) % self.addrs.len().max(1),
        }
    }

    /// Executes `op`, following redirects and retrying the same
    /// `(client, seq)` on failures until the deadline: the cluster runs it
    /// at most once, and expires it rather than running it again once it
    /// evicted this client's session (`stutter_core::sessions`).
    pub async fn call(&mut self, op: Op) -> Result<Reply, ClientError> {
        let id = match self.id {
            Some(id) => id,
            None => self.register().await?,
        };
        self.seq += 1;
        let req = ClientRequest::Op {
            client: id,
            seq: self.seq,
            op,
        };
        let r = self.exchange(req).await;
        if matches!(
            r,
            Err(ClientError::SessionExpired) | Err(ClientError::Rejected(Reply::UnknownClient))
        ) {
            // The id is spent: the next request registers first.
            self.id = None;
        }
        r
    }

    /// Sends `req` until it is answered, following redirects and retrying
    /// on failures until the deadline (see [`Client::call`]).
    async fn exchange(&mut self, req: ClientRequest) -> Result<Reply, ClientError> {
        let give_up = Instant::now() + self.deadline;
        let mut pause = Duration::from_millis(5);
        while Instant::now() < give_up {
            if self.conn.is_none() {
                let addr = self.addrs[self.current % self.addrs.len().max(1)].clone();
                match connect(&addr, self.attempt_timeout).await {
                    Ok(c) => self.conn = Some(c),
                    Err(_) => {
                        self.move_to(None);
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(Duration::from_millis(200));
                        continue;
                    }
                }
            }
            let Some(conn) = self.conn.as_mut() else {
                continue;
            };
            match round_trip(conn, &req, self.attempt_timeout).await {
                Ok(ClientResponse::Reply {
                    reply: Reply::Busy, ..
                }) => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(200));
                }
                Ok(ClientResponse::Reply {
                    reply:
                        r
                        @ (Reply::Stale | Reply::UnknownClient | Reply::Malformed | Reply::StorageFull),
                    ..
                }) => return Err(ClientError::Rejected(r)),
                Ok(ClientResponse::Reply {
                    reply: Reply::SessionExpired,
                    ..
                }) => return Err(ClientError::SessionExpired),
                Ok(ClientResponse::Reply {
                    reply: Reply::Redirect { .. },
                    ..
                }) => {
                    self.move_to(None);
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(200));
                }
                Ok(ClientResponse::Reply { reply, .. }) => return Ok(reply),
                Ok(ClientResponse::Redirect { addr, .. }) => {
                    let known = addr.is_some();
                    self.move_to(addr.as_deref());
                    if !known {
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(Duration::from_millis(200));
                    }
                }
                Ok(ClientResponse::Unknown { .. }) => {
                    // The leader it went to may have lost leadership: the
                    // same (client, seq) again, elsewhere, after a pause.
                    self.move_to(None);
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(200));
                }
                Ok(ClientResponse::Error(e)) => return Err(ClientError::Protocol(e)),
                Ok(other) => {
                    return Err(ClientError::Protocol(format!(
                        "unexpected response {other:?}"
                    )))
                }
                Err(_) => {
                    // Sent (or partly) and unanswered: it may execute; the
                    // same (client, seq) again, elsewhere.
                    self.move_to(None);
                }
            }
        }
        Err(ClientError::Timeout)
    }
}

/// Asks one replica for its status.
pub async fn status(addr: &str, timeout: Duration) -> std::io::Result<StatusInfo> {
    let mut conn = connect(addr, timeout).await?;
    match round_trip(&mut conn, &ClientRequest::Status, timeout).await? {
        ClientResponse::Status(s) => Ok(s),
        other => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("unexpected {other:?}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stutter_core::Op;
    use tokio::net::TcpListener;

    /// A replica that registers every client as `REGISTERED_BASE`, answers
    /// the first other request "outcome unknown" and the retry with
    /// `Done`; it records every (client, seq) it was sent.
    async fn unknown_then_done() -> (
        String,
        tokio::sync::mpsc::UnboundedReceiver<(ClientId, Seq)>,
    ) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (seen_tx, seen) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut first = true;
            loop {
                let Ok((s, _)) = listener.accept().await else {
                    return;
                };
                let (r, mut w) = s.into_split();
                let mut r = BufReader::new(r);
                while let Ok(Some(body)) = wire::read_frame(&mut r, wire::MAX_CLIENT_FRAME).await {
                    let Ok(ClientRequest::Op { client, seq, op }) = wire::decode(&body) else {
                        return;
                    };
                    let _ = seen_tx.send((client, seq));
                    let resp = if op == Op::Register {
                        ClientResponse::Reply {
                            client,
                            seq,
                            reply: Reply::Registered {
                                client: stutter_core::REGISTERED_BASE,
                            },
                        }
                    } else if std::mem::take(&mut first) {
                        ClientResponse::Unknown { client, seq }
                    } else {
                        ClientResponse::Reply {
                            client,
                            seq,
                            reply: Reply::Done,
                        }
                    };
                    if w.write_all(&wire::encode(&resp).unwrap()).await.is_err() {
                        break;
                    }
                }
            }
        });
        (addr, seen)
    }

    #[tokio::test]
    async fn an_unknown_outcome_is_retried_with_the_same_sequence_number() {
        let (addr, mut seen) = unknown_then_done().await;
        let mut c = Client::new(vec![addr.clone(), addr], 42)
            .with_timeouts(Duration::from_secs(2), Duration::from_secs(5));
        let id = stutter_core::REGISTERED_BASE;
        let r = c
            .call(Op::Put {
                key: "k".into(),
                value: "v".into(),
            })
            .await;
        assert!(matches!(r, Ok(Reply::Done)), "{r:?}");
        assert_eq!(
            seen.recv().await,
            Some((42, 0)),
            "the first call registers under the nonce"
        );
        assert_eq!(c.id(), Some(id));
        assert_eq!(seen.recv().await, Some((id, 1)), "the first attempt");
        assert_eq!(
            seen.recv().await,
            Some((id, 1)),
            "the retry reuses (client, seq)"
        );
        // The next call is the next seq, under the same id.
        let r = c
            .call(Op::Put {
                key: "k".into(),
                value: "w".into(),
            })
            .await;
        assert!(matches!(r, Ok(Reply::Done)), "{r:?}");
        assert_eq!(seen.recv().await, Some((id, 2)));
    }

    /// A client whose session expired registers again before its next
    /// request and continues under the new id, numbering from 1.
    #[tokio::test]
    async fn an_expired_session_is_followed_by_a_new_registration() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            let Ok((s, _)) = listener.accept().await else {
                return;
            };
            let (r, mut w) = s.into_split();
            let mut r = BufReader::new(r);
            let (mut registered, mut expired) = (0u64, false);
            while let Ok(Some(body)) = wire::read_frame(&mut r, wire::MAX_CLIENT_FRAME).await {
                let Ok(ClientRequest::Op {
                    client, seq, op, ..
                }) = wire::decode(&body)
                else {
                    return;
                };
                let _ = seen_tx.send((client, seq));
                let reply = if op == Op::Register {
                    registered += 1;
                    Reply::Registered {
                        client: stutter_core::REGISTERED_BASE + registered - 1,
                    }
                } else if !std::mem::replace(&mut expired, true) {
                    Reply::SessionExpired
                } else {
                    Reply::Done
                };
                if w.write_all(
                    &wire::encode(&ClientResponse::Reply { client, seq, reply }).unwrap(),
                )
                .await
                .is_err()
                {
                    break;
                }
            }
        });
        let base = stutter_core::REGISTERED_BASE;
        let mut c = Client::new(vec![addr], 42)
            .with_timeouts(Duration::from_secs(2), Duration::from_secs(5));
        let r = c
            .call(Op::Put {
                key: "k".into(),
                value: "v".into(),
            })
            .await;
        assert!(matches!(r, Err(ClientError::SessionExpired)), "{r:?}");
        assert_eq!(c.id(), None, "the expired id is dropped");
        let r = c
            .call(Op::Put {
                key: "k".into(),
                value: "w".into(),
            })
            .await;
        assert!(matches!(r, Ok(Reply::Done)), "{r:?}");
        assert_eq!(c.id(), Some(base + 1));
        let sent: Vec<_> = std::iter::from_fn(|| seen.try_recv().ok()).collect();
        assert_eq!(sent, vec![(42, 0), (base, 1), (42, 0), (base + 1, 1)]);
    }
}

//! A client of the text protocol (docs/replica.md, "Replicant's text
//! protocol"), as the campaigns' workload and Replicant's load generator
//! speak it: one line per request, one reply line. The replica gives each
//! connection an id of its own and numbers its requests, so this client
//! has no session to retry under: a request that got no answer has an
//! unknown outcome and is not sent again; only the definite rejections
//! (`leader is ADDR`, `retry`: nothing was proposed) are sent elsewhere.
//! It exercises what the framed client does not: the node's text parser
//! and renderer, per-connection client ids, and redirects by address.

use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use turmoil::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use turmoil::net::TcpStream;

use crate::history::{Kind, Outcome};

/// How long a connection attempt and each reply may take.
const ATTEMPT: Duration = Duration::from_millis(500);
/// Redirects and refusals followed per operation at most.
const MAX_TRIES: usize = 10;

pub struct TextClient {
    addrs: Vec<String>,
    target: usize,
    conn: Option<(BufReader<OwnedReadHalf>, OwnedWriteHalf)>,
}

impl TextClient {
    pub fn new(addrs: Vec<String>, first: usize) -> TextClient {
        let target = if addrs.is_empty() {
            0
        } else {
            first % addrs.len()
        };
        TextClient {
            addrs,
            target,
            conn: None,
        }
    }

    fn next_target(&mut self) {
        self.target = (self.target + 1) % self.addrs.len().max(1);
        self.conn = None;
    }

    /// Runs `kind` on key `key` (named as the framed workload names it).
    pub async fn call(&mut self, key: &str, kind: Kind) -> Outcome {
        let line = match kind {
            Kind::Put(v) => format!("put {key} {v}\n"),
            Kind::Get => format!("get {key}\n"),
        };
        for _ in 0..MAX_TRIES {
            if self.conn.is_none() {
                let Some(addr) = self.addrs.get(self.target) else {
                    return Outcome::Failed;
                };
                match tokio::time::timeout(ATTEMPT, TcpStream::connect(addr.as_str())).await {
                    Ok(Ok(s)) => {
                        let (r, w) = s.into_split();
                        self.conn = Some((BufReader::new(r), w));
                    }
                    // Nothing was sent: try the next replica.
                    _ => {
                        self.next_target();
                        continue;
                    }
                }
            }
            let Some((r, w)) = self.conn.as_mut() else {
                continue;
            };
            if w.write_all(line.as_bytes()).await.is_err() {
                // The request may have left before the error: unknown.
                self.conn = None;
                return Outcome::Unknown;
            }
            let mut reply = String::new();
            let got = tokio::time::timeout(ATTEMPT, r.read_line(&mut reply)).await;
            let reply = match got {
                Ok(Ok(n)) if n > 0 => reply.trim_end_matches(['\r', '\n']).to_string(),
                // No answer (timeout, closed, reset): it may have been
                // proposed, and this connection's id is gone with it.
                _ => {
                    self.conn = None;
                    return Outcome::Unknown;
                }
            };
            if let Some(addr) = reply.strip_prefix("leader is ") {
                // Nothing was proposed; go where the follower points.
                match self.addrs.iter().position(|a| a == addr) {
                    Some(i) => {
                        self.target = i;
                        self.conn = None;
                    }
                    None => self.next_target(),
                }
                continue;
            }
            if reply == "retry" {
                self.next_target();
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
            if reply.starts_with("error timeout") {
                return Outcome::Unknown;
            }
            if reply.starts_with("error") {
                // A refusal before anything was proposed (a bad command).
                return Outcome::Failed;
            }
            return match kind {
                Kind::Put(_) if reply == "ok" => Outcome::Ok(None),
                Kind::Put(_) => Outcome::Unknown,
                Kind::Get if reply.is_empty() => Outcome::Ok(None),
                Kind::Get => reply
                    .parse()
                    .map_or(Outcome::Unknown, |v| Outcome::Ok(Some(v))),
            };
        }
        // Redirected or refused every time: nothing was proposed.
        Outcome::Failed
    }
}

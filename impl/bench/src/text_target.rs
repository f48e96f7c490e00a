//! Replicant's line protocol (`get k`, `put k v`, `del k`, one reply line
//! each), which stutter's client port speaks too. Both dialects of reply are
//! understood: Replicant answers a put with an empty line and a missing key
//! with `key not found`; stutter answers `ok` and an empty line.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

use crate::workload::Op;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Value(Option<Vec<u8>>),
    Written,
}

#[derive(Debug)]
pub enum CallError {
    /// The replica is not the leader (or asked to retry): try another.
    NotLeader,
    /// Connection failed, broke or timed out.
    Io(String),
    /// A reply that is not an answer to the request.
    Unexpected(String),
    /// The client's session expired (the cluster's session table is
    /// bounded): the outcome is unknown, and the id is not used again.
    SessionExpired,
}

/// Parses one reply line to `op`. Pure, so it is unit-tested.
pub fn parse_reply(op: &Op, line: &[u8]) -> Result<Answer, CallError> {
    if line.starts_with(b"leader is") || line == b"retry" {
        return Err(CallError::NotLeader);
    }
    if line == b"error session expired" {
        return Err(CallError::SessionExpired);
    }
    match op {
        Op::Read { .. } => {
            if line.is_empty() || line == b"key not found" {
                Ok(Answer::Value(None))
            } else if line.starts_with(b"error") || line == b"bad command" {
                Err(CallError::Unexpected(
                    String::from_utf8_lossy(line).into_owned(),
                ))
            } else {
                Ok(Answer::Value(Some(line.to_vec())))
            }
        }
        Op::Update { .. } => {
            if line.is_empty() || line == b"ok" {
                Ok(Answer::Written)
            } else {
                Err(CallError::Unexpected(
                    String::from_utf8_lossy(line).into_owned(),
                ))
            }
        }
    }
}

/// Appends the request line for `op`, newline included.
pub fn encode_request(op: &Op, buf: &mut Vec<u8>) {
    match op {
        Op::Read { key } => {
            buf.extend_from_slice(b"get ");
            buf.extend_from_slice(key);
        }
        Op::Update { key, value } => {
            buf.extend_from_slice(b"put ");
            buf.extend_from_slice(key);
            buf.push(b' ');
            buf.extend_from_slice(value);
        }
    }
    buf.push(b'\n');
}

pub struct TextConn {
    addrs: Vec<SocketAddr>,
    current: usize,
    conn: Option<(BufReader<OwnedReadHalf>, OwnedWriteHalf)>,
    timeout: Duration,
    line: Vec<u8>,
    buf: Vec<u8>,
}

impl TextConn {
    pub fn new(addrs: Vec<SocketAddr>, start: usize, timeout: Duration) -> TextConn {
        let current = start % addrs.len().max(1);
        TextConn {
            addrs,
            current,
            conn: None,
            timeout,
            line: Vec::new(),
            buf: Vec::new(),
        }
    }

    /// Moves to the next replica (after a redirect or a failure).
    /// How many replicas the connection moves between.
    pub fn replicas(&self) -> usize {
        self.addrs.len()
    }

    pub fn next_replica(&mut self) {
        self.conn = None;
        self.current = (self.current + 1) % self.addrs.len().max(1);
    }

    async fn connect(&mut self) -> Result<()> {
        let addr = *self
            .addrs
            .get(self.current)
            .ok_or_else(|| anyhow!("no addresses"))?;
        let s = tokio::time::timeout(self.timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| anyhow!("connect to {addr} timed out"))?
            .with_context(|| format!("connect to {addr}"))?;
        s.set_nodelay(true)?;
        let (r, w) = s.into_split();
        self.conn = Some((BufReader::new(r), w));
        Ok(())
    }

    /// One request, one reply line, on the current replica.
    pub async fn call(&mut self, op: &Op) -> Result<Answer, CallError> {
        if self.conn.is_none() {
            self.connect()
                .await
                .map_err(|e| CallError::Io(e.to_string()))?;
        }
        self.buf.clear();
        encode_request(op, &mut self.buf);
        let timeout = self.timeout;
        let Some((r, w)) = self.conn.as_mut() else {
            return Err(CallError::Io("not connected".into()));
        };
        let line = &mut self.line;
        line.clear();
        let io = async {
            w.write_all(&self.buf).await?;
            let n = r.read_until(b'\n', line).await?;
            if n == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "connection closed",
                ));
            }
            Ok(())
        };
        match tokio::time::timeout(timeout, io).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                self.conn = None;
                return Err(CallError::Io(e.to_string()));
            }
            Err(_) => {
                self.conn = None;
                return Err(CallError::Io("timed out".into()));
            }
        }
        while matches!(self.line.last(), Some(b'\n' | b'\r')) {
            self.line.pop();
        }
        parse_reply(op, &self.line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_dialects_parse() {
        let get = Op::Read { key: b"k".to_vec() };
        let put = Op::Update {
            key: b"k".to_vec(),
            value: b"v".to_vec(),
        };
        assert_eq!(
            parse_reply(&get, b"key not found").ok(),
            Some(Answer::Value(None))
        );
        assert_eq!(parse_reply(&get, b"").ok(), Some(Answer::Value(None)));
        assert_eq!(
            parse_reply(&get, b"v:1").ok(),
            Some(Answer::Value(Some(b"v:1".to_vec())))
        );
        assert_eq!(parse_reply(&put, b"").ok(), Some(Answer::Written));
        assert_eq!(parse_reply(&put, b"ok").ok(), Some(Answer::Written));
        assert!(matches!(
            parse_reply(&put, b"leader is ..."),
            Err(CallError::NotLeader)
        ));
        assert!(matches!(
            parse_reply(&get, b"retry"),
            Err(CallError::NotLeader)
        ));
        assert!(matches!(
            parse_reply(&put, b"bad command"),
            Err(CallError::Unexpected(_))
        ));
        assert!(matches!(
            parse_reply(&get, b"error bad command"),
            Err(CallError::Unexpected(_))
        ));
    }
}

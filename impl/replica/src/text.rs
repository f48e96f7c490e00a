//! Replicant's line protocol on the client port, one reply line per
//! request line: `get k` → the value or an empty line; `put k v`, `del k` →
//! `ok`; `cas k from to` (`-` = absent) → `ok` or `fail <current|->`;
//! `status` → one JSON line; not the leader → `leader is <addr>` (or
//! `retry` when no leader is known); busy → `retry`; anything else →
//! `error ...`. Keys and values are single space-free tokens.

//!
//! This module is the protocol's codec only (it knows nothing of the
//! node); `node::text_session` serves a connection with it.

use bytes::Bytes;
use stutter_core::{Op, Reply};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt};

use crate::wire::ClientResponse;

#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    Op(Op),
    Status,
}

/// Parses one request line (without its newline).
pub fn parse(line: &[u8]) -> Result<Command, String> {
    let text = std::str::from_utf8(line).map_err(|_| "not UTF-8".to_string())?;
    let parts: Vec<&str> = text
        .trim_end_matches('\r')
        .split(' ')
        .filter(|p| !p.is_empty())
        .collect();
    let b = |s: &str| Bytes::copy_from_slice(s.as_bytes());
    match parts.as_slice() {
        ["get", k] => Ok(Command::Op(Op::Get { key: b(k) })),
        ["put", k, v] => Ok(Command::Op(Op::Put {
            key: b(k),
            value: b(v),
        })),
        ["del", k] => Ok(Command::Op(Op::Del { key: b(k) })),
        ["cas", k, from, to] => {
            let from = if *from == "-" { None } else { Some(b(from)) };
            Ok(Command::Op(Op::Cas {
                key: b(k),
                from,
                to: b(to),
            }))
        }
        ["status"] => Ok(Command::Status),
        _ => Err("bad command".to_string()),
    }
}

/// The reply line for a response (without its newline).
pub fn render(resp: &ClientResponse) -> Vec<u8> {
    let mut out = Vec::new();
    render_into(resp, &mut out);
    out
}

/// Appends the reply line for a response (without its newline) to `out`.
pub fn render_into(resp: &ClientResponse, out: &mut Vec<u8>) {
    let line: std::borrow::Cow<'_, [u8]> = match resp {
        ClientResponse::Reply { reply, .. } => match reply {
            Reply::Value(Some(v)) => v[..].into(),
            Reply::Value(None) => b""[..].into(),
            Reply::Done => b"ok"[..].into(),
            Reply::Cas { ok: true, .. } => b"ok"[..].into(),
            Reply::Cas { ok: false, current } => {
                out.extend_from_slice(b"fail ");
                current.as_deref().unwrap_or(b"-").into()
            }
            Reply::Redirect { .. } | Reply::Busy => b"retry"[..].into(),
            Reply::Stale => b"error stale request"[..].into(),
            Reply::SessionExpired => b"error session expired"[..].into(),
            Reply::Registered { client } => format!("registered {client}").into_bytes().into(),
            Reply::UnknownClient => b"error unknown client"[..].into(),
            Reply::Malformed => b"error malformed request"[..].into(),
            Reply::StorageFull => b"error disk full: writes refused (reads are served)"[..].into(),
        },
        ClientResponse::Redirect { addr: Some(a), .. } => {
            format!("leader is {a}").into_bytes().into()
        }
        ClientResponse::Redirect { addr: None, .. } => b"retry"[..].into(),
        ClientResponse::Status(s) => serde_json::to_vec(s)
            .unwrap_or_else(|_| b"error status".to_vec())
            .into(),
        ClientResponse::Digest {
            last_executed,
            digest,
        } => format!("{last_executed} {digest:016x}").into_bytes().into(),
        ClientResponse::Error(e) => format!("error {e}").into_bytes().into(),
        ClientResponse::Unknown { .. } => b"error timeout: the outcome is unknown"[..].into(),
    };
    out.extend_from_slice(&line);
}

/// What [`read_line`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A request line, in the buffer without its line ending.
    Request,
    /// The end of the stream.
    End,
    /// A line longer than the cap: the connection is out of step.
    TooLong,
}

/// Reads the next non-empty request line into `line`, without its line
/// ending (a last line without a newline at the end of the stream still
/// counts). The buffer grows with the bytes that arrive, up to `max` + 1.
pub async fn read_line<R: AsyncBufRead + Unpin>(
    r: &mut R,
    max: usize,
    line: &mut Vec<u8>,
) -> std::io::Result<Line> {
    loop {
        line.clear();
        let n = (&mut *r)
            .take(max as u64 + 1)
            .read_until(b'\n', line)
            .await?;
        if n == 0 {
            return Ok(Line::End);
        }
        if line.last() != Some(&b'\n') && line.len() > max {
            return Ok(Line::TooLong);
        }
        while matches!(line.last(), Some(b'\n' | b'\r')) {
            line.pop();
        }
        if !line.is_empty() {
            return Ok(Line::Request);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_command_and_rejects_garbage() {
        assert_eq!(
            parse(b"get k"),
            Ok(Command::Op(Op::Get { key: "k".into() }))
        );
        assert_eq!(
            parse(b"put k v\r"),
            Ok(Command::Op(Op::Put {
                key: "k".into(),
                value: "v".into()
            }))
        );
        assert_eq!(
            parse(b"del k"),
            Ok(Command::Op(Op::Del { key: "k".into() }))
        );
        assert_eq!(
            parse(b"cas k - v"),
            Ok(Command::Op(Op::Cas {
                key: "k".into(),
                from: None,
                to: "v".into()
            }))
        );
        assert_eq!(
            parse(b"cas k a b"),
            Ok(Command::Op(Op::Cas {
                key: "k".into(),
                from: Some("a".into()),
                to: "b".into()
            }))
        );
        assert_eq!(parse(b"status"), Ok(Command::Status));
        for bad in [
            &b"get"[..],
            b"put k",
            b"frobnicate x",
            b"\xff\xfe",
            b"get a b",
            b"",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[tokio::test]
    async fn lines_are_split_trimmed_and_capped() {
        let mut r: &[u8] = b"get a\r\n\n\nput k v\nlast";
        let mut line = Vec::new();
        let mut got = Vec::new();
        while read_line(&mut r, 16, &mut line).await.unwrap() == Line::Request {
            got.push(String::from_utf8(line.clone()).unwrap());
        }
        assert_eq!(got, ["get a", "put k v", "last"]);
        let mut r: &[u8] = b"put k 0123456789abcdef\nget k\n";
        assert_eq!(
            read_line(&mut r, 16, &mut line).await.unwrap(),
            Line::TooLong
        );
        assert!(line.len() <= 17);
    }

    #[test]
    fn renders_replicant_compatible_replies() {
        let r = |reply| {
            render(&ClientResponse::Reply {
                client: 1,
                seq: 1,
                reply,
            })
        };
        assert_eq!(r(Reply::Value(Some("v".into()))), b"v");
        assert_eq!(r(Reply::Value(None)), b"");
        assert_eq!(r(Reply::Done), b"ok");
        assert_eq!(
            r(Reply::Cas {
                ok: false,
                current: None
            }),
            b"fail -"
        );
        assert_eq!(
            r(Reply::Cas {
                ok: false,
                current: Some("x".into())
            }),
            b"fail x"
        );
        assert_eq!(r(Reply::Busy), b"retry");
        assert_eq!(r(Reply::SessionExpired), b"error session expired");
        let redirect = ClientResponse::Redirect {
            client: 1,
            seq: 1,
            leader: Some(2),
            addr: Some("h:1".into()),
        };
        assert_eq!(render(&redirect), b"leader is h:1");
        assert_eq!(
            render(&ClientResponse::Redirect {
                client: 1,
                seq: 1,
                leader: None,
                addr: None
            }),
            b"retry"
        );
    }
}

//! Replicant's line protocol on the client port, one reply line per
//! request line: `get k` → the value or an empty line; `put k v`, `del k` →
//! `ok`; `cas k from to` (`-` = absent) → `ok` or `fail <current|->`;
//! `status` → one JSON line; not the leader → `leader is <addr>` (or
//! `retry` when no leader is known); busy → `retry`; anything else →
//! `error ...`. Keys and values are single space-free tokens.

use bytes::Bytes;
use stutter_core::{ClientId, Op, Reply, Request};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, oneshot};

use crate::node::Event;
use crate::wire::ClientResponse;

/// Longest accepted request line.
const MAX_LINE: usize = 1 << 20;

#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    Op(Op),
    Status,
}

/// Parses one request line (without its newline).
pub fn parse(line: &[u8]) -> Result<Command, String> {
    let text = std::str::from_utf8(line).map_err(|_| "not UTF-8".to_string())?;
    let parts: Vec<&str> = text.trim_end_matches('\r').split(' ').filter(|p| !p.is_empty()).collect();
    let b = |s: &str| Bytes::copy_from_slice(s.as_bytes());
    match parts.as_slice() {
        ["get", k] => Ok(Command::Op(Op::Get { key: b(k) })),
        ["put", k, v] => Ok(Command::Op(Op::Put { key: b(k), value: b(v) })),
        ["del", k] => Ok(Command::Op(Op::Del { key: b(k) })),
        ["cas", k, from, to] => {
            let from = if *from == "-" { None } else { Some(b(from)) };
            Ok(Command::Op(Op::Cas { key: b(k), from, to: b(to) }))
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
        },
        ClientResponse::Redirect { addr: Some(a), .. } => format!("leader is {a}").into_bytes().into(),
        ClientResponse::Redirect { addr: None, .. } => b"retry"[..].into(),
        ClientResponse::Status(s) => serde_json::to_vec(s).unwrap_or_else(|_| b"error status".to_vec()).into(),
        ClientResponse::Digest { last_executed, digest } => format!("{last_executed} {digest:016x}").into_bytes().into(),
        ClientResponse::Error(e) => format!("error {e}").into_bytes().into(),
        ClientResponse::Unknown { .. } => b"error timeout: the outcome is unknown"[..].into(),
    };
    out.extend_from_slice(&line);
}

/// Serves one text connection. Requests are handed to the protocol loop one
/// at a time: the next line is read only once the previous one is
/// answered, so replies come back in request order (the protocol has no
/// request ids) and the connection, a client of its own, never has two
/// requests outstanding (the core assumes that of every client; reads, which
/// bypass the log, would otherwise overtake the writes sent before them).
pub async fn serve(mut r: BufReader<OwnedReadHalf>, mut w: OwnedWriteHalf, tx: mpsc::UnboundedSender<Event>, client: ClientId) -> std::io::Result<()> {
    let (ctx, mut crx) = mpsc::unbounded_channel::<ClientResponse>();
    let mut seq = 0u64;
    let mut line = Vec::new();
    let mut out = Vec::new();
    loop {
        line.clear();
        let n = (&mut r).take(MAX_LINE as u64 + 1).read_until(b'\n', &mut line).await?;
        if n == 0 {
            return Ok(());
        }
        if line.last() != Some(&b'\n') && line.len() > MAX_LINE {
            write_reply(&mut w, &mut out, &ClientResponse::Error("line too long".into())).await?;
            return Ok(());
        }
        // A last line without a newline at end of stream is still a request.
        while matches!(line.last(), Some(b'\n' | b'\r')) {
            line.pop();
        }
        if line.is_empty() {
            continue;
        }
        let resp = match parse(&line) {
            Ok(Command::Op(op)) => {
                seq += 1;
                if tx.send(Event::Client { conn: ctx.clone(), req: Request { client, seq, op } }).is_err() {
                    return Ok(());
                }
                match crx.recv().await {
                    Some(resp) => resp,
                    None => return Ok(()),
                }
            }
            Ok(Command::Status) => {
                let (otx, orx) = oneshot::channel();
                let _ = tx.send(Event::Status(otx));
                match orx.await {
                    Ok(s) => ClientResponse::Status(s),
                    Err(_) => return Ok(()),
                }
            }
            Err(e) => ClientResponse::Error(e),
        };
        write_reply(&mut w, &mut out, &resp).await?;
    }
}

async fn write_reply(w: &mut OwnedWriteHalf, out: &mut Vec<u8>, resp: &ClientResponse) -> std::io::Result<()> {
    out.clear();
    render_into(resp, out);
    out.push(b'\n');
    w.write_all(out).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_command_and_rejects_garbage() {
        assert_eq!(parse(b"get k"), Ok(Command::Op(Op::Get { key: "k".into() })));
        assert_eq!(parse(b"put k v\r"), Ok(Command::Op(Op::Put { key: "k".into(), value: "v".into() })));
        assert_eq!(parse(b"del k"), Ok(Command::Op(Op::Del { key: "k".into() })));
        assert_eq!(
            parse(b"cas k - v"),
            Ok(Command::Op(Op::Cas { key: "k".into(), from: None, to: "v".into() }))
        );
        assert_eq!(
            parse(b"cas k a b"),
            Ok(Command::Op(Op::Cas { key: "k".into(), from: Some("a".into()), to: "b".into() }))
        );
        assert_eq!(parse(b"status"), Ok(Command::Status));
        for bad in [&b"get"[..], b"put k", b"frobnicate x", b"\xff\xfe", b"get a b", b""] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn renders_replicant_compatible_replies() {
        let r = |reply| render(&ClientResponse::Reply { client: 1, seq: 1, reply });
        assert_eq!(r(Reply::Value(Some("v".into()))), b"v");
        assert_eq!(r(Reply::Value(None)), b"");
        assert_eq!(r(Reply::Done), b"ok");
        assert_eq!(r(Reply::Cas { ok: false, current: None }), b"fail -");
        assert_eq!(r(Reply::Cas { ok: false, current: Some("x".into()) }), b"fail x");
        assert_eq!(r(Reply::Busy), b"retry");
        let redirect = ClientResponse::Redirect { client: 1, seq: 1, leader: Some(2), addr: Some("h:1".into()) };
        assert_eq!(render(&redirect), b"leader is h:1");
        assert_eq!(render(&ClientResponse::Redirect { client: 1, seq: 1, leader: None, addr: None }), b"retry");
    }
}

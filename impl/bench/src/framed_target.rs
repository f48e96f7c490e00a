//! stutter's own client protocol (length-prefixed bincode frames, see
//! `stutter_replica::wire`). Every request names a client and a sequence
//! number and every reply names them back, so one connection can carry
//! many logical clients at once, each with one request outstanding, and
//! replies may come back in any order. A retried `(client, seq)` is executed
//! at most once (the replicated session table answers it with the original
//! reply), so in-flight requests can be re-sent after a reconnect.
//!
//! A logical client registers (`Op::Register`, under its nonce at seq 0)
//! before its first request and after its session expired, and uses the
//! id the log assigns (`stutter_core::sessions`).

use stutter_core::{ClientId, Op as CoreOp, Reply, Seq};
use stutter_replica::wire::{self, ClientRequest, ClientResponse};

use crate::text_target::{Answer, CallError};
use crate::workload::Op;

/// Appends the frame of request `(client, seq)` for `op` (a resend after
/// an uncertain attempt is the same frame).
pub fn encode_request(
    client: ClientId,
    seq: Seq,
    op: &Op,
    buf: &mut Vec<u8>,
) -> Result<(), CallError> {
    let op = match op {
        Op::Read { key } => CoreOp::Get {
            key: key.clone().into(),
        },
        Op::Update { key, value } => CoreOp::Put {
            key: key.clone().into(),
            value: value.clone().into(),
        },
    };
    let frame = wire::encode(&ClientRequest::Op { client, seq, op })
        .map_err(|e| CallError::Io(format!("encode: {e}")))?;
    buf.extend_from_slice(&frame);
    Ok(())
}

/// Appends the frame of a registration under `nonce`.
pub fn encode_register(nonce: ClientId, buf: &mut Vec<u8>) -> Result<(), CallError> {
    let frame = wire::encode(&ClientRequest::Op {
        client: nonce,
        seq: 0,
        op: CoreOp::Register,
    })
    .map_err(|e| CallError::Io(format!("encode: {e}")))?;
    buf.extend_from_slice(&frame);
    Ok(())
}

/// What one reply frame means for the bench.
#[derive(Debug)]
pub enum Event {
    /// The reply to `(client, seq)`: an answer, or a reason to send it
    /// again (`NotLeader`: busy, nothing proposed; `Io`: outcome unknown).
    Reply {
        client: ClientId,
        seq: Seq,
        result: Result<Answer, CallError>,
    },
    /// The registration under `nonce` assigned `id`.
    Registered { nonce: ClientId, id: ClientId },
    /// The replica is not the leader; `addr` is the leader's client address
    /// if it knows one. Nothing was proposed for the request it answers.
    Redirect { addr: Option<String> },
    /// A reply that no request of this protocol can get.
    Unexpected(String),
}

/// Decodes one frame body.
pub fn parse_frame(body: &[u8]) -> Event {
    match wire::decode::<ClientResponse>(body) {
        Ok(ClientResponse::Reply {
            client,
            seq: 0,
            reply: Reply::Registered { client: id },
        }) => Event::Registered { nonce: client, id },
        Ok(ClientResponse::Reply { client, seq, reply }) => {
            let result = match reply {
                Reply::Value(v) => Ok(Answer::Value(v.map(|b| b.to_vec()))),
                Reply::Done => Ok(Answer::Written),
                // The leader's queue is full or it lost its leadership:
                // nothing was proposed, the same request may be sent again.
                Reply::Busy => Err(CallError::NotLeader),
                Reply::Redirect { .. } => return Event::Redirect { addr: None },
                // The session expired (bounded session table): the outcome
                // is unknown, and the client id must not be used again.
                Reply::SessionExpired => Err(CallError::SessionExpired),
                r @ (Reply::Stale
                | Reply::Cas { .. }
                | Reply::Registered { .. }
                | Reply::UnknownClient
                | Reply::Malformed
                | Reply::StorageFull) => Err(CallError::Unexpected(format!("reply {r:?}"))),
            };
            Event::Reply {
                client,
                seq,
                result,
            }
        }
        Ok(ClientResponse::Redirect { addr, .. }) => Event::Redirect { addr },
        // The replica gave up waiting for the outcome: send it again
        // (executed at most once).
        Ok(ClientResponse::Unknown { client, seq }) => Event::Reply {
            client,
            seq,
            result: Err(CallError::Io(
                "the replica gave up waiting for the outcome".into(),
            )),
        },
        Ok(ClientResponse::Error(e)) => Event::Unexpected(format!("error reply: {e}")),
        Ok(other) => Event::Unexpected(format!("unexpected response {other:?}")),
        Err(e) => Event::Unexpected(format!("undecodable reply frame: {e}")),
    }
}

/// Splits the first complete frame off `buf[from..]`: its body's range and
/// where the next frame starts, or `None` if more bytes are needed.
/// Oversized lengths are an error (the stream is out of step).
pub fn next_frame(
    buf: &[u8],
    from: usize,
) -> Result<Option<(std::ops::Range<usize>, usize)>, String> {
    let rest = buf.get(from..).unwrap_or(&[]);
    let Some(len) = rest.get(..4) else {
        return Ok(None);
    };
    let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
    if len > wire::MAX_REPLY_FRAME {
        return Err(format!("reply frame of {len} bytes"));
    }
    if rest.len() < 4 + len {
        return Ok(None);
    }
    Ok(Some((from + 4..from + 4 + len, from + 4 + len)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply_frame(resp: &ClientResponse) -> Vec<u8> {
        wire::encode(resp).unwrap()
    }

    #[test]
    fn requests_decode_as_the_replica_reads_them() {
        let mut buf = Vec::new();
        encode_request(
            7,
            3,
            &Op::Update {
                key: b"k".to_vec(),
                value: b"v".to_vec(),
            },
            &mut buf,
        )
        .unwrap();
        encode_request(8, 1, &Op::Read { key: b"k".to_vec() }, &mut buf).unwrap();
        let (body, next) = next_frame(&buf, 0).unwrap().unwrap();
        let req: ClientRequest = wire::decode(&buf[body]).unwrap();
        assert_eq!(
            req,
            ClientRequest::Op {
                client: 7,
                seq: 3,
                op: CoreOp::Put {
                    key: "k".into(),
                    value: "v".into()
                },
            }
        );
        let (body, end) = next_frame(&buf, next).unwrap().unwrap();
        assert_eq!(end, buf.len());
        let req: ClientRequest = wire::decode(&buf[body]).unwrap();
        assert_eq!(
            req,
            ClientRequest::Op {
                client: 8,
                seq: 1,
                op: CoreOp::Get { key: "k".into() },
            }
        );
    }

    #[test]
    fn partial_and_oversized_frames() {
        let f = reply_frame(&ClientResponse::Reply {
            client: 1,
            seq: 1,
            reply: Reply::Done,
        });
        assert!(next_frame(&f[..3], 0).unwrap().is_none());
        assert!(next_frame(&f[..f.len() - 1], 0).unwrap().is_none());
        assert!(next_frame(&f, 0).unwrap().is_some());
        assert!(next_frame(&[0xff, 0xff, 0xff, 0xff, 0], 0).is_err());
    }

    #[test]
    fn replies_map_to_answers_retries_and_errors() {
        let parse = |r: ClientResponse| parse_frame(&reply_frame(&r)[4..]);
        let value = parse(ClientResponse::Reply {
            client: 4,
            seq: 9,
            reply: Reply::Value(Some("v".into())),
        });
        assert!(
            matches!(value, Event::Reply { client: 4, seq: 9, result: Ok(Answer::Value(Some(v))) } if v == b"v")
        );
        let done = parse(ClientResponse::Reply {
            client: 4,
            seq: 9,
            reply: Reply::Done,
        });
        assert!(matches!(
            done,
            Event::Reply {
                result: Ok(Answer::Written),
                ..
            }
        ));
        let busy = parse(ClientResponse::Reply {
            client: 4,
            seq: 9,
            reply: Reply::Busy,
        });
        assert!(matches!(
            busy,
            Event::Reply {
                result: Err(CallError::NotLeader),
                ..
            }
        ));
        let stale = parse(ClientResponse::Reply {
            client: 4,
            seq: 9,
            reply: Reply::Stale,
        });
        assert!(matches!(
            stale,
            Event::Reply {
                result: Err(CallError::Unexpected(_)),
                ..
            }
        ));
        let redirect = parse(ClientResponse::Redirect {
            client: 4,
            seq: 9,
            leader: Some(1),
            addr: Some("x:1".into()),
        });
        assert!(matches!(redirect, Event::Redirect { addr: Some(a) } if a == "x:1"));
        let in_core = parse(ClientResponse::Reply {
            client: 4,
            seq: 9,
            reply: Reply::Redirect { leader: None },
        });
        assert!(matches!(in_core, Event::Redirect { addr: None }));
        let unknown = parse(ClientResponse::Unknown { client: 4, seq: 9 });
        assert!(matches!(
            unknown,
            Event::Reply {
                client: 4,
                seq: 9,
                result: Err(CallError::Io(_))
            }
        ));
        assert!(matches!(
            parse(ClientResponse::Error("malformed request".into())),
            Event::Unexpected(_)
        ));
        assert!(matches!(parse_frame(&[9, 9, 9]), Event::Unexpected(_)));
        let id = stutter_core::REGISTERED_BASE + 3;
        let registered = parse(ClientResponse::Reply {
            client: 4,
            seq: 0,
            reply: Reply::Registered { client: id },
        });
        assert!(matches!(registered, Event::Registered { nonce: 4, id: i } if i == id));
        let mut buf = Vec::new();
        encode_register(4, &mut buf).unwrap();
        let (body, _) = next_frame(&buf, 0).unwrap().unwrap();
        let req: ClientRequest = wire::decode(&buf[body]).unwrap();
        assert_eq!(
            req,
            ClientRequest::Op {
                client: 4,
                seq: 0,
                op: CoreOp::Register,
            }
        );
    }
}

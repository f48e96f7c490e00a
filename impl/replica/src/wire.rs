//! Wire formats: length-delimited binary frames (u32 big-endian length, then
//! bincode) for stutter's own client protocol, and the same frames (with a
//! MAC after each, see `peer_auth`) between peers.
//!
//! A frame's length is checked against the reader's cap before anything is
//! allocated, and its body is then allocated as its bytes arrive (in steps
//! of [`READ_CHUNK`]), so a length prefix alone costs the reader nothing:
//! only bytes really sent take memory.

use serde::{de::DeserializeOwned, Deserialize, Serialize};
use stutter_core::{Ballot, ClientId, Op, ReplicaId, Reply, Role, Seq, Slot};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Default cap on a client request frame (config: `[limits]`).
pub const MAX_CLIENT_FRAME: usize = 4 << 20;
/// Cap on a reply frame as the client library reads it: a reply holds at
/// most one value of a request the replica accepted, or a status.
pub const MAX_REPLY_FRAME: usize = 2 * MAX_CLIENT_FRAME;
/// A frame body is allocated at most this far ahead of its bytes.
pub const READ_CHUNK: usize = 64 << 10;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientRequest {
    /// A request of `client` (an id the log assigned, or a `Register`'s
    /// nonce at seq 0); a resend reuses the same `(client, seq)`.
    Op {
        client: ClientId,
        seq: Seq,
        op: Op,
    },
    Status,
    /// The executed state's running digest, for white-box checks.
    Digest,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatusInfo {
    pub id: ReplicaId,
    pub role: Role,
    pub ballot: Ballot,
    pub leader: Option<ReplicaId>,
    pub last_executed: Slot,
    pub global_last_executed: Slot,
    pub last_index: Slot,
    pub digest: u64,
    /// The collector model's statistics, when the config has a `[gc]`
    /// model. Last, so that the fields before keep their places.
    pub gc: Option<GcStatus>,
    /// Sessions in the replicated session table (at most the configured
    /// `session_limit`).
    pub sessions: u64,
    /// Updates (put, del, cas) this replica executed since it started (not
    /// counting duplicates, stale or expired ones, nor those in installed
    /// snapshots).
    pub applied_updates: u64,
    /// The storage alarm: the log's error while it cannot write (writes
    /// are refused meanwhile), none when it writes.
    pub storage_alarm: Option<String>,
}

/// What the node's collector model (`[gc]`) has done since the start.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GcStatus {
    /// `go` or `g1`.
    pub model: String,
    pub cores: f64,
    /// Cycles started (Go) or collections (G1).
    pub cycles: u64,
    /// Stop-the-world pauses: how many, their modelled total and longest.
    pub pauses: u64,
    pub pause_ms: f64,
    pub max_pause_ms: f64,
    /// The model's collector CPU (workers, idle-time marking, assists and
    /// pauses × cores) over the run's time × cores.
    pub cpu_share: f64,
    pub assist_ms: f64,
    pub background_ms: f64,
    pub idle_ms: f64,
    /// CPU really spent by the node for the model: the "gc" thread's
    /// spinning and the loop's assists.
    pub burnt_ms: f64,
    /// Wall time the loop really stood still in pauses.
    pub stopped_ms: f64,
    /// The modelled heap and its live part now, and all allocated, MiB.
    pub heap_mib: f64,
    pub live_mib: f64,
    pub allocated_mib: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ClientResponse {
    Reply {
        client: ClientId,
        seq: Seq,
        reply: Reply,
    },
    /// Not the leader: the leader's id and client address, if known.
    Redirect {
        client: ClientId,
        seq: Seq,
        leader: Option<ReplicaId>,
        addr: Option<String>,
    },
    Status(StatusInfo),
    Digest {
        last_executed: Slot,
        digest: u64,
    },
    Error(String),
    /// The replica gave up waiting for the outcome of `(client, seq)` (its
    /// leader lost leadership before the request committed, or it never
    /// will): it may or may not take effect. Retrying the same `(client,
    /// seq)` is safe. Last, so that the other variants keep their tags.
    Unknown {
        client: ClientId,
        seq: Seq,
    },
}

pub fn encode<T: Serialize>(v: &T) -> std::io::Result<Vec<u8>> {
    let body = bincode::serialize(v)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    let len = u32::try_from(body.len())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "frame too large"))?;
    let mut out = Vec::with_capacity(body.len() + 4);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

pub fn decode<T: DeserializeOwned>(body: &[u8]) -> std::io::Result<T> {
    bincode::deserialize(body).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// The error of a frame longer than the reader's cap.
pub fn oversize(len: usize, max: usize) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("frame of {len} bytes exceeds the limit of {max}"),
    )
}

/// Reads a frame's length prefix; `Ok(None)` on a clean end of stream
/// (before the first byte of the prefix).
pub async fn read_len<R: AsyncRead + Unpin>(r: &mut R) -> std::io::Result<Option<usize>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len).await {
        Ok(_) => Ok(Some(u32::from_be_bytes(len) as usize)),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
        Err(e) => Err(e),
    }
}

/// Reads `len` bytes into `body` (cleared first), allocating as they
/// arrive: at most [`READ_CHUNK`] ahead of what was received (and the
/// vector's doubling), never `len` up front.
pub async fn read_body<R: AsyncRead + Unpin>(
    r: &mut R,
    len: usize,
    body: &mut Vec<u8>,
) -> std::io::Result<()> {
    body.clear();
    while body.len() < len {
        let start = body.len();
        let step = (len - start).min(READ_CHUNK);
        body.resize(start + step, 0);
        r.read_exact(&mut body[start..]).await?;
    }
    Ok(())
}

/// Reads one frame body; `Ok(None)` on a clean end of stream. A length
/// above `max` is an error before anything is allocated.
pub async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut R,
    max: usize,
) -> std::io::Result<Option<Vec<u8>>> {
    let Some(len) = read_len(r).await? else {
        return Ok(None);
    };
    if len > max {
        return Err(oversize(len, max));
    }
    let mut body = Vec::new();
    read_body(r, len, &mut body).await?;
    Ok(Some(body))
}

pub async fn write_frame<W: AsyncWrite + Unpin, T: Serialize>(
    w: &mut W,
    v: &T,
) -> std::io::Result<()> {
    w.write_all(&encode(v)?).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_round_trip_and_oversize_or_garbage_is_an_error() {
        let req = ClientRequest::Op {
            client: 7,
            seq: 3,
            op: Op::Put {
                key: "k".into(),
                value: "v".into(),
            },
        };
        let bytes = encode(&req).unwrap();
        let mut r = &bytes[..];
        let body = read_frame(&mut r, MAX_CLIENT_FRAME).await.unwrap().unwrap();
        assert_eq!(decode::<ClientRequest>(&body).unwrap(), req);
        assert!(
            read_frame(&mut r, MAX_CLIENT_FRAME)
                .await
                .unwrap()
                .is_none(),
            "clean EOF"
        );

        let huge = (u32::MAX).to_be_bytes();
        assert!(read_frame(&mut &huge[..], MAX_CLIENT_FRAME).await.is_err());
        assert!(decode::<ClientRequest>(&[0xff, 0xff, 0xff, 0xff, 9, 9]).is_err());
        let truncated = &bytes[..bytes.len() - 1];
        assert!(read_frame(&mut &truncated[..], MAX_CLIENT_FRAME)
            .await
            .is_err());
    }

    #[tokio::test]
    async fn a_body_longer_than_one_chunk_arrives_whole() {
        let big: Vec<u8> = (0..3 * READ_CHUNK + 17).map(|i| i as u8).collect();
        let bytes = encode(&big).unwrap();
        let body = read_frame(&mut &bytes[..], 1 << 20).await.unwrap().unwrap();
        assert_eq!(decode::<Vec<u8>>(&body).unwrap(), big);
    }
}

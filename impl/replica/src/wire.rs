//! Wire formats: length-delimited binary frames (u32 big-endian length, then
//! bincode) between peers and for stutter's own client protocol.

use serde::{de::DeserializeOwned, Deserialize, Serialize};
use stutter_core::{Ballot, ClientId, Message, Op, ReplicaId, Reply, Role, Seq, Slot};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Peer frames may carry snapshots: allow large ones.
pub const MAX_PEER_FRAME: usize = 512 << 20;
/// Client requests are small.
pub const MAX_CLIENT_FRAME: usize = 4 << 20;

/// What one peer sends another: every frame names its sender.
#[derive(Debug, Serialize, Deserialize)]
pub struct PeerFrame {
    pub from: ReplicaId,
    pub msg: Message,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientRequest {
    Op { client: ClientId, seq: Seq, op: Op },
    Status,
    /// The executed state's running digest, for white-box checks.
    Digest,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusInfo {
    pub id: ReplicaId,
    pub role: Role,
    pub ballot: Ballot,
    pub leader: Option<ReplicaId>,
    pub last_executed: Slot,
    pub global_last_executed: Slot,
    pub last_index: Slot,
    pub digest: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientResponse {
    Reply { client: ClientId, seq: Seq, reply: Reply },
    /// Not the leader: the leader's id and client address, if known.
    Redirect { client: ClientId, seq: Seq, leader: Option<ReplicaId>, addr: Option<String> },
    Status(StatusInfo),
    Digest { last_executed: Slot, digest: u64 },
    Error(String),
    /// The replica gave up waiting for the outcome of `(client, seq)` (its
    /// leader lost leadership before the request committed, or it never
    /// will): it may or may not take effect. Retrying the same `(client,
    /// seq)` is safe. Last, so that the other variants keep their tags.
    Unknown { client: ClientId, seq: Seq },
}

pub fn encode<T: Serialize>(v: &T) -> std::io::Result<Vec<u8>> {
    let body = bincode::serialize(v).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    let len = u32::try_from(body.len()).map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "frame too large"))?;
    let mut out = Vec::with_capacity(body.len() + 4);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

pub fn decode<T: DeserializeOwned>(body: &[u8]) -> std::io::Result<T> {
    bincode::deserialize(body).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Reads one frame body; `Ok(None)` on a clean end of stream.
pub async fn read_frame<R: AsyncRead + Unpin>(r: &mut R, max: usize) -> std::io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > max {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("frame of {len} bytes exceeds {max}")));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).await?;
    Ok(Some(body))
}

pub async fn write_frame<W: AsyncWrite + Unpin, T: Serialize>(w: &mut W, v: &T) -> std::io::Result<()> {
    w.write_all(&encode(v)?).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_round_trip_and_oversize_or_garbage_is_an_error() {
        let req = ClientRequest::Op { client: 7, seq: 3, op: Op::Put { key: "k".into(), value: "v".into() } };
        let bytes = encode(&req).unwrap();
        let mut r = &bytes[..];
        let body = read_frame(&mut r, MAX_CLIENT_FRAME).await.unwrap().unwrap();
        assert_eq!(decode::<ClientRequest>(&body).unwrap(), req);
        assert!(read_frame(&mut r, MAX_CLIENT_FRAME).await.unwrap().is_none(), "clean EOF");

        let huge = (u32::MAX).to_be_bytes();
        assert!(read_frame(&mut &huge[..], MAX_CLIENT_FRAME).await.is_err());
        assert!(decode::<ClientRequest>(&[0xff, 0xff, 0xff, 0xff, 9, 9]).is_err());
        let truncated = &bytes[..bytes.len() - 1];
        assert!(read_frame(&mut &truncated[..], MAX_CLIENT_FRAME).await.is_err());
    }

    #[tokio::test]
    async fn peer_frames_round_trip() {
        let f = PeerFrame { from: 2, msg: Message::Prepare { ballot: Ballot(258), last_executed: Slot(4) } };
        let bytes = encode(&f).unwrap();
        let body = read_frame(&mut &bytes[..], MAX_PEER_FRAME).await.unwrap().unwrap();
        let back: PeerFrame = decode(&body).unwrap();
        assert_eq!(back.from, 2);
        assert_eq!(back.msg, f.msg);
    }
}

//! Peer authentication: a mutual challenge–response handshake keyed by the
//! cluster secret, then a MAC on every frame of the connection.
//!
//! Peer links are one-way: the dialer (replica `a`) sends, the acceptor
//! (replica `b`) receives. Before any frame:
//!
//! ```text
//! a → b  Hello      magic, a, b, nonce_a                       (50 bytes)
//! b → a  Challenge  magic, nonce_b, T("acceptor")              (80 bytes)
//! a → b  Response   T("dialer")                                (32 bytes)
//! b → a  Welcome    one byte
//! where T(label) = HMAC-SHA256(secret, "stutter-peer-v1 " label ‖ a ‖ b ‖ nonce_a ‖ nonce_b)
//! ```
//!
//! Each side proves it holds the secret over a nonce the other just drew,
//! so a recorded handshake cannot be replayed, and the two labels differ,
//! so one side's answer is never a valid answer for the other (no
//! reflection). The dialer checks the acceptor first and only then answers,
//! so a process without the secret that accepts a connection learns no MAC
//! of a challenge it chose. The acceptor then knows the connection comes
//! from replica `a`: it takes the sender of every frame from the
//! connection, never from the frame.
//!
//! Every frame after the handshake is `[len u32 BE][bincode body][tag]`,
//! where the tag is HMAC-SHA256 under a session key `T("session")` over the
//! frame's number on the connection, its length and its body, truncated to
//! [`TAG_LEN`] bytes. Frames cannot be altered, injected, replayed,
//! reordered or moved to another connection without the receiver closing
//! the connection. They are not encrypted.
//!
//! Without a configured secret the same exchange runs under a fixed,
//! public key: the wire format stays the same, identities are claimed but
//! not proven (anyone who can reach the peer port can act as a replica),
//! and the frame tags only catch corruption.

use hmac::{Hmac, Mac};
use serde::Serialize;
use sha2::Sha256;
use stutter_core::{Message, ReplicaId};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::peer_frame::{PeerFrame, PeerFrameRef};
use crate::wire;

type HmacSha256 = Hmac<Sha256>;

/// Protocol name and version; a connection that does not start with it is
/// not a stutter peer (or not this version).
pub const MAGIC: [u8; 16] = *b"stutter-peer-v1\0";
pub const NONCE_LEN: usize = 32;
const FULL_TAG: usize = 32;
/// Bytes of the per-frame tag (a truncated HMAC-SHA256: 128 bits).
pub const TAG_LEN: usize = 16;
pub const HELLO_LEN: usize = MAGIC.len() + 2 + NONCE_LEN;
pub const CHALLENGE_LEN: usize = MAGIC.len() + NONCE_LEN + FULL_TAG;
pub const RESPONSE_LEN: usize = FULL_TAG;
const WELCOME: u8 = 1;
/// The key when the config has no secret: public, so it proves nothing.
const PUBLIC_KEY: &[u8] = b"stutter: no cluster secret configured";

/// The cluster key: an HMAC-SHA256 instance keyed with the secret (its
/// key schedule done once, cloned per use).
#[derive(Clone)]
pub struct ClusterKey {
    mac: HmacSha256,
    secret: bool,
}

impl ClusterKey {
    /// `None`: no secret configured, peers are unauthenticated.
    pub fn new(secret: Option<&[u8]>) -> ClusterKey {
        let key = secret.unwrap_or(PUBLIC_KEY);
        // HMAC accepts keys of any length; this cannot fail.
        let mac = <HmacSha256 as Mac>::new_from_slice(key)
            .unwrap_or_else(|_| unreachable!("HMAC takes any key length"));
        ClusterKey {
            mac,
            secret: secret.is_some(),
        }
    }

    /// Whether a secret was configured (identities are proven).
    pub fn authenticates(&self) -> bool {
        self.secret
    }

    fn tag(&self, label: &[u8], t: &Transcript) -> [u8; FULL_TAG] {
        let mut m = self.mac.clone();
        m.update(b"stutter-peer-v1 ");
        m.update(label);
        m.update(&[t.from, t.to]);
        m.update(&t.nonce_a);
        m.update(&t.nonce_b);
        m.finalize().into_bytes().into()
    }

    fn check(&self, label: &[u8], t: &Transcript, tag: &[u8]) -> Result<(), HandshakeError> {
        let mut m = self.mac.clone();
        m.update(b"stutter-peer-v1 ");
        m.update(label);
        m.update(&[t.from, t.to]);
        m.update(&t.nonce_a);
        m.update(&t.nonce_b);
        // Constant-time comparison.
        m.verify_slice(tag).map_err(|_| HandshakeError::BadTag)
    }

    /// The frame sealer and opener both ends of a handshake between `from`
    /// and `to` with these nonces compute (tests and fuzzing build
    /// sessions with it; a real link gets its own from the handshake).
    pub fn session_of(
        &self,
        from: ReplicaId,
        to: ReplicaId,
        nonce_a: [u8; NONCE_LEN],
        nonce_b: [u8; NONCE_LEN],
    ) -> (FrameSealer, FrameOpener) {
        self.session(&Transcript {
            from,
            to,
            nonce_a,
            nonce_b,
        })
    }

    fn session(&self, t: &Transcript) -> (FrameSealer, FrameOpener) {
        let key = self.tag(b"session", t);
        let mac = <HmacSha256 as Mac>::new_from_slice(&key)
            .unwrap_or_else(|_| unreachable!("HMAC takes any key length"));
        (
            FrameSealer {
                mac: mac.clone(),
                next: 0,
            },
            FrameOpener { mac, next: 0 },
        )
    }
}

/// What both sides' tags cover.
struct Transcript {
    from: ReplicaId,
    to: ReplicaId,
    nonce_a: [u8; NONCE_LEN],
    nonce_b: [u8; NONCE_LEN],
}

#[derive(Debug)]
pub enum HandshakeError {
    /// Not a stutter peer of this version.
    BadMagic,
    /// The dialer meant another replica (a wrong address in its config).
    WrongAddressee {
        to: ReplicaId,
        me: ReplicaId,
    },
    /// The claimed sender is not a member (or is this replica).
    UnknownPeer(ReplicaId),
    /// A MAC did not verify: the other side has another secret (or none).
    BadTag,
    /// The acceptor refused or closed before welcoming.
    Refused,
    Rng(String),
    Io(std::io::Error),
}

impl std::fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HandshakeError::BadMagic => write!(f, "not a stutter peer (bad magic or version)"),
            HandshakeError::WrongAddressee { to, me } => {
                write!(f, "the dialer meant replica {to}, this is {me}")
            }
            HandshakeError::UnknownPeer(id) => {
                write!(f, "claims to be replica {id}, which is not a peer")
            }
            HandshakeError::BadTag => write!(
                f,
                "MAC mismatch: the other side has a different cluster secret (or none)"
            ),
            HandshakeError::Refused => write!(f, "the acceptor refused the handshake"),
            HandshakeError::Rng(e) => write!(f, "no randomness for a nonce: {e}"),
            HandshakeError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for HandshakeError {}

impl From<std::io::Error> for HandshakeError {
    fn from(e: std::io::Error) -> Self {
        HandshakeError::Io(e)
    }
}

fn nonce() -> Result<[u8; NONCE_LEN], HandshakeError> {
    let mut n = [0u8; NONCE_LEN];
    getrandom::getrandom(&mut n).map_err(|e| HandshakeError::Rng(e.to_string()))?;
    Ok(n)
}

/// The dialer's first message, parsed. Fixed size: reading it allocates
/// nothing that the other side chooses.
#[derive(Debug, PartialEq, Eq)]
pub struct Hello {
    pub from: ReplicaId,
    pub to: ReplicaId,
    pub nonce: [u8; NONCE_LEN],
}

impl Hello {
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[..16].copy_from_slice(&MAGIC);
        b[16] = self.from;
        b[17] = self.to;
        b[18..].copy_from_slice(&self.nonce);
        b
    }

    pub fn decode(b: &[u8; HELLO_LEN]) -> Result<Hello, HandshakeError> {
        let (magic, rest) = b.split_at(MAGIC.len());
        if magic != MAGIC {
            return Err(HandshakeError::BadMagic);
        }
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&rest[2..]);
        Ok(Hello {
            from: rest[0],
            to: rest[1],
            nonce,
        })
    }
}

/// The acceptor's challenge, parsed.
#[derive(Debug, PartialEq, Eq)]
pub struct Challenge {
    pub nonce: [u8; NONCE_LEN],
    pub tag: [u8; FULL_TAG],
}

impl Challenge {
    pub fn encode(&self) -> [u8; CHALLENGE_LEN] {
        let mut b = [0u8; CHALLENGE_LEN];
        b[..16].copy_from_slice(&MAGIC);
        b[16..16 + NONCE_LEN].copy_from_slice(&self.nonce);
        b[16 + NONCE_LEN..].copy_from_slice(&self.tag);
        b
    }

    pub fn decode(b: &[u8; CHALLENGE_LEN]) -> Result<Challenge, HandshakeError> {
        let (magic, rest) = b.split_at(MAGIC.len());
        if magic != MAGIC {
            return Err(HandshakeError::BadMagic);
        }
        let (n, t) = rest.split_at(NONCE_LEN);
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(n);
        let mut tag = [0u8; FULL_TAG];
        tag.copy_from_slice(t);
        Ok(Challenge { nonce, tag })
    }
}

/// Runs the dialer's side on a fresh connection to replica `to`; the
/// sealer then signs every frame this side sends.
pub async fn dial<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    key: &ClusterKey,
    me: ReplicaId,
    to: ReplicaId,
) -> Result<FrameSealer, HandshakeError> {
    let hello = Hello {
        from: me,
        to,
        nonce: nonce()?,
    };
    s.write_all(&hello.encode()).await?;
    s.flush().await?;
    let mut c = [0u8; CHALLENGE_LEN];
    s.read_exact(&mut c).await?;
    let challenge = Challenge::decode(&c)?;
    let t = Transcript {
        from: me,
        to,
        nonce_a: hello.nonce,
        nonce_b: challenge.nonce,
    };
    key.check(b"acceptor", &t, &challenge.tag)?;
    s.write_all(&key.tag(b"dialer", &t)).await?;
    s.flush().await?;
    let mut welcome = [0u8; 1];
    match s.read_exact(&mut welcome).await {
        Ok(_) if welcome[0] == WELCOME => Ok(key.session(&t).0),
        Ok(_) => Err(HandshakeError::Refused),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(HandshakeError::Refused),
        Err(e) => Err(e.into()),
    }
}

/// Runs the acceptor's side: on success, the proven id of the dialer (a
/// member other than `me` of a cluster of `n`) and the opener that checks
/// its frames.
pub async fn accept<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    key: &ClusterKey,
    me: ReplicaId,
    n: usize,
) -> Result<(ReplicaId, FrameOpener), HandshakeError> {
    let mut h = [0u8; HELLO_LEN];
    s.read_exact(&mut h).await?;
    let hello = Hello::decode(&h)?;
    if hello.to != me {
        return Err(HandshakeError::WrongAddressee { to: hello.to, me });
    }
    if hello.from == me || usize::from(hello.from) >= n {
        return Err(HandshakeError::UnknownPeer(hello.from));
    }
    let t = Transcript {
        from: hello.from,
        to: me,
        nonce_a: hello.nonce,
        nonce_b: nonce()?,
    };
    let challenge = Challenge {
        nonce: t.nonce_b,
        tag: key.tag(b"acceptor", &t),
    };
    s.write_all(&challenge.encode()).await?;
    s.flush().await?;
    let mut resp = [0u8; RESPONSE_LEN];
    s.read_exact(&mut resp).await?;
    key.check(b"dialer", &t, &resp)?;
    s.write_all(&[WELCOME]).await?;
    s.flush().await?;
    Ok((hello.from, key.session(&t).1))
}

/// Signs the frames one side of a connection sends, numbering them.
#[derive(Clone)]
pub struct FrameSealer {
    mac: HmacSha256,
    next: u64,
}

/// Checks the frames of a connection in order.
#[derive(Clone)]
pub struct FrameOpener {
    mac: HmacSha256,
    next: u64,
}

fn frame_mac(base: &HmacSha256, number: u64, body: &[u8]) -> HmacSha256 {
    let mut m = base.clone();
    m.update(&number.to_be_bytes());
    m.update(&(body.len() as u64).to_be_bytes());
    m.update(body);
    m
}

impl FrameSealer {
    /// Appends the sealed frame of `msg` to `out`. A frame longer than
    /// `max` is an error and leaves `out` as it was (the receiver would
    /// refuse it and close the link).
    pub fn seal<T: Serialize>(
        &mut self,
        msg: &T,
        max: usize,
        out: &mut Vec<u8>,
    ) -> std::io::Result<()> {
        let start = out.len();
        out.extend_from_slice(&[0u8; 4]);
        if let Err(e) = bincode::serialize_into(&mut *out, msg) {
            out.truncate(start);
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e));
        }
        self.finish(start, max, out)
    }

    /// Appends the sealed frame of a protocol message (a snapshot's parts
    /// are sealed with [`FrameSealer::seal`] of each part, `peer_frame.rs`).
    pub fn seal_message(
        &mut self,
        msg: &Message,
        max: usize,
        out: &mut Vec<u8>,
    ) -> std::io::Result<()> {
        self.seal(&PeerFrameRef::Message(msg), max, out)
    }

    /// Appends a sealed frame of an already encoded body (for tests and
    /// fuzzing: the receiver decodes whatever the body is).
    pub fn seal_body(&mut self, body: &[u8], max: usize, out: &mut Vec<u8>) -> std::io::Result<()> {
        let start = out.len();
        out.extend_from_slice(&[0u8; 4]);
        out.extend_from_slice(body);
        self.finish(start, max, out)
    }

    /// Fills in the length of the frame at `start` and appends its tag.
    fn finish(&mut self, start: usize, max: usize, out: &mut Vec<u8>) -> std::io::Result<()> {
        let len = out.len() - start - 4;
        let Ok(len32) = u32::try_from(len) else {
            out.truncate(start);
            return Err(wire::oversize(len, max));
        };
        if len > max {
            out.truncate(start);
            return Err(wire::oversize(len, max));
        }
        out[start..start + 4].copy_from_slice(&len32.to_be_bytes());
        let tag = frame_mac(&self.mac, self.next, &out[start + 4..])
            .finalize()
            .into_bytes();
        out.extend_from_slice(&tag[..TAG_LEN]);
        self.next += 1;
        Ok(())
    }
}

impl FrameOpener {
    /// Checks the tag of the next frame (constant time).
    pub fn open(&mut self, body: &[u8], tag: &[u8]) -> bool {
        let ok = frame_mac(&self.mac, self.next, body)
            .verify_truncated_left(tag)
            .is_ok();
        self.next += 1;
        ok
    }
}

/// Reads the next sealed frame and decodes its message; `Ok(None)` on a
/// clean end of stream. A length above `max` is refused before anything is
/// allocated; a bad tag or an undecodable body is an error (the caller
/// closes the connection). `buf` is reused between frames.
pub async fn read_sealed<R: AsyncRead + Unpin>(
    r: &mut R,
    opener: &mut FrameOpener,
    max: usize,
    buf: &mut Vec<u8>,
) -> std::io::Result<Option<PeerFrame>> {
    let Some(len) = wire::read_len(r).await? else {
        return Ok(None);
    };
    if len > max {
        return Err(wire::oversize(len, max));
    }
    wire::read_body(r, len, buf).await?;
    let mut tag = [0u8; TAG_LEN];
    r.read_exact(&mut tag).await?;
    if !opener.open(buf, &tag) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "frame MAC mismatch (altered, replayed or reordered)",
        ));
    }
    wire::decode::<PeerFrame>(buf).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::duplex;

    const N: usize = 3;

    async fn handshake(
        dial_key: &ClusterKey,
        accept_key: &ClusterKey,
        from: ReplicaId,
        to: ReplicaId,
    ) -> (
        Result<FrameSealer, HandshakeError>,
        Result<(ReplicaId, FrameOpener), HandshakeError>,
    ) {
        let (mut a, mut b) = duplex(1024);
        // Each side drops its end when it is done, so a failure on one
        // side ends the other's wait.
        tokio::join!(
            async move {
                let r = dial(&mut a, dial_key, from, to).await;
                drop(a);
                r
            },
            async move {
                let r = accept(&mut b, accept_key, to, N).await;
                drop(b);
                r
            }
        )
    }

    #[tokio::test]
    async fn same_secret_authenticates_both_ways_and_frames_flow() {
        let key = ClusterKey::new(Some(b"correct horse battery staple"));
        let (d, a) = handshake(&key, &key, 1, 0).await;
        let mut sealer = d.unwrap();
        let (from, mut opener) = a.unwrap();
        assert_eq!(from, 1);
        let mut out = Vec::new();
        let msgs = [
            Message::Prepare {
                ballot: stutter_core::Ballot(257),
                last_executed: stutter_core::Slot(3),
            },
            Message::ReadProbe {
                ballot: stutter_core::Ballot(257),
                id: 9,
            },
        ];
        for m in &msgs {
            sealer.seal_message(m, 1 << 20, &mut out).unwrap();
        }
        let mut r = &out[..];
        let mut buf = Vec::new();
        for m in &msgs {
            assert_eq!(
                read_sealed(&mut r, &mut opener, 1 << 20, &mut buf)
                    .await
                    .unwrap(),
                Some(PeerFrame::Message(m.clone()))
            );
        }
        assert!(read_sealed(&mut r, &mut opener, 1 << 20, &mut buf)
            .await
            .unwrap()
            .is_none());
    }

    #[tokio::test]
    async fn a_dialer_without_the_secret_is_refused_and_learns_nothing() {
        let good = ClusterKey::new(Some(b"correct horse battery staple"));
        for bad in [
            ClusterKey::new(Some(b"another secret entirely")),
            ClusterKey::new(None),
        ] {
            let (d, a) = handshake(&bad, &good, 1, 0).await;
            // The dialer stops at the acceptor's tag: it never answers.
            assert!(matches!(d, Err(HandshakeError::BadTag)), "{:?}", d.err());
            assert!(a.is_err());
        }
        // An acceptor without the secret is found out by the dialer.
        let (d, a) = handshake(&good, &ClusterKey::new(None), 1, 0).await;
        assert!(matches!(d, Err(HandshakeError::BadTag)));
        assert!(a.is_err());
    }

    #[tokio::test]
    async fn claims_of_a_wrong_identity_or_addressee_are_refused() {
        let key = ClusterKey::new(Some(b"correct horse battery staple"));
        let (_, a) = handshake(&key, &key, 0, 0).await;
        assert!(matches!(a, Err(HandshakeError::UnknownPeer(0))), "itself");
        let (_, a) = handshake(&key, &key, 7, 0).await;
        assert!(
            matches!(a, Err(HandshakeError::UnknownPeer(7))),
            "not a member"
        );
        let (_, a) = handshake(&key, &key, 1, 2).await;
        assert!(a.is_ok());
        // Dialing replica 0 at replica 2's address.
        let (mut x, mut y) = duplex(1024);
        let acc = tokio::spawn(async move { accept(&mut y, &key, 2, N).await.map(|(f, _)| f) });
        let _ = dial(
            &mut x,
            &ClusterKey::new(Some(b"correct horse battery staple")),
            1,
            0,
        )
        .await;
        assert!(matches!(
            acc.await.unwrap(),
            Err(HandshakeError::WrongAddressee { to: 0, me: 2 })
        ));
    }

    /// A recorded handshake of replica 1 replayed to the acceptor fails:
    /// the acceptor draws a new nonce, so the recorded response is wrong.
    #[tokio::test]
    async fn a_replayed_handshake_is_refused() {
        let key = ClusterKey::new(Some(b"correct horse battery staple"));
        let nonce_a = [7u8; NONCE_LEN];
        let hello = Hello {
            from: 1,
            to: 0,
            nonce: nonce_a,
        };
        // The first, genuine run, recorded.
        let (mut x, mut y) = duplex(1024);
        let k = key.clone();
        let acc = tokio::spawn(async move { accept(&mut y, &k, 0, N).await.map(|(f, _)| f) });
        x.write_all(&hello.encode()).await.unwrap();
        let mut c = [0u8; CHALLENGE_LEN];
        x.read_exact(&mut c).await.unwrap();
        let ch = Challenge::decode(&c).unwrap();
        let t = Transcript {
            from: 1,
            to: 0,
            nonce_a,
            nonce_b: ch.nonce,
        };
        let recorded = key.tag(b"dialer", &t);
        x.write_all(&recorded).await.unwrap();
        assert_eq!(acc.await.unwrap().unwrap(), 1);
        // The replay.
        let (mut x, mut y) = duplex(1024);
        let k = key.clone();
        let acc = tokio::spawn(async move { accept(&mut y, &k, 0, N).await.map(|(f, _)| f) });
        x.write_all(&hello.encode()).await.unwrap();
        x.read_exact(&mut c).await.unwrap();
        x.write_all(&recorded).await.unwrap();
        assert!(matches!(acc.await.unwrap(), Err(HandshakeError::BadTag)));
    }

    /// Reads sealed frames of session `t` until the end: the messages, or
    /// how many were read before the error.
    async fn read_all(
        key: &ClusterKey,
        t: &Transcript,
        bytes: Vec<u8>,
    ) -> Result<Vec<Message>, usize> {
        let (_, mut o) = key.session(t);
        let mut r = &bytes[..];
        let mut buf = Vec::new();
        let mut got = Vec::new();
        loop {
            match read_sealed(&mut r, &mut o, 1 << 20, &mut buf).await {
                Ok(Some(PeerFrame::Message(m))) => got.push(m),
                Ok(Some(PeerFrame::SnapshotPart(_))) => return Err(got.len()),
                Ok(None) => return Ok(got),
                Err(_) => return Err(got.len()),
            }
        }
    }

    #[tokio::test]
    async fn altered_replayed_or_reordered_frames_are_refused() {
        let key = ClusterKey::new(Some(b"correct horse battery staple"));
        let t = Transcript {
            from: 1,
            to: 0,
            nonce_a: [1; NONCE_LEN],
            nonce_b: [2; NONCE_LEN],
        };
        let frames = |n: usize| {
            let (mut s, _) = key.session(&t);
            (0..n)
                .map(|i| {
                    let mut f = Vec::new();
                    s.seal_message(
                        &Message::ReadProbe {
                            ballot: stutter_core::Ballot(1),
                            id: i as u64,
                        },
                        1 << 20,
                        &mut f,
                    )
                    .unwrap();
                    f
                })
                .collect::<Vec<_>>()
        };
        let f = frames(2);
        assert_eq!(read_all(&key, &t, f.concat()).await.map(|m| m.len()), Ok(2));
        let mut altered = f.concat();
        altered[10] ^= 1;
        assert_eq!(read_all(&key, &t, altered).await, Err(0));
        let replayed = [f[0].clone(), f[0].clone()].concat();
        assert_eq!(read_all(&key, &t, replayed).await, Err(1));
        let reordered = [f[1].clone(), f[0].clone()].concat();
        assert_eq!(read_all(&key, &t, reordered).await, Err(0));
        // A frame sealed on another connection (other nonces).
        let other = Transcript {
            from: 1,
            to: 0,
            nonce_a: [3; NONCE_LEN],
            nonce_b: [2; NONCE_LEN],
        };
        let (mut s, _) = key.session(&other);
        let mut moved = Vec::new();
        s.seal_message(
            &Message::ReadProbe {
                ballot: stutter_core::Ballot(1),
                id: 0,
            },
            1 << 20,
            &mut moved,
        )
        .unwrap();
        assert_eq!(read_all(&key, &t, moved).await, Err(0));
    }

    #[tokio::test]
    async fn a_frame_over_the_cap_is_neither_sent_nor_read() {
        let key = ClusterKey::new(None);
        let t = Transcript {
            from: 1,
            to: 0,
            nonce_a: [1; NONCE_LEN],
            nonce_b: [2; NONCE_LEN],
        };
        let (mut s, mut o) = key.session(&t);
        let mut out = vec![9u8];
        let big = vec![0u8; 2000];
        assert!(s.seal(&big, 1000, &mut out).is_err());
        assert_eq!(out, vec![9u8], "nothing appended");
        let mut prefix = &((512u32 << 20).to_be_bytes())[..];
        let mut buf = Vec::new();
        assert!(read_sealed(&mut prefix, &mut o, 256 << 20, &mut buf)
            .await
            .is_err());
        assert_eq!(buf.capacity(), 0, "refused before allocating");
    }
}

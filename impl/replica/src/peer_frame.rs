//! What a sealed peer frame carries: a protocol message, or one part of a
//! snapshot being installed on a peer.
//!
//! A snapshot is the whole key-value state. Sent as one frame it took
//! 250–290 ms to seal at 24 MB (measured 2026-11-28, `scripts/rejoin-quiet`)
//! on the node's one runtime thread, which is also the protocol loop's: the
//! leader's heartbeats stalled for about an election timeout while a
//! rejoining follower's snapshot was sealed, and one rejoin in ten unseated
//! the leader. A state above `max_peer_frame_mb` could not be sent at all.
//! So the peer writer sends an `InstallSnapshot` as parts of about
//! [`PART_BYTES`], yielding between them, and the receiver reassembles the
//! parts into one `InstallSnapshot` before the protocol loop sees it: the
//! core, its traces and the spec see one message, as before.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use stutter_core::{Ballot, Message, SessionTable, Slot, Snapshot};

/// Encoded entries per snapshot part, at most: sealed in about 10 ms here, so the
/// loop sharing the thread waits no longer than for a slow turn.
pub const PART_BYTES: usize = 1 << 20;

/// A peer frame's body, as received.
#[derive(Debug, PartialEq, Deserialize)]
pub enum PeerFrame {
    Message(Message),
    SnapshotPart(SnapshotPart),
}

/// A peer frame's body, as sent: the same encoding as [`PeerFrame`]
/// (bincode writes a reference as what it refers to), without copying the
/// message or the snapshot's entries.
#[derive(Serialize)]
pub enum PeerFrameRef<'a> {
    Message(&'a Message),
    SnapshotPart(SnapshotPartRef<'a>),
}

/// What only the first part of a snapshot carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotHead {
    pub ballot: Ballot,
    pub last_executed: Slot,
    pub digest: u64,
    pub sessions: SessionTable,
}

/// One part, as received: parts are numbered from 0, the first carries the
/// head, the last says so.
#[derive(Debug, PartialEq, Deserialize)]
pub struct SnapshotPart {
    pub index: u32,
    pub last: bool,
    pub head: Option<SnapshotHead>,
    pub entries: Vec<(Bytes, Bytes)>,
}

/// One part, as sent (borrowing the snapshot's entries).
#[derive(Serialize)]
pub struct SnapshotPartRef<'a> {
    pub index: u32,
    pub last: bool,
    pub head: Option<SnapshotHead>,
    pub entries: Vec<(&'a Bytes, &'a Bytes)>,
}

/// Cuts a snapshot into parts, one at a time, so that the caller can seal
/// and write each before the next is cut.
pub struct SnapshotParts {
    ballot: Ballot,
    snapshot: Arc<Snapshot>,
    index: u32,
    /// The last key sent; `None` before the first part.
    after: Option<Bytes>,
    done: bool,
}

impl SnapshotParts {
    pub fn new(ballot: Ballot, snapshot: Arc<Snapshot>) -> SnapshotParts {
        SnapshotParts {
            ballot,
            snapshot,
            index: 0,
            after: None,
            done: false,
        }
    }

    /// Calls `f` with the next part; false once every part was given.
    /// A part holds at least one entry (an entry larger than `PART_BYTES`
    /// makes a part of its own) or, for an empty state, none.
    pub fn next_part<R>(&mut self, f: impl FnOnce(&PeerFrameRef<'_>) -> R) -> Option<R> {
        if self.done {
            return None;
        }
        let from = match &self.after {
            None => Bound::Unbounded,
            Some(k) => Bound::Excluded(k.clone()),
        };
        let mut entries = Vec::new();
        let mut bytes = 0;
        let mut rest = self.snapshot.kv.range((from, Bound::Unbounded)).peekable();
        while let Some((k, v)) = rest.peek() {
            // Encoded: each of the two with its u64 length (bincode).
            let size = k.len() + v.len() + 16;
            if !entries.is_empty() && bytes + size > PART_BYTES {
                break;
            }
            bytes += size;
            entries.push((*k, *v));
            rest.next();
        }
        let last = rest.peek().is_none();
        let head = (self.index == 0).then(|| SnapshotHead {
            ballot: self.ballot,
            last_executed: self.snapshot.last_executed,
            digest: self.snapshot.digest,
            sessions: self.snapshot.sessions.clone(),
        });
        self.after = entries.last().map(|(k, _)| (*k).clone());
        let part = PeerFrameRef::SnapshotPart(SnapshotPartRef {
            index: self.index,
            last,
            head,
            entries,
        });
        self.index += 1;
        self.done = last;
        Some(f(&part))
    }
}

/// Rebuilds snapshots from the parts of one connection, in order.
#[derive(Default)]
pub struct SnapshotAssembly {
    /// The snapshot being rebuilt and the index of the part expected next.
    open: Option<(SnapshotHead, BTreeMap<Bytes, Bytes>, u32)>,
}

/// A part that does not continue the snapshot being rebuilt: the peer
/// breaks the protocol, and its connection is closed.
#[derive(Debug, PartialEq, Eq)]
pub struct OutOfOrder {
    pub expected: u32,
    pub got: u32,
}

impl std::fmt::Display for OutOfOrder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "snapshot part {} where part {} was expected",
            self.got, self.expected
        )
    }
}

impl SnapshotAssembly {
    /// Takes the next part; the whole `InstallSnapshot` once its last part
    /// arrived. A part 0 (with its head) always starts a new snapshot.
    pub fn add(&mut self, part: SnapshotPart) -> Result<Option<Message>, OutOfOrder> {
        let (head, mut kv, expected) = match (part.head, self.open.take()) {
            (Some(head), _) if part.index == 0 => (head, BTreeMap::new(), 0),
            (None, Some(open)) if part.index == open.2 => open,
            (_, open) => {
                return Err(OutOfOrder {
                    expected: open.map_or(0, |o| o.2),
                    got: part.index,
                })
            }
        };
        kv.extend(part.entries);
        if !part.last {
            self.open = Some((head, kv, expected + 1));
            return Ok(None);
        }
        Ok(Some(Message::InstallSnapshot {
            ballot: head.ballot,
            snapshot: Arc::new(Snapshot {
                last_executed: head.last_executed,
                kv,
                sessions: head.sessions,
                digest: head.digest,
            }),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(entries: usize, value: usize) -> Arc<Snapshot> {
        let kv = (0..entries)
            .map(|i| {
                (
                    Bytes::from(format!("key{i:06}")),
                    Bytes::from(vec![(i % 251) as u8; value]),
                )
            })
            .collect();
        Arc::new(Snapshot {
            last_executed: Slot(entries as u64 + 7),
            kv,
            sessions: SessionTable::default(),
            digest: 0xfeed,
        })
    }

    /// Cuts `snap` into parts, encodes each as the wire does, decodes and
    /// reassembles them; returns the message and how many parts it took.
    fn round_trip(snap: &Arc<Snapshot>) -> (Message, usize) {
        let mut parts = SnapshotParts::new(Ballot(258), snap.clone());
        let mut bodies = Vec::new();
        while let Some(body) = parts.next_part(|p| bincode::serialize(p).unwrap()) {
            let largest = snap.kv.values().map(|v| v.len() + 64).max().unwrap_or(0);
            assert!(
                body.len() <= PART_BYTES.max(largest) + 4096,
                "part of {} bytes",
                body.len()
            );
            bodies.push(body);
        }
        let mut asm = SnapshotAssembly::default();
        let mut whole = None;
        for (i, b) in bodies.iter().enumerate() {
            let PeerFrame::SnapshotPart(p) = bincode::deserialize(b).unwrap() else {
                panic!("not a part")
            };
            let got = asm.add(p).unwrap();
            assert_eq!(
                got.is_some(),
                i + 1 == bodies.len(),
                "whole only at the last part"
            );
            whole = got.or(whole);
        }
        (whole.unwrap(), bodies.len())
    }

    #[test]
    fn a_snapshot_cut_into_parts_arrives_whole() {
        // 24 MB of 4 KB values, as in scripts/rejoin-quiet.
        let snap = snapshot(6000, 4096);
        let (msg, parts) = round_trip(&snap);
        assert_eq!(parts, 24, "about 1 MiB a part");
        assert_eq!(
            msg,
            Message::InstallSnapshot {
                ballot: Ballot(258),
                snapshot: snap
            }
        );
    }

    #[test]
    fn an_empty_state_and_an_entry_larger_than_a_part_are_sent() {
        let empty = snapshot(0, 0);
        assert_eq!(round_trip(&empty).1, 1);
        let big = snapshot(3, PART_BYTES * 2);
        let (msg, parts) = round_trip(&big);
        assert_eq!(parts, 3, "one entry a part");
        assert!(matches!(msg, Message::InstallSnapshot { snapshot, .. } if snapshot == big));
    }

    #[test]
    fn a_message_is_encoded_alike_by_reference_and_by_value() {
        let m = Message::Heartbeat {
            ballot: Ballot(3),
            last_executed: Slot(9),
            global_last_executed: Slot(4),
        };
        let body = bincode::serialize(&PeerFrameRef::Message(&m)).unwrap();
        match bincode::deserialize::<PeerFrame>(&body).unwrap() {
            PeerFrame::Message(got) => assert_eq!(got, m),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn parts_out_of_order_are_refused_and_a_new_first_part_starts_over() {
        let snap = snapshot(3000, 1024);
        let mut parts = SnapshotParts::new(Ballot(1), snap.clone());
        let mut decoded = Vec::new();
        while let Some(b) = parts.next_part(|p| bincode::serialize(p).unwrap()) {
            match bincode::deserialize(&b).unwrap() {
                PeerFrame::SnapshotPart(p) => decoded.push(p),
                PeerFrame::Message(_) => panic!("a message"),
            }
        }
        assert!(decoded.len() >= 3);
        let mut asm = SnapshotAssembly::default();
        let mut it = decoded.into_iter();
        let first = it.next().unwrap();
        let second = it.next().unwrap();
        let third = it.next().unwrap();
        assert_eq!(
            asm.add(second).unwrap_err(),
            OutOfOrder {
                expected: 0,
                got: 1
            },
            "no part before the first"
        );
        assert_eq!(asm.add(first).unwrap(), None);
        assert_eq!(
            asm.add(third).unwrap_err(),
            OutOfOrder {
                expected: 1,
                got: 2
            },
            "a skipped part"
        );
        // After a refusal the connection is closed; on a new one the
        // sender starts again from part 0, and the snapshot arrives.
        assert!(
            matches!(round_trip(&snap).0, Message::InstallSnapshot { snapshot, .. } if snapshot == snap)
        );
    }
}

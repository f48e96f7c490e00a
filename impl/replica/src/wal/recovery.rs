//! Recovery's judgement of what it read: a torn tail (a crash during an
//! unsynced write) is cut off; anything else that does not read back as
//! written is damage, and a replica with damaged acceptor state must not
//! vote (issue 16). Pure functions over the bytes read, so that every case
//! is testable without a disk; `mod.rs` does the reading.
//!
//! The rules, per segment:
//! - the records from the start up to the first record that fails (torn,
//!   bad CRC, stale from a recycled life, implausible) are the segment;
//! - if any valid record of this segment lies anywhere after that point,
//!   the failed record is damage: a crash keeps a prefix of the one
//!   unsynced write, so a torn write never has a valid record after it;
//! - if it lies before the offset up to which the segment was known to be
//!   synced (its sync mark, `marks.rs`), it is damage too: a synced record
//!   was acknowledged, and a crash does not tear it;
//! - otherwise the rest is the segment's unwritten part (zero fill, stale
//!   records of an earlier life, a torn tail) and is ignored.
//!
//! A real disk that loses power may persist the pages of the unsynced
//! write out of order; a hole with a valid record of the same write after
//! it is then reported as damage although nothing acknowledged was lost:
//! a refusal too many (availability), never a silent loss (safety).
//!
//! And for `snapshot.bin`: it is written to a temporary file, synced and
//! renamed, so a crash never leaves one half written. One that does not
//! decode is damage: the segments it let go are gone without a trace, so
//! recovery cannot tell whether the log still holds what it covered.
//!
//! Finally the state as a whole must be what a replica could have written:
//! the core's recovery marks the slots up to the snapshot's last executed
//! one as executed and checks that the last of them is in its log.

use std::fmt;

use stutter_core::{DurableState, Record, Slot};

use super::format::{decodes_exactly, parse_one, HEADER};

/// Damaged acceptor state: which file, where, what. The replica refuses to
/// start on it (see the `Display` text for what an operator does).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damaged {
    pub file: String,
    pub offset: u64,
    pub what: String,
}

impl fmt::Display for Damaged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "damaged acceptor state: {} at byte {}: {}. This replica must not vote with it: \
             rebuild it from its peers (move its data directory aside; with an empty one it \
             rejoins by catch-up; docs/replica-internals.md, \"Damaged acceptor state\", says when that is safe)",
            self.file, self.offset, self.what
        )
    }
}

impl std::error::Error for Damaged {}

impl Damaged {
    pub fn into_io(self) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::InvalidData, self)
    }

    /// The `Damaged` an error chain carries, if any (the simulation's
    /// supervisor tells a refusal from a crash with this).
    pub fn find<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a Damaged> {
        let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
        while let Some(e) = cur {
            if let Some(d) = e.downcast_ref::<Damaged>() {
                return Some(d);
            }
            if let Some(d) = e
                .downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|i| i.downcast_ref::<Damaged>())
            {
                return Some(d);
            }
            cur = e.source();
        }
        None
    }
}

/// What a segment holds.
#[derive(Debug, PartialEq)]
pub struct Scan {
    pub records: Vec<Record>,
    /// Bytes the records take from the start.
    pub valid: usize,
}

/// Judges the bytes of segment `seq` named `file`,
/// known to be synced up to byte `synced` (0: not known).
pub fn scan_segment(bytes: &[u8], seq: u64, file: &str, synced: u64) -> Result<Scan, Damaged> {
    let mut off = 0;
    let mut records = Vec::new();
    while let Some((rec, next)) = parse_one(bytes, off, seq) {
        records.push(rec);
        off = next;
    }
    if let Some(later) = next_valid(bytes, off + 1, seq) {
        return Err(Damaged {
            file: file.to_owned(),
            offset: off as u64,
            what: format!("the record here does not read back as written, and a valid record follows at byte {later}"),
        });
    }
    if (off as u64) < synced {
        return Err(Damaged {
            file: file.to_owned(),
            offset: off as u64,
            what: format!("the record here does not read back as written, and this file had been synced up to byte {synced}"),
        });
    }
    Ok(Scan {
        records,
        valid: off,
    })
}

/// The first offset at or after `from` where a valid record of segment
/// `seq` starts. Filters first, cheapest first (a length that fits, the
/// tag of a record kind, a body that decodes to exactly one record), and
/// computes the CRC last: a CRC costs the length the header claims, and
/// in zero-heavy stale data many offsets claim megabytes (a 32 MiB
/// pattern of small integers took 459 s with the CRC right after the tag
/// test).
fn next_valid(bytes: &[u8], from: usize, seq: u64) -> Option<usize> {
    let end = bytes.len().checked_sub(HEADER + 4)?;
    (from..=end).find(|&off| {
        let Some(h) = bytes.get(off..off + HEADER + 4) else {
            return false;
        };
        let len = u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize;
        // bincode's enum tag: a u32, 0..=2 for the three record kinds.
        let tag_ok = h[8] <= 2 && h[9] == 0 && h[10] == 0 && h[11] == 0;
        let body = || bytes.get(off + HEADER..off + HEADER + len);
        len >= 4
            && tag_ok
            && body().is_some_and(decodes_exactly)
            && parse_one(bytes, off, seq).is_some()
    })
}

/// Judges the bytes of a `snapshot.bin`.
pub fn scan_snapshot(bytes: &[u8], file: &str) -> Result<Record, Damaged> {
    let damaged = |what: &str| Damaged {
        file: file.to_owned(),
        offset: 0,
        what: what.to_owned(),
    };
    match parse_one(bytes, 0, 0) {
        Some((rec @ Record::Snapshot { .. }, end)) if end == bytes.len() => Ok(rec),
        Some((Record::Snapshot { .. }, end)) => Err(Damaged {
            file: file.to_owned(),
            offset: end as u64,
            what: format!("{} bytes after the snapshot record", bytes.len() - end),
        }),
        Some(_) => Err(damaged("it holds a record that is not a snapshot")),
        None => Err(damaged(
            "the snapshot record does not read back as written (torn, bad CRC or implausible)",
        )),
    }
}

/// Brings the log up to a snapshot that got ahead of it, and says so.
///
/// The node writes `snapshot.bin` on its own (a thread, or inline in the
/// simulation) while the group commit syncs the accepts of the same batch;
/// a power loss between the two leaves a durable snapshot whose last
/// executed slot the durable log does not reach (seen in the turmoil layer:
/// 5 replicas, seed 1479, "last executed slot 122 is not in the log
/// (trimmed to 120)"). Nothing is lost by trimming the log to the snapshot:
/// the slots it covers were chosen (executed), and the accepts that did not
/// reach the disk were never acknowledged (acknowledgments wait for the
/// sync), so the replica counts in no quorum for them; a promise to a
/// candidate behind it carries the snapshot, as for any trimmed slot.
/// Returns `(trimmed before, trimmed after)` when it trimmed.
pub fn settle(state: &mut DurableState) -> Option<(Slot, Slot)> {
    let le = state.snapshot.as_ref()?.last_executed;
    if le <= state.trimmed || state.accepted.contains_key(&le) {
        return None;
    }
    let before = state.trimmed;
    state.trimmed = le;
    state.accepted = match le.0.checked_add(1) {
        Some(next) => state.accepted.split_off(&Slot(next)),
        None => Default::default(),
    };
    Some((before, le))
}

/// Checks that the recovered state is one a replica could have written;
/// `snapshot_file` names where its snapshot came from.
pub fn check_state(state: &DurableState, snapshot_file: &str) -> Result<(), Damaged> {
    let damaged = |what: String| {
        Err(Damaged {
            file: snapshot_file.to_owned(),
            offset: 0,
            what,
        })
    };
    let le = state
        .snapshot
        .as_ref()
        .map(|s| s.last_executed)
        .unwrap_or_default();
    if state.snapshot.is_none() && state.trimmed.0 > 0 {
        return damaged(format!(
            "the log is trimmed to slot {} but there is no snapshot",
            state.trimmed.0
        ));
    }
    if state.trimmed > le {
        return damaged(format!(
            "trimmed to slot {} beyond the snapshot's last executed slot {}",
            state.trimmed.0, le.0
        ));
    }
    if le > state.trimmed && !state.accepted.contains_key(&le) {
        return damaged(format!(
            "the snapshot's last executed slot {} is not in the log (trimmed to {}): records it depends on are missing",
            le.0, state.trimmed.0
        ));
    }
    Ok(())
}

/// What two or three reads of one file gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Reads {
    /// Two reads agreed on these bytes.
    Stable(Vec<u8>),
    /// Three reads, no two alike: the file cannot be read reliably.
    Unstable,
}

/// Reads a file until two reads agree, at most three times. A disk (or the
/// simulation's) can return bad bytes once; bytes read twice alike are
/// what the file holds, and only those are judged. Reading every file
/// twice, not only one that looks damaged, is what keeps a bad read of the
/// last record of a segment from passing as a torn tail and being cut off.
pub fn read_stable(mut read: impl FnMut() -> std::io::Result<Vec<u8>>) -> std::io::Result<Reads> {
    let a = read()?;
    let b = read()?;
    if a == b {
        return Ok(Reads::Stable(a));
    }
    let c = read()?;
    if c == a || c == b {
        return Ok(Reads::Stable(c));
    }
    Ok(Reads::Unstable)
}

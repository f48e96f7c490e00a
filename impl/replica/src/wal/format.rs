//! The log's record format: `[len u32 LE][crc u32 LE][bincode Record]`,
//! the CRC over the segment's number (none for `snapshot.bin`) and the
//! body; and segment file names.

use stutter_core::Record;

pub(super) const HEADER: usize = 8;
/// A single record larger than this is corruption, not data.
const MAX_RECORD: usize = 1 << 30;

pub(super) fn segment_name(seq: u64) -> String {
    format!("wal-{seq:016}.log")
}

pub(super) fn parse_segment_name(name: &str) -> Option<u64> {
    name.strip_prefix("wal-")?
        .strip_suffix(".log")?
        .parse()
        .ok()
}

/// CRC of a record body in segment `seq` (0: `snapshot.bin`, body only).
pub(super) fn crc(seq: u64, body: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    if seq > 0 {
        h.update(&seq.to_le_bytes());
    }
    h.update(body);
    h.finalize()
}

/// The records of segment `seq` from its start up to
/// the first torn, corrupt or stale record, and how many bytes they take.
pub fn decode_segment(bytes: &[u8], seq: u64) -> (Vec<Record>, usize) {
    let mut off = 0;
    let mut records = Vec::new();
    while let Some((rec, next)) = parse_one(bytes, off, seq) {
        records.push(rec);
        off = next;
    }
    (records, off)
}

/// The snapshot record of a `snapshot.bin`, or `None` if it is torn,
/// corrupt or holds another kind of record.
pub fn decode_snapshot_file(bytes: &[u8]) -> Option<Record> {
    match parse_one(bytes, 0, 0)? {
        (rec @ Record::Snapshot { .. }, _) => Some(rec),
        _ => None,
    }
}

/// One record at `off` of segment `seq`, and where the next starts; `None`
/// at the end or at the first torn, corrupt or stale record.
pub(super) fn parse_one(bytes: &[u8], off: usize, seq: u64) -> Option<(Record, usize)> {
    let header = bytes.get(off..off + HEADER)?;
    let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
    let c = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    if len == 0 || len > MAX_RECORD {
        return None;
    }
    let body = bytes.get(off + HEADER..off + HEADER + len)?;
    // The injected bug `accept-torn-tail` (feature `node-bugs` with
    // `STUTTER_NODE_BUG=accept-torn-tail`, a negative control of the
    // turmoil layer) skips this check: torn, corrupt and stale records
    // are replayed.
    if crc(seq, body) != c && !crate::node_bug::active(crate::node_bug::NodeBug::AcceptTornTail) {
        return None;
    }
    let rec = bincode::deserialize(body).ok()?;
    if !plausible(&rec) {
        return None;
    }
    Some((rec, off + HEADER + len))
}

/// Whether `body` is exactly one plausible record, CRC aside. Cheap on
/// garbage (decoding fails within a few bytes), so recovery's search for
/// a valid record after a bad one runs it before the CRC, which costs the
/// whole length the header claims.
pub(super) fn decodes_exactly(body: &[u8]) -> bool {
    use bincode::Options;
    // `bincode::deserialize`'s encoding, without its tolerance of
    // trailing bytes: a body is one record and nothing more.
    let exact = bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .reject_trailing_bytes();
    exact
        .deserialize::<Record>(body)
        .is_ok_and(|r| plausible(&r))
}

/// No slot or ballot a replica writes comes near this (a million slots a
/// second would take 146,000 years), while the protocol adds to both: a
/// record beyond it is corruption (or a bug's output) and replay stops
/// there, as at a bad CRC. Found by the `wal_records` fuzz target: a
/// snapshot record with `trimmed = u64::MAX` made recovery overflow.
const MAX_PLAUSIBLE: u64 = 1 << 62;

fn plausible(rec: &Record) -> bool {
    match rec {
        Record::Ballot(b) => b.0 < MAX_PLAUSIBLE,
        Record::Accept { slot, ballot, .. } => slot.0 < MAX_PLAUSIBLE && ballot.0 < MAX_PLAUSIBLE,
        Record::Snapshot { trimmed, snapshot } => {
            trimmed.0 < MAX_PLAUSIBLE && snapshot.last_executed.0 < MAX_PLAUSIBLE
        }
    }
}

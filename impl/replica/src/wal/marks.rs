//! Sync marks: how far each segment of the log is known to be durable.
//!
//! Without them recovery cannot tell two cases apart at the end of a
//! segment: a record torn by a crash during its unsynced write (never
//! acknowledged: cut it off) and a record that was synced, acknowledged,
//! and later damaged on the disk (a promise or an accept the replica must
//! not forget: refuse to vote). The turmoil layer's node traces showed the
//! second case passing as the first (seeds 4, 11 and 51 with `--damage`):
//! a replica whose only record, its promise, had one byte flipped came
//! back with ballot 0 and voted again.
//!
//! So after every group commit's sync the log records, for each segment
//! still needed, the offset up to which it is synced. A record that fails
//! to read back before that offset is damage, whatever follows it.
//!
//! The file `synced.marks` holds two copies, written alternately, each in
//! its own 4 KiB block: `[crc u32][count u32][generation u64]` then
//! `count` pairs `[segment u64][synced end u64]`, the CRC over everything
//! after it. Recovery takes the valid copy of the higher generation; a
//! torn or damaged copy leaves the other, older one, which is still true
//! (synced bytes stay synced), only less complete. With no valid copy the
//! rules fall back to what they were: an unreadable tail is cut.
//!
//! A mark is written only after the sync it reports, and off the
//! acknowledgement path (a thread of its own in a real process, at most
//! every 20 ms; inline under simulation): a crash between a sync and its
//! mark leaves that sync's records judged as before, never a false claim.

use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use super::mailbox::Mailbox;
use super::{background_priority, read_twice};
use crate::platform::fs::{self, File, OpenOptions};

pub(super) const MARKS: &str = "synced.marks";
const COPY: usize = 4096;
const HEAD: usize = 16;
/// Segments a mark set covers at most (the newest ones): a log needs a
/// few segments between snapshots; an older one without a mark is judged
/// by the fallback rule.
pub(super) const MAX_MARKS: usize = (COPY - HEAD) / 16;

/// Synced end of each segment, by segment number.
pub type SyncMarks = BTreeMap<u64, u64>;

/// One copy: generation `generation` of `marks` (a whole file is two;
/// public for the fuzz targets' corpus).
pub fn encode(generation: u64, marks: &[(u64, u64)]) -> Vec<u8> {
    let marks = &marks[marks.len().saturating_sub(MAX_MARKS)..];
    let mut b = Vec::with_capacity(COPY);
    b.extend_from_slice(&[0u8; 4]);
    b.extend_from_slice(&(marks.len() as u32).to_le_bytes());
    b.extend_from_slice(&generation.to_le_bytes());
    for (seq, end) in marks {
        b.extend_from_slice(&seq.to_le_bytes());
        b.extend_from_slice(&end.to_le_bytes());
    }
    let c = crc32fast::hash(&b[4..]);
    b[..4].copy_from_slice(&c.to_le_bytes());
    b.resize(COPY, 0);
    b
}

/// The copy at `at`, if it reads back as written: its generation and marks.
fn decode_copy(bytes: &[u8], at: usize) -> Option<(u64, SyncMarks)> {
    let copy = bytes.get(at..at + COPY)?;
    let word = |i: usize| u32::from_le_bytes([copy[i], copy[i + 1], copy[i + 2], copy[i + 3]]);
    let long = |i: usize| u64::from_le_bytes(copy[i..i + 8].try_into().unwrap_or([0; 8]));
    let count = word(4) as usize;
    if count > MAX_MARKS {
        return None;
    }
    let end = HEAD + 16 * count;
    if crc32fast::hash(&copy[4..end]) != word(0) {
        return None;
    }
    let marks = (0..count)
        .map(|i| (long(HEAD + 16 * i), long(HEAD + 16 * i + 8)))
        .collect();
    Some((long(8), marks))
}

/// The newest valid copy of a `synced.marks` file: its generation and
/// marks (generation 0 and no marks when neither copy is valid).
pub fn decode_marks(bytes: &[u8]) -> (u64, SyncMarks) {
    [0, COPY]
        .into_iter()
        .filter_map(|at| decode_copy(bytes, at))
        .max_by_key(|(generation, _)| *generation)
        .unwrap_or_default()
}

/// Reads the marks of `dir` (none if the file is missing).
pub(super) fn read_marks(dir: &Path) -> std::io::Result<(u64, SyncMarks)> {
    let path = dir.join(MARKS);
    if fs::metadata(&path).is_err() {
        return Ok((0, SyncMarks::new()));
    }
    Ok(decode_marks(&read_twice(&path)?))
}

/// The marks file, open for writing.
pub(super) struct MarkFile {
    file: File,
    generation: u64,
}

impl MarkFile {
    /// Opens (creating and making durable if needed) the marks file of
    /// `dir`; the next copy written has a generation above `generation`.
    pub(super) fn open(dir: &Path, generation: u64) -> std::io::Result<MarkFile> {
        let path = dir.join(MARKS);
        let fresh = fs::metadata(&path).is_err();
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)?;
        if fresh {
            file.write_all_at(&[0u8; 2 * COPY], 0)?;
            file.sync_all()?;
            fs::sync_dir(dir)?;
        }
        Ok(MarkFile { file, generation })
    }

    /// Writes and syncs `marks` over the older of the two copies.
    fn write(&mut self, marks: &[(u64, u64)]) -> std::io::Result<()> {
        self.generation += 1;
        let at = (self.generation % 2) as usize * COPY;
        self.file
            .write_all_at(&encode(self.generation, marks), at as u64)?;
        self.file.sync_data()
    }
}

/// At most one mark write per interval in a real process: a group commit
/// may sync a thousand times a second, and a sync of the marks file for
/// each would double the disk's sync load. The cost is a window: records
/// synced in the last interval before a crash are judged by the old rule.
const MARK_INTERVAL: std::time::Duration = std::time::Duration::from_millis(20);

/// Where the log hands a new set of marks after a sync: the mark thread's
/// mailbox, straight to the file (simulation), or nowhere (`fsync = false`:
/// nothing is synced, so nothing may be claimed).
pub(super) enum Marker {
    /// Joined on close, so that the marks of the last sync are on the disk
    /// when the log is dropped (a test or a simulated restart reopens it
    /// at once).
    Thread {
        mailbox: Arc<Mailbox<Vec<(u64, u64)>>>,
        thread: Option<std::thread::JoinHandle<()>>,
    },
    Inline(MarkFile),
    Off,
}

impl Marker {
    pub(super) fn start(file: Option<MarkFile>, thread: bool) -> std::io::Result<Marker> {
        let Some(mut file) = file else {
            return Ok(Marker::Off);
        };
        if !thread {
            return Ok(Marker::Inline(file));
        }
        let mailbox = Arc::new(Mailbox::<Vec<(u64, u64)>>::default());
        let rx = mailbox.clone();
        let thread = std::thread::Builder::new()
            .name("wal-marks".into())
            .spawn(move || {
                background_priority();
                while let Some(marks) = rx.take() {
                    let started = std::time::Instant::now();
                    write_logged(&mut file, &marks);
                    // What came meanwhile waits in the mailbox (the newest
                    // only) and is written next.
                    if let Some(rest) = MARK_INTERVAL.checked_sub(started.elapsed()) {
                        std::thread::sleep(rest);
                    }
                }
            })?;
        Ok(Marker::Thread {
            mailbox,
            thread: Some(thread),
        })
    }

    /// Records that each segment `seq` is synced up to `end`.
    pub(super) fn put(&mut self, marks: Vec<(u64, u64)>) {
        match self {
            Marker::Thread { mailbox, .. } => mailbox.put(marks),
            Marker::Inline(file) => write_logged(file, &marks),
            Marker::Off => {}
        }
    }

    pub(super) fn close(&mut self) {
        if let Marker::Thread { mailbox, thread } = self {
            mailbox.close();
            if let Some(t) = thread.take() {
                let _ = t.join();
            }
        }
    }
}

/// A failed mark is not fail-stop: the data is synced, only the proof of
/// it is missing, and recovery falls back to cutting an unreadable tail.
fn write_logged(file: &mut MarkFile, marks: &[(u64, u64)]) {
    if let Err(e) = file.write(marks) {
        tracing::warn!(error = %e, "writing synced.marks failed; damage at the end of a segment may pass for a torn tail");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newer_valid_copy_wins_and_a_damaged_one_leaves_the_older() {
        let mut bytes = encode(2, &[(1, 100), (2, 40)]);
        bytes.extend(encode(3, &[(2, 90)]));
        assert_eq!(decode_marks(&bytes), (3, SyncMarks::from([(2, 90)])));
        // Any flipped byte of the newer copy's used part: the older copy.
        for i in 0..HEAD + 16 {
            let mut b = bytes.clone();
            b[COPY + i] ^= 0x10;
            assert_eq!(
                decode_marks(&b),
                (2, SyncMarks::from([(1, 100), (2, 40)])),
                "byte {i}"
            );
        }
        assert_eq!(decode_marks(&[0u8; 2 * COPY]), (0, SyncMarks::new()));
        assert_eq!(
            decode_marks(&bytes[..COPY + 10]),
            (2, SyncMarks::from([(1, 100), (2, 40)]))
        );
    }

    #[test]
    fn only_the_newest_segments_are_kept() {
        let many: Vec<(u64, u64)> = (0..MAX_MARKS as u64 + 5).map(|s| (s, s * 10)).collect();
        let (_, marks) = decode_marks(&encode(1, &many));
        assert_eq!(marks.len(), MAX_MARKS);
        assert_eq!(marks.keys().next(), Some(&5));
    }
}

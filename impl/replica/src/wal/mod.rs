//! The write-ahead log: the acceptor state a replica must not forget.
//!
//! The log is a sequence of segment files `wal-<seq>.log` (seq increasing)
//! of records `[len: u32 LE][crc: u32 LE][bincode Record]`, where the CRC
//! covers the segment's sequence number and the body. Replaying the
//! segments in order through `DurableState::apply` rebuilds the ballot and
//! the accepted instances. In each segment, replay stops at the first torn,
//! corrupt or stale record.
//!
//! Why segments: an `fdatasync` after an append must also commit the file
//! system's journal (the file grew), which on this kind of disk is several
//! times slower than an overwrite of blocks that already exist and has
//! long tails (tens to hundreds of milliseconds). So segments are
//! preallocated — zero-filled by a background thread, or recycled from
//! segments no longer needed — and the group commit overwrites them in
//! place. A recycled segment still holds old records; the sequence number in
//! their CRC tells them apart (the way RocksDB's recyclable log format does).
//! Each segment starts with the current ballot, so that older segments can
//! be dropped.
//!
//! Snapshots (the state machine at a trim point) can be large, so they do
//! not go through the log: a background thread writes the latest one to
//! `snapshot.bin` (temporary file, fsync, rename, fsync of the directory)
//! while group commits go on. Once a snapshot covering slot `t` is durable,
//! every sealed segment whose instances are all at or below `t` is recycled
//! or deleted. If the newest snapshot is lost in a crash, the segments it
//! would have retired are still there.
//!
//! After each sync, `synced.marks` records how far each segment is synced
//! (`marks.rs`), so that recovery can tell a record damaged after it was
//! synced from a torn unsynced tail.

mod format;
mod mailbox;
mod marks;
mod recovery;
mod snapshot;
mod spares;

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use stutter_core::{Ballot, DurableState, Record, Slot};

use crate::platform::fs::{self, File, OpenOptions};
use crate::platform::BACKGROUND_THREADS;
use format::{crc, parse_segment_name, segment_name, HEADER};
pub use format::{decode_segment, decode_snapshot_file};
pub use marks::{decode_marks, encode as encode_marks, SyncMarks};
use marks::{MarkFile, Marker, MAX_MARKS};
pub use recovery::{
    check_state, read_stable, scan_segment, scan_snapshot, settle, Damaged, Reads, Scan,
};
use snapshot::Snapshots;
use spares::{Prep, Preparer, Spares};

const SNAPSHOT: &str = "snapshot.bin";
/// The log file of versions before segments, refused at open.
const SINGLE_FILE_LOG: &str = "wal.log";
/// Size of a preallocated segment. A record that does not fit in what is
/// left starts the next segment (one larger than this gets a segment of its
/// own, extended by appending). Small under simulation: a simulated disk
/// keeps every byte in memory, and small segments make the simulation
/// cross segment boundaries, recycle and retire segments often.
pub const SEGMENT_SIZE: u64 = if cfg!(any(feature = "turmoil", feature = "madsim")) {
    64 << 10
} else {
    32 << 20
};
/// Recycled segments kept beyond this are deleted.
const MAX_RECYCLABLE: usize = 2;

/// The bytes of `path`, read until two reads agree ([`read_stable`]).
fn read_twice(path: &Path) -> std::io::Result<Vec<u8>> {
    match read_stable(|| fs::read(path))? {
        Reads::Stable(bytes) => Ok(bytes),
        // Not judged as damage: the disk may read well after a restart.
        Reads::Unstable => Err(other(format!(
            "{}: three reads gave three different contents",
            path.display()
        ))),
    }
}

fn other(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

/// Lowers the calling thread's CPU priority: snapshot writing and segment
/// preparation are background work that must not delay the protocol loops
/// and group commits on a machine with few cores.
#[allow(unsafe_code)]
fn background_priority() {
    // SAFETY: gettid and setpriority on the calling thread only.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 10);
    }
}

/// A sealed segment, kept until a durable snapshot covers `max_slot`.
#[derive(Debug)]
struct Sealed {
    path: PathBuf,
    max_slot: Slot,
    /// Segment number and the end of its records (its sync mark).
    seq: u64,
    end: u64,
}

/// A sealed segment's tail not yet synced, with its bytes (see `cur_pending`).
struct Unsynced {
    file: File,
    at: u64,
    bytes: Vec<u8>,
}

/// The segment being written.
struct Current {
    seq: u64,
    file: File,
    off: u64,
    max_slot: Slot,
    /// End of the ballot record the segment starts with.
    header: u64,
}

pub struct Wal {
    dir: PathBuf,
    fsync: bool,
    segment_size: u64,
    snapshots: Snapshots,
    /// Trim point of the newest durable `snapshot.bin`.
    snapshot_durable: Arc<AtomicU64>,
    cur: Current,
    /// Sealed since the last sync: their tails still need an fdatasync.
    unsynced: Vec<Unsynced>,
    /// Bytes of the current segment written since its last sync, from
    /// `cur_synced` on: kept until a sync succeeds, because after a failed
    /// fsync the kernel may have marked their pages clean without writing
    /// them, so a retry must write them again (`resync`).
    cur_pending: Vec<u8>,
    cur_synced: u64,
    /// A write or sync failed since the last successful sync: the next
    /// sync rewrites every unsynced byte before it syncs.
    resync: bool,
    sealed: Vec<Sealed>,
    /// Preallocated segments, in sequence order, from the preparer; and
    /// where retired segments go.
    spares: Spares,
    spare_requested: bool,
    /// Where the sync marks go after each sync.
    marker: Marker,
    ballot: Ballot,
    buf: Vec<u8>,
    size: u64,
    /// The directory held a log already: this is a restart.
    restart: bool,
}

impl Wal {
    /// Opens (creating if needed) the log in `dir` and returns it with the
    /// state its records hold. `fsync = false` is for unsafe experiments only.
    pub fn open(dir: &Path, fsync: bool) -> std::io::Result<(Wal, DurableState)> {
        Self::open_with(dir, fsync, SEGMENT_SIZE)
    }

    fn open_with(
        dir: &Path,
        fsync: bool,
        segment_size: u64,
    ) -> std::io::Result<(Wal, DurableState)> {
        fs::create_dir_all(dir)?;
        // The single-file log of early versions is not read: starting
        // without the acceptor state it holds would be amnesia (a replica
        // that forgot its promises must not vote), so refuse to start.
        if fs::metadata(dir.join(SINGLE_FILE_LOG)).is_ok() {
            return Err(other(format!(
                "{}: a single-file write-ahead log, which this version does not read; \
                 move the data directory aside and let the replica catch up from its peers",
                dir.join(SINGLE_FILE_LOG).display()
            )));
        }
        let mut state = DurableState::default();
        let mut snapshot_trimmed = 0;
        let snapshot_path = dir.join(SNAPSHOT);
        if fs::metadata(&snapshot_path).is_ok() {
            let bytes = read_twice(&snapshot_path)?;
            let rec = scan_snapshot(&bytes, &snapshot_path.display().to_string())
                .map_err(Damaged::into_io)?;
            if let Record::Snapshot { trimmed, .. } = &rec {
                snapshot_trimmed = trimmed.0;
            }
            state.apply(rec);
        }
        let mut seqs: Vec<u64> = Vec::new();
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            if let Some(seq) = entry.file_name().to_str().and_then(parse_segment_name) {
                seqs.push(seq);
            }
        }
        seqs.sort_unstable();
        let (generation, marks) = marks::read_marks(dir)?;
        let restart = !seqs.is_empty() || fs::metadata(&snapshot_path).is_ok();
        let mut sealed = Vec::new();
        let mut records = 0usize;
        let mut bytes_total = 0u64;
        for seq in seqs.iter().copied() {
            let path = dir.join(segment_name(seq));
            let bytes = read_twice(&path)?;
            let synced = marks.get(&seq).copied().unwrap_or(0);
            let scan = scan_segment(&bytes, seq, &path.display().to_string(), synced)
                .map_err(Damaged::into_io)?;
            let mut max_slot = Slot::ZERO;
            for rec in scan.records {
                if let Record::Accept { slot, .. } = &rec {
                    max_slot = max_slot.max(*slot);
                }
                state.apply(rec);
                records += 1;
            }
            bytes_total += scan.valid as u64;
            if fsync && (scan.valid as u64) > synced {
                // Read back does not mean durable: after a kill (not a
                // power loss) the page cache still holds unsynced writes.
                // The state replayed from them is acted on from now on, so
                // it is made durable before its marks claim it.
                OpenOptions::new().write(true).open(&path)?.sync_data()?;
            }
            sealed.push(Sealed {
                path,
                max_slot,
                seq,
                end: scan.valid as u64,
            });
        }
        if let Some((from, to)) = settle(&mut state) {
            tracing::warn!(from = from.0, to = to.0, "snapshot.bin is ahead of the durable log (a crash between the two writes): log trimmed to it");
        }
        // What the core's recovery relies on; a disk that breaks it must
        // stop the replica here, with the damage named, not in the core.
        check_state(&state, &dir.join(SNAPSHOT).display().to_string()).map_err(Damaged::into_io)?;
        tracing::info!(
            records,
            bytes = bytes_total,
            segments = sealed.len(),
            ballot = state.ballot.0,
            accepted = state.accepted.len(),
            "write-ahead log recovered"
        );

        // Always continue in a fresh segment: the tails of the old ones
        // (torn, or stale from an earlier life) stay as they are. This also
        // makes a `snapshot.bin` renamed just before a restart durable
        // before any segment is retired on its account.
        let seq = seqs.last().copied().unwrap_or(0) + 1;
        let path = dir.join(segment_name(seq));
        let file = OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&path)?;
        file.sync_all()?;
        fs::sync_dir(dir)?;

        let snapshot_durable = Arc::new(AtomicU64::new(snapshot_trimmed));
        let snapshots = Snapshots::start(dir, fsync, snapshot_durable.clone(), BACKGROUND_THREADS)?;
        let prep = Preparer {
            dir: dir.to_path_buf(),
            next_seq: seq + 1,
            segment_size,
            recyclable: Vec::new(),
        };
        let spares = Spares::start(prep, BACKGROUND_THREADS)?;
        let mark_file = if fsync {
            Some(MarkFile::open(dir, generation)?)
        } else {
            None
        };
        let marker = Marker::start(mark_file, BACKGROUND_THREADS)?;
        let mut wal = Wal {
            dir: dir.to_path_buf(),
            fsync,
            segment_size,
            snapshots,
            snapshot_durable,
            cur: Current {
                seq,
                file,
                off: 0,
                max_slot: Slot::ZERO,
                header: 0,
            },
            unsynced: Vec::new(),
            cur_pending: Vec::new(),
            cur_synced: 0,
            resync: false,
            sealed,
            spares,
            spare_requested: false,
            marker,
            ballot: state.ballot,
            buf: Vec::with_capacity(1 << 20),
            size: 0,
            restart,
        };
        if state.ballot > Ballot::ZERO {
            wal.append(vec![Record::Ballot(state.ballot)])?;
            wal.sync()?;
            wal.cur.header = wal.cur.off;
        } else {
            // The recovered segments' marks, made true by the syncs above.
            wal.mark();
        }
        Ok((wal, state))
    }

    /// Whether the directory held a log when it was opened: a restart, to
    /// be told apart from a first start even when nothing was recovered.
    pub fn restart(&self) -> bool {
        self.restart
    }

    /// Buffers records; they are durable after the next [`Wal::sync`].
    pub fn append(&mut self, records: Vec<Record>) -> std::io::Result<()> {
        self.append_all(&records)
    }

    /// [`Wal::append`] by reference. After a failed append or sync the
    /// caller appends the same records again (then syncs): a record may
    /// then be in the log twice, harmless because replay applies records in
    /// order and the copies are consecutive in that order.
    pub fn append_all(&mut self, records: &[Record]) -> std::io::Result<()> {
        for rec in records {
            match rec {
                Record::Snapshot { .. } => {
                    self.snapshots.put(rec.clone());
                    continue;
                }
                Record::Ballot(b) => self.ballot = self.ballot.max(*b),
                Record::Accept { slot, .. } => self.cur.max_slot = self.cur.max_slot.max(*slot),
            }
            self.write_record(rec)?;
        }
        Ok(())
    }

    fn write_record(&mut self, rec: &Record) -> std::io::Result<()> {
        let start = self.buf.len();
        self.buf.extend_from_slice(&[0u8; HEADER]);
        bincode::serialize_into(&mut self.buf, rec)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        let len = self.buf.len() - start - HEADER;
        let len32 = u32::try_from(len).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, "record too large")
        })?;
        let end = self.cur.off + self.buf.len() as u64;
        if end > self.segment_size && self.cur.off + start as u64 > self.cur.header {
            // Does not fit: what came before goes to this segment, the
            // record starts the next one (after its ballot record). A record
            // too large for any segment extends the one it starts.
            let tail = self.buf.split_off(start);
            self.flush_buf()?;
            self.next_segment()?;
            self.buf.extend_from_slice(&tail);
        }
        let c = crc(self.cur.seq, &self.buf[self.buf.len() - len..]);
        let h = self.buf.len() - len - HEADER;
        self.buf[h..h + 4].copy_from_slice(&len32.to_le_bytes());
        self.buf[h + 4..h + 8].copy_from_slice(&c.to_le_bytes());
        if !self.spare_requested && self.cur.off + self.buf.len() as u64 > self.segment_size / 2 {
            self.spare_requested = true;
            self.spares.send(Prep::Spare);
        }
        Ok(())
    }

    fn flush_buf(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        if let Err(e) = self.cur.file.write_all_at(&self.buf, self.cur.off) {
            self.resync = true;
            return Err(e);
        }
        if self.fsync {
            self.cur_pending.extend_from_slice(&self.buf);
        }
        self.cur.off += self.buf.len() as u64;
        self.size += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    /// Seals the current segment and continues in the next spare. The new
    /// segment starts with the ballot, so the sealed ones can be retired.
    fn next_segment(&mut self) -> std::io::Result<()> {
        if !self.spare_requested {
            self.spares.send(Prep::Spare);
        }
        // Asked for either way: a failed preparation (a full disk) is asked
        // again on the next attempt.
        let spare = self.spares.recv();
        self.spare_requested = false;
        let (seq, file) = spare?;
        let old = std::mem::replace(
            &mut self.cur,
            Current {
                seq,
                file,
                off: 0,
                max_slot: Slot::ZERO,
                header: 0,
            },
        );
        self.sealed.push(Sealed {
            path: self.dir.join(segment_name(old.seq)),
            max_slot: old.max_slot,
            seq: old.seq,
            end: old.off,
        });
        self.unsynced.push(Unsynced {
            file: old.file,
            at: self.cur_synced,
            bytes: std::mem::take(&mut self.cur_pending),
        });
        self.cur_synced = 0;
        let ballot = self.ballot;
        if ballot > Ballot::ZERO {
            self.write_record(&Record::Ballot(ballot))?;
        }
        self.cur.header = self.buf.len() as u64;
        Ok(())
    }

    /// Writes out the buffer and makes everything appended so far durable.
    pub fn sync(&mut self) -> std::io::Result<()> {
        self.flush_buf()?;
        if self.fsync {
            if let Err(e) = self.sync_files() {
                self.resync = true;
                return Err(e);
            }
            self.resync = false;
        } else {
            self.unsynced.clear();
        }
        self.cur_pending.clear();
        self.cur_synced = self.cur.off;
        self.retire();
        self.mark();
        Ok(())
    }

    /// Syncs the sealed tails, then the current segment; after a failure
    /// writes their bytes again first. A tail leaves the list only once
    /// synced.
    fn sync_files(&mut self) -> std::io::Result<()> {
        while let Some(u) = self.unsynced.first() {
            if self.resync {
                u.file.write_all_at(&u.bytes, u.at)?;
            }
            u.file.sync_data()?;
            self.unsynced.remove(0);
        }
        if self.resync {
            self.cur
                .file
                .write_all_at(&self.cur_pending, self.cur_synced)?;
        }
        self.cur.file.sync_data()
    }

    /// Hands the marker how far each segment still needed is synced: the
    /// newest segments, up to what one mark set holds.
    fn mark(&mut self) {
        if let Marker::Off = self.marker {
            return;
        }
        let sealed = self.sealed.iter().map(|s| (s.seq, s.end));
        let mut marks: Vec<(u64, u64)> = sealed.chain([(self.cur.seq, self.cur.off)]).collect();
        if marks.len() > MAX_MARKS {
            marks.drain(..marks.len() - MAX_MARKS);
        }
        self.marker.put(marks);
    }

    /// Everything written is durable: sealed segments whose instances a
    /// durable snapshot covers go to the preparer for reuse.
    fn retire(&mut self) {
        let t = Slot(self.snapshot_durable.load(Ordering::Acquire));
        if self.sealed.iter().all(|s| s.max_slot > t) {
            return;
        }
        // The current segment holds the ballot; a sealed one holds nothing
        // else the snapshot does not cover.
        let (gone, kept): (Vec<Sealed>, Vec<Sealed>) = std::mem::take(&mut self.sealed)
            .into_iter()
            .partition(|s| s.max_slot <= t);
        self.sealed = kept;
        for s in gone {
            self.spares.send(Prep::Retire(s));
        }
    }

    /// Bytes appended since this log was opened.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Number of segment files the log still needs (sealed and current).
    pub fn segments(&self) -> usize {
        self.sealed.len() + 1
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        // The snapshot and mark threads write what is waiting, then end.
        self.snapshots.close();
        self.marker.close();
    }
}

#[cfg(test)]
mod tests;

//! The write-ahead log: the acceptor state a replica must not forget.
//!
//! One file, `wal.log`, of records `[len: u32 LE][crc32: u32 LE][bincode
//! Record]`. Replaying it through `DurableState::apply` rebuilds the ballot
//! and the accepted instances. A torn or corrupt tail (a crash in the middle
//! of a write) is cut off at recovery.
//!
//! Snapshots (the state machine at a trim point) can be large, so they do
//! not go through the log: a background thread writes the latest one to
//! `snapshot.bin` (temporary file, fsync, rename, fsync of the directory)
//! while group commits go on. That is safe because a snapshot only lets
//! trimmed instances be forgotten, and the log keeps them until it is
//! compacted: if the newest snapshot is lost in a crash, recovery starts from
//! the previous one and replays those instances. Compaction rewrites the log
//! from the folded state, snapshot included, so it never drops an instance
//! that no durable snapshot covers.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use stutter_core::{DurableState, Record};

const FILE: &str = "wal.log";
const SNAPSHOT: &str = "snapshot.bin";
const HEADER: usize = 8;
/// A single record larger than this is corruption, not data.
const MAX_RECORD: usize = 1 << 30;
/// Compact once the file exceeds this and four times its last compacted size.
const COMPACT_MIN: u64 = 64 << 20;

pub struct Wal {
    dir: PathBuf,
    snapshots: Option<std::sync::mpsc::Sender<Record>>,
    out: BufWriter<File>,
    size: u64,
    compacted_size: u64,
    state: DurableState,
    fsync: bool,
}

impl Wal {
    /// Opens (creating if needed) the log in `dir` and returns it with the
    /// state its records hold. `fsync = false` is for unsafe experiments only.
    pub fn open(dir: &Path, fsync: bool) -> std::io::Result<(Wal, DurableState)> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(FILE);
        let mut file = OpenOptions::new().create(true).read(true).write(true).truncate(false).open(&path)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let mut state = DurableState::default();
        if let Ok(bytes) = std::fs::read(dir.join(SNAPSHOT)) {
            match parse_one(&bytes, 0) {
                Some((rec @ Record::Snapshot { .. }, _)) => state.apply(rec),
                _ => tracing::warn!("snapshot.bin is unreadable; recovering from the log alone"),
            }
        }
        let mut off = 0usize;
        let mut records = 0usize;
        while let Some((rec, next)) = parse_one(&bytes, off) {
            state.apply(rec);
            off = next;
            records += 1;
        }
        if off < bytes.len() {
            tracing::warn!(at = off, dropped = bytes.len() - off, "write-ahead log: cutting a torn or corrupt tail");
            file.set_len(off as u64)?;
            file.sync_all()?;
        }
        file.seek(SeekFrom::End(0))?;
        tracing::info!(records, bytes = off, ballot = state.ballot, accepted = state.accepted.len(), "write-ahead log recovered");
        let (stx, srx) = std::sync::mpsc::channel::<Record>();
        let snap_dir = dir.to_path_buf();
        std::thread::Builder::new().name("snapshot".into()).spawn(move || snapshot_thread(snap_dir, srx, fsync))?;
        let wal = Wal {
            dir: dir.to_path_buf(),
            snapshots: Some(stx),
            out: BufWriter::with_capacity(1 << 20, file),
            size: off as u64,
            compacted_size: off as u64,
            state: state.clone(),
            fsync,
        };
        Ok((wal, state))
    }

    /// Buffers records; they are durable after the next [`Wal::sync`].
    pub fn append(&mut self, records: Vec<Record>) -> std::io::Result<()> {
        for rec in records {
            if let Record::Snapshot { .. } = rec {
                self.state.apply(rec.clone());
                if let Some(tx) = &self.snapshots {
                    if tx.send(rec).is_err() {
                        return Err(std::io::Error::other("snapshot writer stopped"));
                    }
                }
                continue;
            }
            let body = bincode::serialize(&rec).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
            let len = u32::try_from(body.len()).map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "record too large"))?;
            self.out.write_all(&len.to_le_bytes())?;
            self.out.write_all(&crc32fast::hash(&body).to_le_bytes())?;
            self.out.write_all(&body)?;
            self.size += (HEADER + body.len()) as u64;
            self.state.apply(rec);
        }
        Ok(())
    }

    /// Writes out the buffer and makes everything appended so far durable.
    pub fn sync(&mut self) -> std::io::Result<()> {
        self.out.flush()?;
        if self.fsync {
            self.out.get_ref().sync_data()?;
        }
        if self.size > COMPACT_MIN && self.size > 4 * self.compacted_size {
            self.compact()?;
        }
        Ok(())
    }

    /// Rewrites the file with just the records that rebuild the state.
    pub fn compact(&mut self) -> std::io::Result<()> {
        let tmp = self.dir.join("wal.log.tmp");
        let mut w = BufWriter::new(File::create(&tmp)?);
        let mut size = 0u64;
        for rec in self.state.to_records() {
            let body = bincode::serialize(&rec).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
            w.write_all(&(body.len() as u32).to_le_bytes())?;
            w.write_all(&crc32fast::hash(&body).to_le_bytes())?;
            w.write_all(&body)?;
            size += (HEADER + body.len()) as u64;
        }
        w.flush()?;
        w.get_ref().sync_all()?;
        std::fs::rename(&tmp, self.dir.join(FILE))?;
        File::open(&self.dir)?.sync_all()?;
        let file = OpenOptions::new().append(true).open(self.dir.join(FILE))?;
        self.out = BufWriter::with_capacity(1 << 20, file);
        tracing::info!(from = self.size, to = size, "write-ahead log compacted");
        self.size = size;
        self.compacted_size = size;
        Ok(())
    }

    pub fn size(&self) -> u64 {
        self.size
    }
}

/// Writes snapshots as they come, skipping to the newest when several
/// are queued. A failure is logged and the log keeps every instance.
fn snapshot_thread(dir: PathBuf, rx: std::sync::mpsc::Receiver<Record>, fsync: bool) {
    while let Ok(mut rec) = rx.recv() {
        while let Ok(newer) = rx.try_recv() {
            rec = newer;
        }
        if let Err(e) = write_snapshot(&dir, &rec, fsync) {
            tracing::error!(error = %e, "writing snapshot.bin failed; the log still holds everything");
        }
    }
}

fn write_snapshot(dir: &Path, rec: &Record, fsync: bool) -> std::io::Result<()> {
    let body = bincode::serialize(rec).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    let len = u32::try_from(body.len()).map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "snapshot too large"))?;
    let tmp = dir.join("snapshot.bin.tmp");
    let mut w = BufWriter::new(File::create(&tmp)?);
    w.write_all(&len.to_le_bytes())?;
    w.write_all(&crc32fast::hash(&body).to_le_bytes())?;
    w.write_all(&body)?;
    w.flush()?;
    if fsync {
        w.get_ref().sync_all()?;
    }
    std::fs::rename(&tmp, dir.join(SNAPSHOT))?;
    if fsync {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// One record at `off`, and where the next starts; `None` at the end or at
/// the first torn or corrupt record.
fn parse_one(bytes: &[u8], off: usize) -> Option<(Record, usize)> {
    let header = bytes.get(off..off + HEADER)?;
    let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
    let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    if len > MAX_RECORD {
        return None;
    }
    let body = bytes.get(off + HEADER..off + HEADER + len)?;
    if crc32fast::hash(body) != crc {
        return None;
    }
    let rec = bincode::deserialize(body).ok()?;
    Some((rec, off + HEADER + len))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use stutter_core::{Snapshot, Value};

    use super::*;

    fn accept(slot: u64, ballot: u64) -> Record {
        Record::Accept { slot, ballot, value: Value::Noop }
    }

    #[test]
    fn records_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let (mut w, s) = Wal::open(dir.path(), true).unwrap();
        assert_eq!(s, DurableState::default());
        w.append(vec![Record::Ballot(257), accept(1, 257)]).unwrap();
        w.append(vec![accept(2, 257)]).unwrap();
        w.sync().unwrap();
        drop(w);
        let (_, s) = Wal::open(dir.path(), true).unwrap();
        assert_eq!(s.ballot, 257);
        assert_eq!(s.accepted.keys().copied().collect::<Vec<_>>(), vec![1, 2]);
    }

    #[test]
    fn torn_tail_is_cut_and_the_log_stays_usable() {
        let dir = tempfile::tempdir().unwrap();
        let (mut w, _) = Wal::open(dir.path(), true).unwrap();
        w.append(vec![Record::Ballot(1), accept(1, 1)]).unwrap();
        w.sync().unwrap();
        let good = w.size();
        w.append(vec![accept(2, 1)]).unwrap();
        w.sync().unwrap();
        drop(w);
        // Tear the last record in half, as a crash mid-write would.
        let path = dir.path().join(FILE);
        let len = std::fs::metadata(&path).unwrap().len();
        OpenOptions::new().write(true).open(&path).unwrap().set_len(len - 3).unwrap();
        let (mut w, s) = Wal::open(dir.path(), true).unwrap();
        assert_eq!(s.accepted.len(), 1);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), good);
        w.append(vec![accept(3, 1)]).unwrap();
        w.sync().unwrap();
        drop(w);
        let (_, s) = Wal::open(dir.path(), true).unwrap();
        assert_eq!(s.accepted.keys().copied().collect::<Vec<_>>(), vec![1, 3]);
    }

    #[test]
    fn corrupt_byte_stops_replay_there() {
        let dir = tempfile::tempdir().unwrap();
        let (mut w, _) = Wal::open(dir.path(), true).unwrap();
        w.append(vec![Record::Ballot(1), accept(1, 1), accept(2, 1)]).unwrap();
        w.sync().unwrap();
        drop(w);
        let path = dir.path().join(FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        let n = bytes.len();
        bytes[n - 2] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let (_, s) = Wal::open(dir.path(), true).unwrap();
        assert_eq!(s.ballot, 1);
        assert_eq!(s.accepted.len(), 1, "the corrupt record and everything after it is dropped");
    }

    #[test]
    fn snapshots_go_to_their_own_file_and_are_used_at_recovery() {
        let dir = tempfile::tempdir().unwrap();
        let (mut w, _) = Wal::open(dir.path(), true).unwrap();
        w.append(vec![Record::Ballot(3)]).unwrap();
        for slot in 1..=10 {
            w.append(vec![accept(slot, 3)]).unwrap();
        }
        let snap = Arc::new(Snapshot { last_executed: 6, ..Default::default() });
        w.append(vec![Record::Snapshot { trimmed: 6, snapshot: snap }]).unwrap();
        w.append(vec![accept(11, 3)]).unwrap();
        w.sync().unwrap();
        drop(w);
        // The snapshot thread finishes on its own: wait for the file.
        for _ in 0..200 {
            if dir.path().join(SNAPSHOT).exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let (_, s) = Wal::open(dir.path(), true).unwrap();
        assert_eq!(s.trimmed, 6);
        assert_eq!(s.snapshot.map(|s| s.last_executed), Some(6));
        assert_eq!(s.accepted.keys().copied().collect::<Vec<_>>(), (7..=11).collect::<Vec<_>>());
        // Without the snapshot file (lost in a crash), the log alone still
        // holds every instance.
        std::fs::remove_file(dir.path().join(SNAPSHOT)).unwrap();
        let (_, s) = Wal::open(dir.path(), true).unwrap();
        assert_eq!(s.trimmed, 0);
        assert_eq!(s.accepted.len(), 11);
    }

    #[test]
    fn compaction_keeps_the_state_and_drops_trimmed_instances() {
        let dir = tempfile::tempdir().unwrap();
        let (mut w, _) = Wal::open(dir.path(), true).unwrap();
        w.append(vec![Record::Ballot(5)]).unwrap();
        for slot in 1..=100 {
            w.append(vec![accept(slot, 5)]).unwrap();
        }
        let snap = Arc::new(Snapshot { last_executed: 90, ..Default::default() });
        w.append(vec![Record::Snapshot { trimmed: 90, snapshot: snap }]).unwrap();
        w.sync().unwrap();
        let before = w.size();
        w.compact().unwrap();
        assert!(w.size() < before);
        w.append(vec![accept(101, 5)]).unwrap();
        w.sync().unwrap();
        drop(w);
        let (_, s) = Wal::open(dir.path(), true).unwrap();
        assert_eq!(s.ballot, 5);
        assert_eq!(s.trimmed, 90);
        assert_eq!(s.snapshot.map(|s| s.last_executed), Some(90));
        assert_eq!(s.accepted.keys().copied().collect::<Vec<_>>(), (91..=101).collect::<Vec<_>>());
    }
}

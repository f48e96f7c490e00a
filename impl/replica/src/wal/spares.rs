//! Spare segments: prepared ahead (by a background thread in a real
//! process, inline under simulation), so that group commits overwrite
//! blocks that exist instead of growing a file.

use std::collections::VecDeque;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::format::segment_name;
use super::{background_priority, Sealed, MAX_RECYCLABLE};
use crate::platform::fs::{self, File, OpenOptions};

pub(super) enum Prep {
    /// Prepare the next spare segment.
    Spare,
    /// A segment no longer needed: recycle it or delete it.
    Retire(Sealed),
}

type Spare = std::io::Result<(u64, File)>;

/// Where the log asks for spares and hands retired segments: a thread
/// (real process) or the same work done at once (simulation, where a
/// thread would escape the simulated disk's host and scheduling).
pub(super) enum Spares {
    Thread {
        tx: std::sync::mpsc::Sender<Prep>,
        rx: std::sync::mpsc::Receiver<Spare>,
    },
    Inline {
        prep: Preparer,
        ready: VecDeque<Spare>,
    },
}

impl Spares {
    pub(super) fn start(prep: Preparer, thread: bool) -> std::io::Result<Spares> {
        if !thread {
            return Ok(Spares::Inline {
                prep,
                ready: VecDeque::new(),
            });
        }
        let (ptx, prx) = std::sync::mpsc::channel::<Prep>();
        let (sparetx, sparerx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("wal-prep".into())
            .spawn(move || preparer(prep, prx, sparetx))?;
        Ok(Spares::Thread {
            tx: ptx,
            rx: sparerx,
        })
    }

    pub(super) fn send(&mut self, msg: Prep) {
        match self {
            Spares::Thread { tx, .. } => {
                let _ = tx.send(msg);
            }
            Spares::Inline { prep, ready } => ready.extend(prep.handle(msg)),
        }
    }

    /// The next spare, in sequence order (asked for by an earlier `Spare`).
    pub(super) fn recv(&mut self) -> Spare {
        let stopped = || Err(super::other("segment preparer stopped"));
        match self {
            Spares::Thread { rx, .. } => rx.recv().unwrap_or_else(|_| stopped()),
            Spares::Inline { ready, .. } => ready.pop_front().unwrap_or_else(stopped),
        }
    }
}

/// Prepares spare segments in sequence order: a retired segment is renamed
/// (its stale records fail the CRC of their new sequence number),
/// otherwise a new one is zero-filled. Each is synced and its name made
/// durable before it is handed over.
pub(super) struct Preparer {
    pub(super) dir: PathBuf,
    pub(super) next_seq: u64,
    pub(super) segment_size: u64,
    pub(super) recyclable: Vec<PathBuf>,
}

impl Preparer {
    /// Handles one request; a `Spare` gives the spare (or the error).
    fn handle(&mut self, msg: Prep) -> Option<Spare> {
        match msg {
            Prep::Retire(s) => {
                if self.recyclable.len() < MAX_RECYCLABLE {
                    self.recyclable.push(s.path);
                } else if let Err(e) = fs::remove_file(&s.path) {
                    tracing::warn!(path = %s.path.display(), error = %e, "removing a retired segment failed");
                }
                None
            }
            Prep::Spare => {
                let started = std::time::Instant::now();
                let recycled = !self.recyclable.is_empty();
                let r = prepare(
                    &self.dir,
                    self.next_seq,
                    self.segment_size,
                    self.recyclable.pop(),
                );
                tracing::info!(
                    seq = self.next_seq,
                    recycled,
                    ms = started.elapsed().as_millis() as u64,
                    "spare segment ready"
                );
                self.next_seq += 1;
                Some(r)
            }
        }
    }
}

/// The preparer thread: keeps spare segments coming.
fn preparer(
    mut prep: Preparer,
    rx: std::sync::mpsc::Receiver<Prep>,
    tx: std::sync::mpsc::Sender<Spare>,
) {
    background_priority();
    while let Ok(msg) = rx.recv() {
        if let Some(r) = prep.handle(msg) {
            if tx.send(r).is_err() {
                return;
            }
        }
    }
}

fn prepare(dir: &Path, seq: u64, segment_size: u64, recycle: Option<PathBuf>) -> Spare {
    let path = dir.join(segment_name(seq));
    if let Some(old) = recycle {
        let len = fs::metadata(&old).map(|m| m.len()).unwrap_or(0);
        if len >= segment_size {
            fs::rename(&old, &path)?;
            fs::sync_dir(dir)?;
            let file = OpenOptions::new().read(true).write(true).open(&path)?;
            return Ok((seq, file));
        }
        let _ = fs::remove_file(&old);
    }
    let tmp = dir.join("wal-spare.tmp");
    let file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&tmp)?;
    let zeros = vec![0u8; (1 << 20).min(segment_size as usize)];
    let mut off = 0;
    while off < segment_size {
        file.write_all_at(&zeros, off)?;
        off += zeros.len() as u64;
        // In steps, so that the group commits of the live segment do not
        // queue behind one large flush.
        if off % (8 << 20) == 0 {
            file.sync_data()?;
        }
    }
    file.sync_all()?;
    drop(file);
    fs::rename(&tmp, &path)?;
    fs::sync_dir(dir)?;
    // Opened again under its final name: the same file on a real disk; a
    // simulated disk's handles follow names, not inodes.
    let file = OpenOptions::new().read(true).write(true).open(&path)?;
    Ok((seq, file))
}

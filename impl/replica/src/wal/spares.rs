//! Spare segments: prepared ahead by a background thread, so that group
//! commits overwrite blocks that exist instead of growing a file.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::format::segment_name;
use super::{background_priority, fsync_dir, Sealed, MAX_RECYCLABLE};

pub(super) enum Prep {
    /// Prepare the next spare segment.
    Spare,
    /// A segment no longer needed: recycle it or delete it.
    Retire(Sealed),
}

/// Keeps spare segments coming, in sequence order: a retired segment is
/// renamed (its stale records fail the CRC of their new sequence number),
/// otherwise a new one is zero-filled. Each is synced and its name made
/// durable before it is handed over.
pub(super) fn preparer(
    dir: PathBuf,
    mut next_seq: u64,
    segment_size: u64,
    rx: std::sync::mpsc::Receiver<Prep>,
    tx: std::sync::mpsc::Sender<std::io::Result<(u64, File)>>,
) {
    background_priority();
    let mut recyclable: Vec<PathBuf> = Vec::new();
    while let Ok(msg) = rx.recv() {
        match msg {
            Prep::Retire(s) => {
                if !s.legacy && recyclable.len() < MAX_RECYCLABLE {
                    recyclable.push(s.path);
                } else if let Err(e) = std::fs::remove_file(&s.path) {
                    tracing::warn!(path = %s.path.display(), error = %e, "removing a retired segment failed");
                }
            }
            Prep::Spare => {
                let started = std::time::Instant::now();
                let recycled = !recyclable.is_empty();
                let r = prepare(&dir, next_seq, segment_size, recyclable.pop());
                tracing::info!(seq = next_seq, recycled, ms = started.elapsed().as_millis() as u64, "spare segment ready");
                next_seq += 1;
                if tx.send(r).is_err() {
                    return;
                }
            }
        }
    }
}

fn prepare(dir: &Path, seq: u64, segment_size: u64, recycle: Option<PathBuf>) -> std::io::Result<(u64, File)> {
    let path = dir.join(segment_name(seq));
    if let Some(old) = recycle {
        let len = std::fs::metadata(&old).map(|m| m.len()).unwrap_or(0);
        if len >= segment_size {
            std::fs::rename(&old, &path)?;
            fsync_dir(dir)?;
            let file = OpenOptions::new().read(true).write(true).open(&path)?;
            return Ok((seq, file));
        }
        let _ = std::fs::remove_file(&old);
    }
    let tmp = dir.join("wal-spare.tmp");
    let file = OpenOptions::new().create(true).truncate(true).read(true).write(true).open(&tmp)?;
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
    std::fs::rename(&tmp, &path)?;
    fsync_dir(dir)?;
    Ok((seq, file))
}

//! The store's plain types: what `stat` shows, the durable tree as
//! `manifest.json` holds it, and what status and drop report.
//!
//! The durable tree lives in the backing directory, keyed by inode so that
//! a rename not yet synced cannot be confused with one that is:
//! `data/<ino>` holds a file's durable bytes, `manifest.json` every durable
//! directory's entries. Both are written with fsync (and the manifest by
//! rename), so the durable tree survives a real crash of this process too.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::fault::Fail;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    File,
    Dir,
}

/// What `stat` shows of an inode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attr {
    pub ino: u64,
    pub kind: Kind,
    pub size: u64,
    pub mode: u32,
    pub nlink: u32,
    pub mtime: SystemTime,
}

/// A durable inode: its kind, permissions and (for a directory) entries.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct DurableNode {
    pub kind: Kind,
    pub mode: u32,
    pub entries: BTreeMap<String, u64>,
}

/// `manifest.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Manifest {
    pub next_ino: u64,
    pub nodes: BTreeMap<u64, DurableNode>,
}

impl Manifest {
    /// Inodes the durable tree reaches from the root.
    pub fn reachable(&self) -> BTreeSet<u64> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![crate::store::ROOT];
        while let Some(ino) = todo.pop() {
            if seen.insert(ino) {
                if let Some(n) = self.nodes.get(&ino) {
                    todo.extend(n.entries.values().copied());
                }
            }
        }
        seen
    }
}

/// What [`Store::status`] reports.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Status {
    pub files: usize,
    pub dirs: usize,
    /// Bytes in dirty pages (lost by a drop).
    pub unsynced_bytes: u64,
    /// Directories whose entries differ from their durable ones.
    pub unsynced_dirs: usize,
    pub fail: Option<Fail>,
    pub drops: u64,
    pub failed_ops: u64,
}

/// What a drop did.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct DropReport {
    pub lost_bytes: u64,
    pub lost_dirs: usize,
    /// The torn write: inode, offset, bytes kept of it, its length.
    pub torn: Option<(u64, u64, u64, u64)>,
}

pub(crate) fn read_full(f: &File, buf: &mut [u8], at: u64) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let n = f.read_at(&mut buf[done..], at + done as u64)?;
        if n == 0 {
            break; // past the durable end: zeros
        }
        done += n;
    }
    Ok(())
}

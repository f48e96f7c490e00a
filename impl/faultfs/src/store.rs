//! The file system's state and its drop rule, without FUSE.
//!
//! Two trees. The *current* one is what processes see: every write,
//! creation, rename and removal lands there at once. The *durable* one is
//! what a power loss leaves: a file's bytes reach it when the file is
//! fsynced or fdatasynced, a directory's entries when the directory is
//! fsynced (as the strict POSIX reading and ALICE's and LazyFS's models
//! have it; ext4 often does more, a program must not count on it).
//! [`Store::drop_unsynced`] throws the current tree away and takes the
//! durable one: a power cut.
//!
//! The durable tree is in the backing directory (`types.rs`); unsynced
//! bytes are kept in memory as dirty pages over the durable file.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

pub use crate::fault::{Fail, FailMode};
use crate::fault::{Op, TornWrite};
use crate::types::{read_full, DurableNode, Manifest};
pub use crate::types::{Attr, DropReport, Kind, Status};

/// An error number (`libc::E*`) for the kernel.
pub type Errno = i32;
pub type Res<T> = Result<T, Errno>;

pub const ROOT: u64 = 1;
pub const PAGE: u64 = 4096;
const MANIFEST: &str = "manifest.json";

/// A current inode.
#[derive(Debug)]
struct Inode {
    kind: Kind,
    mode: u32,
    nlink: u32,
    mtime: SystemTime,
    entries: BTreeMap<String, u64>,
    size: u64,
    /// Bytes of `data/<ino>` from here on read as zeros (a truncation not
    /// yet synced).
    cut: u64,
    /// Pages written since the last sync, by page number.
    dirty: BTreeMap<u64, Box<[u8]>>,
}

impl Inode {
    fn new(kind: Kind, mode: u32, size: u64) -> Inode {
        Inode {
            kind,
            mode,
            nlink: 1,
            mtime: SystemTime::now(),
            entries: BTreeMap::new(),
            size,
            cut: size,
            dirty: BTreeMap::new(),
        }
    }
}

pub struct Store {
    backing: PathBuf,
    inodes: BTreeMap<u64, Inode>,
    durable: Manifest,
    fault: crate::fault::Faults,
    drops: u64,
}

fn io_errno(e: io::Error) -> Errno {
    e.raw_os_error().unwrap_or(libc::EIO)
}

impl Store {
    /// Opens the store in `backing` (created if absent; an empty directory
    /// is an empty file system).
    pub fn open(backing: &Path) -> io::Result<Store> {
        fs::create_dir_all(backing.join("data"))?;
        let durable = match fs::read(backing.join(MANIFEST)) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let mut nodes = BTreeMap::new();
                nodes.insert(
                    ROOT,
                    DurableNode {
                        kind: Kind::Dir,
                        mode: 0o755,
                        entries: BTreeMap::new(),
                    },
                );
                Manifest {
                    next_ino: ROOT + 1,
                    nodes,
                }
            }
            Err(e) => return Err(e),
        };
        let mut s = Store {
            backing: backing.to_path_buf(),
            inodes: BTreeMap::new(),
            durable,
            fault: Default::default(),
            drops: 0,
        };
        s.load_durable()?;
        Ok(s)
    }

    fn data_path(&self, ino: u64) -> PathBuf {
        self.backing.join("data").join(ino.to_string())
    }

    fn durable_len(&self, ino: u64) -> u64 {
        fs::metadata(self.data_path(ino))
            .map(|m| m.len())
            .unwrap_or(0)
    }

    /// Makes the current tree the durable one, and forgets data files no
    /// durable entry reaches.
    fn load_durable(&mut self) -> io::Result<()> {
        let reachable = self.durable.reachable();
        self.inodes.clear();
        for &ino in &reachable {
            let Some(d) = self.durable.nodes.get(&ino) else {
                continue;
            };
            let size = if d.kind == Kind::File {
                self.durable_len(ino)
            } else {
                0
            };
            let mut node = Inode::new(d.kind, d.mode, size);
            node.entries = d.entries.clone();
            node.nlink = 0;
            self.inodes.insert(ino, node);
        }
        self.inodes
            .entry(ROOT)
            .or_insert_with(|| Inode::new(Kind::Dir, 0o755, 0));
        let links: Vec<u64> = self
            .inodes
            .values()
            .flat_map(|n| n.entries.values().copied())
            .collect();
        for ino in links {
            if let Some(n) = self.inodes.get_mut(&ino) {
                n.nlink += 1;
            }
        }
        if let Some(r) = self.inodes.get_mut(&ROOT) {
            r.nlink = r.nlink.max(1);
        }
        self.durable.nodes.retain(|ino, _| reachable.contains(ino));
        let mut highest = self.durable.next_ino;
        for entry in fs::read_dir(self.backing.join("data"))? {
            let entry = entry?;
            let ino = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u64>().ok());
            match ino {
                Some(i) if reachable.contains(&i) => {}
                Some(i) => {
                    highest = highest.max(i + 1);
                    fs::remove_file(entry.path())?;
                }
                None => {}
            }
        }
        // Inode numbers are never reused within a store: the kernel may
        // still hold an old one.
        self.durable.next_ino = highest;
        Ok(())
    }

    fn node(&self, ino: u64) -> Res<&Inode> {
        self.inodes.get(&ino).ok_or(libc::ENOENT)
    }

    fn node_mut(&mut self, ino: u64) -> Res<&mut Inode> {
        self.inodes.get_mut(&ino).ok_or(libc::ENOENT)
    }

    fn dir(&self, ino: u64) -> Res<&Inode> {
        let n = self.node(ino)?;
        if n.kind != Kind::Dir {
            return Err(libc::ENOTDIR);
        }
        Ok(n)
    }

    pub fn getattr(&self, ino: u64) -> Res<Attr> {
        let n = self.node(ino)?;
        Ok(Attr {
            ino,
            kind: n.kind,
            size: n.size,
            mode: n.mode,
            nlink: n.nlink,
            mtime: n.mtime,
        })
    }

    pub fn lookup(&self, parent: u64, name: &str) -> Res<Attr> {
        let ino = *self.dir(parent)?.entries.get(name).ok_or(libc::ENOENT)?;
        self.getattr(ino)
    }

    pub fn readdir(&self, ino: u64) -> Res<Vec<(u64, Kind, String)>> {
        let d = self.dir(ino)?;
        Ok(d.entries
            .iter()
            .filter_map(|(name, &i)| self.inodes.get(&i).map(|n| (i, n.kind, name.clone())))
            .collect())
    }

    /// Creates a file or directory `name` in `parent` (not durable until
    /// `parent` is fsynced).
    pub fn create(&mut self, parent: u64, name: &str, kind: Kind, mode: u32) -> Res<Attr> {
        self.fault.check(Op::Create)?;
        if name.is_empty() || name.contains('/') {
            return Err(libc::EINVAL);
        }
        if self.dir(parent)?.entries.contains_key(name) {
            return Err(libc::EEXIST);
        }
        let ino = self.durable.next_ino;
        self.durable.next_ino += 1;
        self.inodes.insert(ino, Inode::new(kind, mode & 0o7777, 0));
        // Nothing durable of a new inode may linger from before.
        let _ = fs::remove_file(self.data_path(ino));
        let p = self.node_mut(parent)?;
        p.entries.insert(name.to_string(), ino);
        p.mtime = SystemTime::now();
        self.getattr(ino)
    }

    /// Removes the entry `name` (a file, or with `dir` an empty directory).
    pub fn remove(&mut self, parent: u64, name: &str, dir: bool) -> Res<()> {
        self.fault.check(Op::Remove)?;
        let ino = *self.dir(parent)?.entries.get(name).ok_or(libc::ENOENT)?;
        let n = self.node(ino)?;
        match (dir, n.kind) {
            (true, Kind::File) => return Err(libc::ENOTDIR),
            (false, Kind::Dir) => return Err(libc::EISDIR),
            (true, Kind::Dir) if !n.entries.is_empty() => return Err(libc::ENOTEMPTY),
            _ => {}
        }
        self.node_mut(parent)?.entries.remove(name);
        self.unlinked(ino);
        Ok(())
    }

    /// One fewer name for `ino`. An inode with no name left is forgotten
    /// from the current tree (open handles to it then fail; the replica
    /// never reads a file it removed) unless the durable tree still names
    /// it, whose bytes then stay until that directory is synced.
    fn unlinked(&mut self, ino: u64) {
        if let Some(n) = self.inodes.get_mut(&ino) {
            n.nlink = n.nlink.saturating_sub(1);
            if n.nlink == 0 {
                self.inodes.remove(&ino);
            }
        }
    }

    pub fn rename(&mut self, parent: u64, name: &str, newparent: u64, newname: &str) -> Res<()> {
        self.fault.check(Op::Create)?;
        let ino = *self.dir(parent)?.entries.get(name).ok_or(libc::ENOENT)?;
        self.dir(newparent)?;
        if newname.is_empty() || newname.contains('/') {
            return Err(libc::EINVAL);
        }
        if parent == newparent && name == newname {
            return Ok(());
        }
        if let Some(&old) = self.dir(newparent)?.entries.get(newname) {
            let (a, b) = (self.node(ino)?.kind, self.node(old)?.kind);
            match (a, b) {
                (Kind::Dir, Kind::File) => return Err(libc::ENOTDIR),
                (Kind::File, Kind::Dir) => return Err(libc::EISDIR),
                (Kind::Dir, Kind::Dir) if !self.node(old)?.entries.is_empty() => {
                    return Err(libc::ENOTEMPTY)
                }
                _ => {}
            }
            self.unlinked(old);
        }
        self.node_mut(parent)?.entries.remove(name);
        let np = self.node_mut(newparent)?;
        np.entries.insert(newname.to_string(), ino);
        np.mtime = SystemTime::now();
        Ok(())
    }

    /// Sets the mode and/or the size (truncation or extension).
    pub fn setattr(&mut self, ino: u64, mode: Option<u32>, size: Option<u64>) -> Res<Attr> {
        if size.is_some() {
            self.fault.check(Op::Write)?;
        }
        self.resize(ino, mode, size)?;
        self.getattr(ino)
    }

    fn resize(&mut self, ino: u64, mode: Option<u32>, size: Option<u64>) -> Res<()> {
        let n = self.node_mut(ino)?;
        if let Some(m) = mode {
            n.mode = m & 0o7777;
        }
        if let Some(size) = size {
            if n.kind != Kind::File {
                return Err(libc::EISDIR);
            }
            if size < n.size {
                // Dirty bytes past the new end are gone; the last page
                // keeps only what is below it.
                let keep = size.div_ceil(PAGE);
                n.dirty.split_off(&keep);
                if size % PAGE != 0 {
                    if let Some(p) = n.dirty.get_mut(&(size / PAGE)) {
                        p[(size % PAGE) as usize..].fill(0);
                    }
                }
                n.cut = n.cut.min(size);
            }
            n.size = size;
            n.mtime = SystemTime::now();
        }
        Ok(())
    }

    /// The bytes `[off, off + len)` of `ino` as it stands (dirty pages over
    /// the durable file, zeros past what either holds).
    pub fn read(&self, ino: u64, off: u64, len: u64) -> Res<Vec<u8>> {
        let n = self.node(ino)?;
        if n.kind != Kind::File {
            return Err(libc::EISDIR);
        }
        let end = (off.saturating_add(len)).min(n.size);
        if off >= end {
            return Ok(Vec::new());
        }
        let mut out = vec![0u8; (end - off) as usize];
        let backing = File::open(self.data_path(ino)).ok();
        let mut at = off;
        while at < end {
            let page = at / PAGE;
            let in_page = at % PAGE;
            let take = (PAGE - in_page).min(end - at);
            let dst = &mut out[(at - off) as usize..(at - off + take) as usize];
            if let Some(p) = n.dirty.get(&page) {
                dst.copy_from_slice(&p[in_page as usize..(in_page + take) as usize]);
            } else if let Some(f) = &backing {
                // Only below the cut: a synced truncation has not happened
                // to the durable file yet.
                let valid = n.cut.saturating_sub(at).min(take) as usize;
                if valid > 0 {
                    read_full(f, &mut dst[..valid], at).map_err(io_errno)?;
                }
            }
            at += take;
        }
        Ok(out)
    }

    /// Writes `data` at `off` into dirty pages (not durable until fsync).
    pub fn write(&mut self, ino: u64, off: u64, data: &[u8]) -> Res<usize> {
        self.fault.check(Op::Write)?;
        let mut before = self.read(ino, off, data.len() as u64)?;
        before.resize(data.len(), 0);
        let old_size = self.node(ino)?.size;
        self.write_pages(ino, off, data)?;
        self.fault.last_write = Some(TornWrite {
            ino,
            off,
            len: data.len() as u64,
            before,
            old_size,
        });
        Ok(data.len())
    }

    fn write_pages(&mut self, ino: u64, off: u64, data: &[u8]) -> Res<()> {
        if self.node(ino)?.kind != Kind::File {
            return Err(libc::EISDIR);
        }
        let end = off + data.len() as u64;
        // Pages the write touches, filled from what stands now.
        let mut fill = Vec::new();
        for page in off / PAGE..end.div_ceil(PAGE) {
            if !self.node(ino)?.dirty.contains_key(&page) {
                fill.push((page, self.read(ino, page * PAGE, PAGE)?));
            }
        }
        let n = self.node_mut(ino)?;
        for (page, bytes) in fill {
            let mut p = vec![0u8; PAGE as usize].into_boxed_slice();
            p[..bytes.len()].copy_from_slice(&bytes);
            n.dirty.insert(page, p);
        }
        let mut at = off;
        while at < end {
            let page = at / PAGE;
            let in_page = (at % PAGE) as usize;
            let take = ((PAGE as usize) - in_page).min((end - at) as usize);
            let src = &data[(at - off) as usize..(at - off) as usize + take];
            if let Some(p) = n.dirty.get_mut(&page) {
                p[in_page..in_page + take].copy_from_slice(src);
            }
            at += take as u64;
        }
        n.size = n.size.max(end);
        n.mtime = SystemTime::now();
        Ok(())
    }

    /// fsync/fdatasync of a file: its bytes and size become durable.
    pub fn fsync(&mut self, ino: u64) -> Res<()> {
        self.fault.check(Op::Sync)?;
        if self.node(ino)?.kind == Kind::Dir {
            return self.fsyncdir(ino);
        }
        self.flush_file(ino).map_err(io_errno)?;
        if self.fault.last_write.as_ref().map(|w| w.ino) == Some(ino) {
            self.fault.last_write = None;
        }
        Ok(())
    }

    fn flush_file(&mut self, ino: u64) -> io::Result<()> {
        let path = self.data_path(ino);
        let new = !path.exists();
        let n = self.inodes.get(&ino).ok_or(io::ErrorKind::NotFound)?;
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)?;
        if f.metadata()?.len() > n.cut {
            f.set_len(n.cut)?;
        }
        for (&page, bytes) in &n.dirty {
            let at = page * PAGE;
            if at >= n.size {
                break;
            }
            let len = (n.size - at).min(PAGE) as usize;
            f.write_all_at(&bytes[..len], at)?;
        }
        f.set_len(n.size)?;
        f.sync_all()?;
        if new {
            File::open(self.backing.join("data"))?.sync_all()?;
        }
        let n = self.inodes.get_mut(&ino).ok_or(io::ErrorKind::NotFound)?;
        n.dirty.clear();
        n.cut = n.size;
        Ok(())
    }

    /// fsync of a directory: its current entries become its durable ones.
    /// A child directory new to the durable tree comes with no entries of
    /// its own until it is synced itself.
    pub fn fsyncdir(&mut self, ino: u64) -> Res<()> {
        self.fault.check(Op::Sync)?;
        let d = self.dir(ino)?;
        let entries = d.entries.clone();
        let mode = d.mode;
        let mut add = Vec::new();
        for &child in entries.values() {
            if !self.durable.nodes.contains_key(&child) {
                let c = self.node(child)?;
                add.push((child, c.kind, c.mode));
            }
        }
        let mut next = self.durable.clone();
        next.nodes
            .entry(ino)
            .or_insert(DurableNode {
                kind: Kind::Dir,
                mode,
                entries: BTreeMap::new(),
            })
            .entries = entries;
        for (child, kind, mode) in add {
            next.nodes.insert(
                child,
                DurableNode {
                    kind,
                    mode,
                    entries: BTreeMap::new(),
                },
            );
        }
        self.write_manifest(&next).map_err(io_errno)?;
        self.durable = next;
        // Files that neither tree names any more: their bytes can go.
        let reachable = self.durable.reachable();
        let gone: Vec<u64> = self
            .durable
            .nodes
            .keys()
            .copied()
            .filter(|i| !reachable.contains(i) && !self.inodes.contains_key(i))
            .collect();
        for i in gone {
            self.durable.nodes.remove(&i);
            let _ = fs::remove_file(self.data_path(i));
        }
        Ok(())
    }

    fn write_manifest(&self, m: &Manifest) -> io::Result<()> {
        let tmp = self.backing.join("manifest.json.tmp");
        let bytes = serde_json::to_vec(m).map_err(io::Error::other)?;
        let f = File::create(&tmp)?;
        f.write_all_at(&bytes, 0)?;
        f.sync_all()?;
        fs::rename(&tmp, self.backing.join(MANIFEST))?;
        File::open(&self.backing)?.sync_all()
    }

    /// A power cut: every byte, creation, rename and removal not yet
    /// synced is lost. With `torn = Some(seed)` the last write, if not yet
    /// synced, reaches the disk in part: its file keeps the writes before
    /// it and a prefix of it cut at a byte chosen by `seed` (a disk that
    /// wrote the file's pages in order and lost power mid-write).
    pub fn drop_unsynced(&mut self, torn: Option<u64>) -> io::Result<DropReport> {
        let status = self.status();
        let mut report = DropReport {
            lost_bytes: status.unsynced_bytes,
            lost_dirs: status.unsynced_dirs,
            torn: None,
        };
        if let (Some(seed), Some(w)) = (torn, self.fault.last_write.take()) {
            if w.len > 1 && self.inodes.contains_key(&w.ino) {
                let keep = 1 + crate::fault::mix(seed) % (w.len - 1);
                // Undo the write's bytes past the cut, then sync the rest.
                let at = w.off + keep;
                let undo = w.before[keep as usize..].to_vec();
                let size = self.inodes[&w.ino].size;
                let new_size = w.old_size.max(at).min(size);
                self.write_pages(w.ino, at, &undo)
                    .and_then(|_| self.resize(w.ino, None, Some(new_size)))
                    .map_err(io::Error::from_raw_os_error)?;
                self.flush_file(w.ino)?;
                report.torn = Some((w.ino, w.off, keep, w.len));
            }
        }
        self.fault.last_write = None;
        self.load_durable()?;
        self.drops += 1;
        Ok(report)
    }

    pub fn set_fail(&mut self, fail: Option<Fail>) {
        self.fault.fail = fail;
    }

    pub fn status(&self) -> Status {
        let mut s = Status {
            fail: self.fault.fail.clone(),
            drops: self.drops,
            failed_ops: self.fault.failed_ops,
            ..Default::default()
        };
        for (ino, n) in &self.inodes {
            match n.kind {
                Kind::File => {
                    s.files += 1;
                    s.unsynced_bytes += n.dirty.len() as u64 * PAGE;
                }
                Kind::Dir => {
                    s.dirs += 1;
                    let durable = self.durable.nodes.get(ino).map(|d| &d.entries);
                    if durable != Some(&n.entries) {
                        s.unsynced_dirs += 1;
                    }
                }
            }
        }
        s
    }
}

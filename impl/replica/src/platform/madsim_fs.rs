//! The files of the durable state under madsim (`crate::platform::fs` with
//! the `madsim` feature): an in-memory disk with what a running process
//! sees apart from what survives a crash. A file's bytes become durable at
//! its `sync_all`/`sync_data`; a name (creation, rename, removal) at the
//! `sync_dir` of its directory. [`crash`] drops everything not durable
//! under a directory: the simulation calls it when it kills the node that
//! owns that directory (a machine's crash, not only its process's).
//! madsim's own file system is asynchronous and never loses unsynced data,
//! so it would not judge the order of the log's writes, syncs and replies.
//!
//! One disk per process, shared by concurrent simulations: each keeps its
//! files under a directory of its own and removes them with [`forget`].

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Default)]
struct Inode {
    /// What reads see.
    data: Vec<u8>,
    /// What a crash leaves.
    synced: Vec<u8>,
}

type Node = Arc<Mutex<Inode>>;

struct Disk {
    /// Directories (durable as soon as created: an operator's step or the
    /// log's own `create_dir_all` before anything is written).
    dirs: BTreeSet<PathBuf>,
    /// Names as the running process sees them.
    names: BTreeMap<PathBuf, Node>,
    /// Names as a crash leaves them.
    durable: BTreeMap<PathBuf, Node>,
}

static DISK: Mutex<Disk> = Mutex::new(Disk {
    dirs: BTreeSet::new(),
    names: BTreeMap::new(),
    durable: BTreeMap::new(),
});

fn disk() -> MutexGuard<'static, Disk> {
    DISK.lock().unwrap_or_else(|p| p.into_inner())
}

fn inode(n: &Node) -> MutexGuard<'_, Inode> {
    n.lock().unwrap_or_else(|p| p.into_inner())
}

fn not_found(p: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: no such file or directory", p.display()),
    )
}

/// A crash of the machine whose files live under `dir`: names not synced
/// into their directory vanish (or come back, if removed or renamed since),
/// and every file keeps only its synced bytes.
pub fn crash(dir: &Path) {
    let mut d = disk();
    d.names.retain(|p, _| !p.starts_with(dir));
    let left: Vec<(PathBuf, Node)> = d
        .durable
        .iter()
        .filter(|(p, _)| p.starts_with(dir))
        .map(|(p, n)| (p.clone(), n.clone()))
        .collect();
    for (p, n) in left {
        {
            let mut i = inode(&n);
            i.data = i.synced.clone();
        }
        d.names.insert(p, n);
    }
}

/// Removes everything under `dir` (a simulation's end).
pub fn forget(dir: &Path) {
    let mut d = disk();
    d.names.retain(|p, _| !p.starts_with(dir));
    d.durable.retain(|p, _| !p.starts_with(dir));
    d.dirs.retain(|p| !p.starts_with(dir));
}

pub fn create_dir_all(dir: impl AsRef<Path>) -> io::Result<()> {
    let mut d = disk();
    for a in dir.as_ref().ancestors() {
        d.dirs.insert(a.to_path_buf());
    }
    Ok(())
}

/// Makes the names in `dir` durable as they are now.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    let mut d = disk();
    if !d.dirs.contains(dir) {
        return Err(not_found(dir));
    }
    let now: Vec<(PathBuf, Node)> = d
        .names
        .iter()
        .filter(|(p, _)| p.parent() == Some(dir))
        .map(|(p, n)| (p.clone(), n.clone()))
        .collect();
    d.durable.retain(|p, _| p.parent() != Some(dir));
    d.durable.extend(now);
    Ok(())
}

pub struct Metadata {
    len: u64,
    dir: bool,
}

impl Metadata {
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn is_dir(&self) -> bool {
        self.dir
    }

    pub fn is_file(&self) -> bool {
        !self.dir
    }
}

pub fn metadata(p: impl AsRef<Path>) -> io::Result<Metadata> {
    let p = p.as_ref();
    let d = disk();
    if let Some(n) = d.names.get(p) {
        return Ok(Metadata {
            len: inode(n).data.len() as u64,
            dir: false,
        });
    }
    if d.dirs.contains(p) {
        return Ok(Metadata { len: 0, dir: true });
    }
    Err(not_found(p))
}

pub fn read(p: impl AsRef<Path>) -> io::Result<Vec<u8>> {
    let p = p.as_ref();
    let d = disk();
    d.names
        .get(p)
        .map(|n| inode(n).data.clone())
        .ok_or_else(|| not_found(p))
}

pub struct DirEntry(PathBuf);

impl DirEntry {
    pub fn path(&self) -> PathBuf {
        self.0.clone()
    }

    pub fn file_name(&self) -> OsString {
        self.0
            .file_name()
            .map(|n| n.to_os_string())
            .unwrap_or_default()
    }
}

/// The files of `dir`, in name order.
pub fn read_dir(dir: impl AsRef<Path>) -> io::Result<std::vec::IntoIter<io::Result<DirEntry>>> {
    let dir = dir.as_ref();
    let d = disk();
    if !d.dirs.contains(dir) {
        return Err(not_found(dir));
    }
    let entries: Vec<io::Result<DirEntry>> = d
        .names
        .keys()
        .filter(|p| p.parent() == Some(dir))
        .map(|p| Ok(DirEntry(p.clone())))
        .collect();
    Ok(entries.into_iter())
}

pub fn remove_file(p: impl AsRef<Path>) -> io::Result<()> {
    let p = p.as_ref();
    disk()
        .names
        .remove(p)
        .map(|_| ())
        .ok_or_else(|| not_found(p))
}

pub fn rename(from: impl AsRef<Path>, to: impl AsRef<Path>) -> io::Result<()> {
    let (from, to) = (from.as_ref(), to.as_ref());
    let mut d = disk();
    let n = d.names.remove(from).ok_or_else(|| not_found(from))?;
    d.names.insert(to.to_path_buf(), n);
    Ok(())
}

#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    read: bool,
    write: bool,
    create: bool,
    truncate: bool,
}

impl OpenOptions {
    pub fn new() -> OpenOptions {
        OpenOptions::default()
    }

    pub fn read(&mut self, v: bool) -> &mut Self {
        self.read = v;
        self
    }

    pub fn write(&mut self, v: bool) -> &mut Self {
        self.write = v;
        self
    }

    pub fn create(&mut self, v: bool) -> &mut Self {
        self.create = v;
        self
    }

    pub fn truncate(&mut self, v: bool) -> &mut Self {
        self.truncate = v;
        self
    }

    pub fn open(&self, p: impl AsRef<Path>) -> io::Result<File> {
        let p = p.as_ref();
        let mut d = disk();
        let node = match d.names.get(p) {
            Some(n) => {
                if self.truncate && self.write {
                    inode(n).data.clear();
                }
                n.clone()
            }
            None if self.create && self.write => {
                if !p.parent().is_some_and(|dir| d.dirs.contains(dir)) {
                    return Err(not_found(p));
                }
                let n = Node::default();
                d.names.insert(p.to_path_buf(), n.clone());
                n
            }
            None => return Err(not_found(p)),
        };
        Ok(File {
            node,
            pos: 0,
            write: self.write,
        })
    }
}

/// An open file: its inode (a rename or removal does not affect it) and a
/// position for `Read`/`Write`.
pub struct File {
    node: Node,
    pos: u64,
    write: bool,
}

fn read_only() -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        "file not opened for writing",
    )
}

impl File {
    pub fn create(p: impl AsRef<Path>) -> io::Result<File> {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(p)
    }

    pub fn open(p: impl AsRef<Path>) -> io::Result<File> {
        OpenOptions::new().read(true).open(p)
    }

    pub fn sync_all(&self) -> io::Result<()> {
        let mut i = inode(&self.node);
        i.synced = i.data.clone();
        Ok(())
    }

    pub fn sync_data(&self) -> io::Result<()> {
        self.sync_all()
    }

    pub fn metadata(&self) -> io::Result<Metadata> {
        Ok(Metadata {
            len: inode(&self.node).data.len() as u64,
            dir: false,
        })
    }

    pub fn set_len(&self, len: u64) -> io::Result<()> {
        if !self.write {
            return Err(read_only());
        }
        inode(&self.node).data.resize(len as usize, 0);
        Ok(())
    }

    fn write_at_pos(&self, buf: &[u8], off: u64) -> io::Result<usize> {
        if !self.write {
            return Err(read_only());
        }
        let mut i = inode(&self.node);
        let (off, end) = (off as usize, off as usize + buf.len());
        if i.data.len() < end {
            i.data.resize(end, 0);
        }
        i.data[off..end].copy_from_slice(buf);
        Ok(buf.len())
    }

    fn read_at_pos(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        let i = inode(&self.node);
        let from = (off as usize).min(i.data.len());
        let n = buf.len().min(i.data.len() - from);
        buf[..n].copy_from_slice(&i.data[from..from + n]);
        Ok(n)
    }
}

impl std::os::unix::fs::FileExt for File {
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        self.read_at_pos(buf, off)
    }

    fn write_at(&self, buf: &[u8], off: u64) -> io::Result<usize> {
        self.write_at_pos(buf, off)
    }
}

impl io::Write for File {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.write_at_pos(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl io::Read for File {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.read_at_pos(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

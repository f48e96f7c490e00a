//! The store served to the kernel through FUSE (`fuser`, mounted with
//! Debian's `fusermount3`). Every request locks the store, so the control
//! socket's commands fall between two file operations, never inside one.
//!
//! Nothing is cached by the kernel: attributes and entries have a zero
//! time to live and files are opened with direct I/O, so after a drop no
//! process can see a byte or a name the drop took away, and every write
//! reaches the store as the program issued it (the torn write is a write
//! the program made).

use std::ffi::OsStr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, UNIX_EPOCH};

use fuser::{
    FileAttr, FileType, Filesystem, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow,
};

use crate::store::{Attr, Kind, Store, PAGE};

const TTL: Duration = Duration::ZERO;
const FOPEN_DIRECT_IO: u32 = 1;

pub struct FaultFs {
    pub store: Arc<Mutex<Store>>,
    /// How long an fsync takes before it makes anything durable (a
    /// disk's flush). The store is not locked meanwhile, so a power cut
    /// can fall during a sync and take what it was syncing. Without it a
    /// drop only falls between two operations, and the only window in
    /// which acknowledged-but-unsynced data exists is the few
    /// microseconds between a program's write and its fsync.
    pub sync_latency: Duration,
}

impl FaultFs {
    fn sync_wait(&self) {
        if !self.sync_latency.is_zero() {
            std::thread::sleep(self.sync_latency);
        }
    }

    fn store(&self) -> MutexGuard<'_, Store> {
        // A panic while holding the lock is a bug of this crate; the state
        // is still the best there is.
        self.store.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: a.ino,
        size: a.size,
        blocks: a.size.div_ceil(512),
        atime: a.mtime,
        mtime: a.mtime,
        ctime: a.mtime,
        crtime: UNIX_EPOCH,
        kind: match a.kind {
            Kind::File => FileType::RegularFile,
            Kind::Dir => FileType::Directory,
        },
        perm: a.mode as u16,
        nlink: a.nlink,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: PAGE as u32,
        flags: 0,
    }
}

fn name(n: &OsStr) -> Result<&str, i32> {
    n.to_str().ok_or(libc::EINVAL)
}

impl Filesystem for FaultFs {
    fn lookup(&mut self, _req: &Request<'_>, parent: u64, n: &OsStr, reply: ReplyEntry) {
        match name(n).and_then(|n| self.store().lookup(parent, n)) {
            Ok(a) => reply.entry(&TTL, &attr(&a), 0),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&mut self, _req: &Request<'_>, ino: u64, _fh: Option<u64>, reply: ReplyAttr) {
        match self.store().getattr(ino) {
            Ok(a) => reply.attr(&TTL, &attr(&a)),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<std::time::SystemTime>,
        _fh: Option<u64>,
        _crtime: Option<std::time::SystemTime>,
        _chgtime: Option<std::time::SystemTime>,
        _bkuptime: Option<std::time::SystemTime>,
        _flags: Option<u32>,
        reply: ReplyAttr,
    ) {
        match self.store().setattr(ino, mode, size) {
            Ok(a) => reply.attr(&TTL, &attr(&a)),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        n: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let r = name(n).and_then(|n| self.store().create(parent, n, Kind::Dir, mode & !umask));
        match r {
            Ok(a) => reply.entry(&TTL, &attr(&a), 0),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        n: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        if mode & libc::S_IFMT != libc::S_IFREG {
            return reply.error(libc::EPERM);
        }
        let r = name(n).and_then(|n| self.store().create(parent, n, Kind::File, mode & !umask));
        match r {
            Ok(a) => reply.entry(&TTL, &attr(&a), 0),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        n: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let r = name(n).and_then(|n| self.store().create(parent, n, Kind::File, mode & !umask));
        match r {
            Ok(a) => reply.created(&TTL, &attr(&a), 0, 0, FOPEN_DIRECT_IO),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&mut self, _req: &Request<'_>, parent: u64, n: &OsStr, reply: ReplyEmpty) {
        match name(n).and_then(|n| self.store().remove(parent, n, false)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&mut self, _req: &Request<'_>, parent: u64, n: &OsStr, reply: ReplyEmpty) {
        match name(n).and_then(|n| self.store().remove(parent, n, true)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rename(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        n: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
        reply: ReplyEmpty,
    ) {
        if flags != 0 {
            return reply.error(libc::EINVAL); // RENAME_EXCHANGE / NOREPLACE: not needed
        }
        let r = name(n).and_then(|n| {
            let nn = name(newname)?;
            self.store().rename(parent, n, newparent, nn)
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn open(&mut self, _req: &Request<'_>, ino: u64, _flags: i32, reply: ReplyOpen) {
        match self.store().getattr(ino) {
            Ok(_) => reply.opened(0, FOPEN_DIRECT_IO),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        size: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyData,
    ) {
        match self.store().read(ino, offset.max(0) as u64, size as u64) {
            Ok(d) => reply.data(&d),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        data: &[u8],
        _write_flags: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyWrite,
    ) {
        match self.store().write(ino, offset.max(0) as u64, data) {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(e),
        }
    }

    fn flush(&mut self, _req: &Request<'_>, _ino: u64, _fh: u64, _lo: u64, reply: ReplyEmpty) {
        reply.ok(); // close(2) syncs nothing
    }

    fn fsync(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.sync_wait();
        match self.store().fsync(ino) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        mut reply: ReplyDirectory,
    ) {
        let entries = match self.store().readdir(ino) {
            Ok(e) => e,
            Err(e) => return reply.error(e),
        };
        let dots = [
            (ino, Kind::Dir, ".".to_string()),
            (ino, Kind::Dir, "..".to_string()),
        ];
        let all = dots.into_iter().chain(entries);
        for (i, (child, kind, n)) in all.enumerate().skip(offset.max(0) as usize) {
            let t = match kind {
                Kind::File => FileType::RegularFile,
                Kind::Dir => FileType::Directory,
            };
            if reply.add(child, (i + 1) as i64, t, n) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(&mut self, _req: &Request<'_>, ino: u64, _fh: u64, _ds: bool, reply: ReplyEmpty) {
        self.sync_wait();
        match self.store().fsyncdir(ino) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn statfs(&mut self, _req: &Request<'_>, _ino: u64, reply: ReplyStatfs) {
        // A large file system; a full one while ENOSPC is on.
        let full =
            matches!(self.store().status().fail, Some(f) if f.mode == crate::FailMode::Enospc);
        let free = if full { 0 } else { 1 << 28 };
        reply.statfs(
            1 << 28,
            free,
            free,
            1 << 20,
            1 << 20,
            PAGE as u32,
            255,
            PAGE as u32,
        );
    }

    fn access(&mut self, _req: &Request<'_>, ino: u64, _mask: i32, reply: ReplyEmpty) {
        match self.store().getattr(ino) {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn fallocate(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        length: i64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        if mode != 0 {
            return reply.error(libc::EOPNOTSUPP);
        }
        let mut s = self.store();
        let end = (offset.max(0) + length.max(0)) as u64;
        let r = s.getattr(ino).and_then(|a| {
            if end > a.size {
                s.setattr(ino, None, Some(end)).map(|_| ())
            } else {
                Ok(())
            }
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}

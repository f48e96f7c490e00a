//! faultfs: a FUSE file system for power-loss and full-disk tests of real
//! processes. Writes land in memory; fsync/fdatasync makes a file's bytes
//! durable, fsync of a directory its entries; on command everything else
//! is dropped (a power cut), optionally with the last write torn, and
//! writes fail with ENOSPC or EIO. See docs/replica-hardening.md, "faultfs".

pub mod control;
pub mod fault;
pub mod fuse;
pub mod store;
pub mod types;

pub use fault::{Fail, FailMode};
pub use store::{DropReport, Status, Store};

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const OPTIONS: [fuser::MountOption; 2] = [
    fuser::MountOption::AllowOther,
    fuser::MountOption::AutoUnmount,
];

fn options() -> Vec<fuser::MountOption> {
    let mut o = vec![fuser::MountOption::FSName("faultfs".into())];
    o.extend(OPTIONS);
    o
}

/// Mounts the store in `backing` at `mountpoint`, serves the control
/// socket `socket`, and returns once the file system is unmounted. Each
/// fsync takes `sync_latency` before it makes anything durable.
pub fn serve(
    backing: &Path,
    mountpoint: &Path,
    socket: &Path,
    sync_latency: Duration,
) -> std::io::Result<()> {
    let store = Arc::new(Mutex::new(Store::open(backing)?));
    let fs = fuse::FaultFs {
        store: store.clone(),
        sync_latency,
    };
    let mut session = fuser::Session::new(fs, mountpoint, &options())?;
    if let Some(dir) = socket.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let _ = std::fs::remove_file(socket);
    let listener = std::os::unix::net::UnixListener::bind(socket)?;
    control::spawn_server(listener, store);
    let r = session.run();
    let _ = std::fs::remove_file(socket);
    r
}

/// Mounts the store in `backing` at `mountpoint`, served by a thread of
/// this process, for tests that command the store directly: dropping the
/// session unmounts it.
pub fn mount_in_process(
    backing: &Path,
    mountpoint: &Path,
) -> std::io::Result<(Arc<Mutex<Store>>, fuser::BackgroundSession)> {
    let store = Arc::new(Mutex::new(Store::open(backing)?));
    let fs = fuse::FaultFs {
        store: store.clone(),
        sync_latency: Duration::ZERO,
    };
    let session = fuser::spawn_mount2(fs, mountpoint, &options())?;
    Ok((store, session))
}

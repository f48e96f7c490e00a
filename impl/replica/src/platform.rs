//! What the replica takes from its environment: sockets, files and the
//! wall clock. By default these are the operating system's (tokio's
//! sockets, `std::fs`, `SystemTime`); with the `turmoil` feature they are
//! turmoil's simulated ones, so that the unchanged node runs as a host of a
//! deterministic simulation (`dsim/turmoil`, docs/simulator-layers.md "Three
//! layers"). With the `madsim` feature (and `--cfg madsim`) `tokio` is
//! madsim-tokio (src/lib.rs) and the sockets are madsim's, wrapped here to
//! tokio's shape (`platform/madsim_net.rs`), and files are an in-memory disk of the
//! replica's own (`platform/madsim_fs.rs`): madsim's file system is asynchronous and
//! never loses unsynced data (`dsim/madsim`). Nothing else in the replica
//! names tokio's sockets, `std::fs` for its durable state, or the wall
//! clock.
//!
//! Background work follows the same switch ([`BACKGROUND_THREADS`]): the
//! write-ahead log's group commit, segment preparation and snapshot writing
//! run on OS threads in a real process and inline or as tasks under
//! simulation, where a thread would escape the simulated clock, disk and
//! scheduling.

use std::net::SocketAddr;

/// Whether the write-ahead log may use OS threads (group commit, spare
/// segments, snapshots). Off under simulation: one thread runs everything.
/// (madsim refuses to spawn OS threads inside a simulation.)
pub const BACKGROUND_THREADS: bool = !cfg!(any(feature = "turmoil", feature = "madsim"));

#[cfg(all(feature = "madsim", not(feature = "turmoil")))]
mod madsim_net;

#[cfg(all(feature = "madsim", not(feature = "turmoil")))]
mod madsim_fs;

/// Sockets: tokio's, or turmoil's or madsim's simulated ones.
pub mod net {
    #[cfg(all(feature = "madsim", not(feature = "turmoil")))]
    pub use super::madsim_net::{OwnedReadHalf, OwnedWriteHalf, TcpListener, TcpStream};
    #[cfg(not(any(feature = "turmoil", feature = "madsim")))]
    pub use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
    #[cfg(not(any(feature = "turmoil", feature = "madsim")))]
    pub use tokio::net::{TcpListener, TcpStream};
    #[cfg(feature = "turmoil")]
    pub use turmoil::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
    #[cfg(feature = "turmoil")]
    pub use turmoil::net::{TcpListener, TcpStream};
}

/// Files of the durable state: `std::fs`, or turmoil's simulated disk
/// (pending writes lost on a crash, torn writes, I/O errors, corruption),
/// or under madsim an in-memory disk of the replica's own (unsynced writes
/// and names lost on a crash; `platform/madsim_fs.rs`).
pub mod fs {
    #[cfg(all(feature = "madsim", not(feature = "turmoil")))]
    pub use super::madsim_fs::{
        crash, create_dir_all, forget, metadata, read, read_dir, remove_file, rename, sync_dir,
        File, OpenOptions,
    };
    #[cfg(not(any(feature = "turmoil", feature = "madsim")))]
    pub use std::fs::{
        create_dir_all, metadata, read, read_dir, remove_file, rename, File, OpenOptions,
    };
    #[cfg(feature = "turmoil")]
    pub use turmoil::fs::shim::std::fs::{
        create_dir_all, metadata, read, read_dir, remove_file, rename, File, OpenOptions,
    };

    /// Makes the entries of `dir` (creations, renames, removals) durable.
    #[cfg(not(any(feature = "turmoil", feature = "madsim")))]
    pub fn sync_dir(dir: &std::path::Path) -> std::io::Result<()> {
        File::open(dir)?.sync_all()
    }

    #[cfg(feature = "turmoil")]
    pub fn sync_dir(dir: &std::path::Path) -> std::io::Result<()> {
        turmoil::fs::shim::std::fs::sync_dir(dir)
    }
}

/// The address a listener binds for the configured address `addr`. A
/// simulated host binds the unspecified address (turmoil routes by host).
pub fn listen_addr(addr: SocketAddr) -> SocketAddr {
    if cfg!(feature = "turmoil") {
        SocketAddr::new(std::net::Ipv4Addr::UNSPECIFIED.into(), addr.port())
    } else {
        addr
    }
}

/// SIGUSR1, the campaigns' request for a full collection. A madsim host
/// has no signals (madsim's tokio has only `ctrl_c`): the harness sends
/// the request with [`send_usr1`] instead.
#[cfg(not(all(feature = "madsim", not(feature = "turmoil"))))]
pub fn usr1() -> std::io::Result<tokio::signal::unix::Signal> {
    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined1())
}

#[cfg(all(feature = "madsim", not(feature = "turmoil")))]
thread_local! {
    /// Each madsim node's SIGUSR1 stand-in, on the thread of the run (the
    /// node's latest incarnation: a restart installs a new one).
    static USR1: std::cell::RefCell<std::collections::BTreeMap<madsim::task::NodeId, std::sync::Arc<tokio::sync::Notify>>> =
        const { std::cell::RefCell::new(std::collections::BTreeMap::new()) };
}

/// The current madsim node's SIGUSR1 stand-in.
#[cfg(all(feature = "madsim", not(feature = "turmoil")))]
pub fn usr1() -> std::io::Result<SimSignal> {
    let n = std::sync::Arc::new(tokio::sync::Notify::new());
    USR1.with(|m| m.borrow_mut().insert(madsim::plugin::node(), n.clone()));
    Ok(SimSignal(n))
}

/// "Sends SIGUSR1" to the madsim node `node`: its collector model is
/// asked for a full collection, if it runs one. Returns whether the node
/// listens.
#[cfg(all(feature = "madsim", not(feature = "turmoil")))]
pub fn send_usr1(node: madsim::task::NodeId) -> bool {
    USR1.with(|m| m.borrow().get(&node).map(|n| n.notify_one()).is_some())
}

/// A signal stream fed by [`send_usr1`] (a pending signal is kept, as the
/// kernel keeps one).
#[cfg(all(feature = "madsim", not(feature = "turmoil")))]
pub struct SimSignal(std::sync::Arc<tokio::sync::Notify>);

#[cfg(all(feature = "madsim", not(feature = "turmoil")))]
impl SimSignal {
    pub async fn recv(&mut self) -> Option<()> {
        self.0.notified().await;
        Some(())
    }
}

/// Wall-clock time since the Unix epoch (the simulation's clock under
/// turmoil, and under madsim, which fakes the process clock). Read for the
/// core's clock epoch and for identifiers that must not repeat across
/// restarts; never for durations.
pub fn since_epoch() -> std::time::Duration {
    #[cfg(feature = "turmoil")]
    if let Some(d) = turmoil::since_epoch() {
        return d;
    }
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
}

/// Lets the other tasks of the thread run before the caller goes on.
/// tokio's `yield_now` wakes the task only after the runtime has polled
/// its timers and sockets: a task that yielded with a plain self-wake would
/// run again before them for up to `event_interval` (61) turns, and the
/// protocol loop's heartbeat timer with it. Under madsim that deferred
/// wake-up goes to a tokio scheduler that does not run, so the task wakes
/// itself and waits in madsim's ready queue (where a paused node's tasks
/// wait).
pub async fn yield_once() {
    #[cfg(not(feature = "madsim"))]
    tokio::task::yield_now().await;
    #[cfg(feature = "madsim")]
    {
        let mut yielded = false;
        std::future::poll_fn(move |cx| {
            if yielded {
                return std::task::Poll::Ready(());
            }
            yielded = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        })
        .await
    }
}

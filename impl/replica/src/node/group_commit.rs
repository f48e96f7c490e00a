//! Group commit: a dedicated thread takes every persist request queued,
//! writes them to the write-ahead log, syncs once and publishes the highest
//! durable token.
//!
//! A write or sync that fails for want of space or with an I/O error
//! (ENOSPC, EDQUOT, EIO) raises the storage alarm instead of stopping the
//! replica: the group is kept, published as not durable with the alarm
//! set, and written and synced again every [`RETRY`] (with everything
//! queued since) until it succeeds, which disarms the alarm. Nothing of
//! the group is acknowledged before then. Any other error stops the
//! replica (fail-stop). Under simulation (the `turmoil` and `madsim`
//! features) the same loop ([`commit_loop`]) is a task of the node's
//! runtime, and the sync takes [`SIM_SYNC_LATENCY`] of simulated time, so
//! that a crash can fall between a write and its sync.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::Duration;

use stutter_core::Record;
use tokio::sync::watch;
// The simulators' clock under simulation, the OS clock otherwise (outside
// a runtime with a paused clock, tokio's Instant is std's).
use tokio::time::Instant;

use crate::platform::BACKGROUND_THREADS;
use crate::wal::Wal;

/// How long a sync takes under simulation: a slow disk's fdatasync (the
/// disks measured here reach this in their tails), longer than the
/// simulated network's round trip, so that an acknowledgement can reach a
/// client while the write it depends on is not yet durable if the node
/// gets the order wrong.
pub const SIM_SYNC_LATENCY: Duration = Duration::from_millis(10);

/// Injected bug `ack-before-sync` (feature `node-bugs` with
/// `STUTTER_NODE_BUG=ack-before-sync`,
/// negative control of the deterministic simulation): the durable token is
/// published after the write and before the sync, so the protocol loop
/// acknowledges records a crash can still take away.
fn bug_ack_before_sync() -> bool {
    crate::node_bug::active(crate::node_bug::NodeBug::AckBeforeSync)
}

type Batch = (u64, Vec<Record>);

/// The log thread's queue, or the log task's under simulation (unbounded
/// there: the simulated loop cannot block its only thread on a full queue;
/// the simulations' load is far below the bound).
enum Queue {
    Thread(SyncSender<Batch>),
    Task(tokio::sync::mpsc::UnboundedSender<Batch>),
}

/// Persist requests queued for the log thread at most. When the disk falls
/// this far behind, the protocol loop waits for room (logged): it stops
/// taking inputs, its peers' and clients' sockets fill and push back. It
/// never drops a request: a record not written is never acknowledged.
pub const WAL_QUEUE: usize = 4096;

/// A group commit or a protocol-loop turn slower than this is logged (a
/// stall here is what tail latency is made of).
pub const SLOW: Duration = Duration::from_millis(15);

/// What the log thread has made durable. Tokens are cumulative (a token
/// covers every earlier one), so the newest value is all the loop needs: a
/// one-place channel (`watch`) loses nothing by overwriting.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Durable {
    /// The highest token whose records are durable.
    pub token: u64,
    /// Group commits done.
    pub syncs: u64,
    /// A write or sync failed: the replica must stop (fail-stop).
    pub failed: Option<String>,
    /// The log cannot write now (a full disk, an I/O error) and retries:
    /// the storage alarm, with the error.
    pub alarm: Option<String>,
}

/// How often a group the disk refused is tried again.
pub const RETRY: Duration = Duration::from_millis(500);

/// Errors that raise the storage alarm rather than stop the replica: a
/// retry may clear them.
fn retryable(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOSPC) | Some(libc::EDQUOT) | Some(libc::EIO)
    )
}

pub struct GroupCommit {
    tx: Queue,
    meter: Arc<WalMeter>,
}

/// What the log thread has done so far, published after each group
/// commit: its CPU time (for `--calibrate` and for the collector model's
/// account of how busy the process is), group commits, records and bytes.
#[derive(Debug, Default)]
pub struct WalMeter {
    pub cpu_ns: AtomicU64,
    pub syncs: AtomicU64,
    pub records: AtomicU64,
    pub bytes: AtomicU64,
    /// Wall time spent writing and syncing, ns (the disk's latency as the
    /// group commits see it).
    pub write_sync_ns: AtomicU64,
}

impl WalMeter {
    pub fn cpu_ns(&self) -> u64 {
        self.cpu_ns.load(Ordering::Relaxed)
    }
}

impl GroupCommit {
    /// Starts the log thread (a task under simulation, which must be
    /// called within the node's runtime); at most one sync per `interval`.
    pub fn start(
        wal: Wal,
        interval: Duration,
    ) -> std::io::Result<(GroupCommit, watch::Receiver<Durable>)> {
        let (dtx, drx) = watch::channel(Durable::default());
        let meter = Arc::new(WalMeter::default());
        let c = Committer {
            wal,
            durable: dtx,
            syncs: 0,
            meter: meter.clone(),
        };
        let tx = if BACKGROUND_THREADS {
            let (tx, rx) = std::sync::mpsc::sync_channel(WAL_QUEUE);
            std::thread::Builder::new()
                .name("wal".into())
                .spawn(move || block_on(commit_loop(c, OnThread(rx), interval, Duration::ZERO)))?;
            Queue::Thread(tx)
        } else {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            tokio::spawn(commit_loop(c, AsTask(rx), interval, SIM_SYNC_LATENCY));
            Queue::Task(tx)
        };
        Ok((GroupCommit { tx, meter }, drx))
    }

    pub fn meter(&self) -> &Arc<WalMeter> {
        &self.meter
    }

    /// Queues records; the loop learns through the watch when they are
    /// durable. If the thread has stopped, its failure is in the watch.
    pub fn persist(&self, token: u64, records: Vec<Record>) {
        match &self.tx {
            Queue::Thread(tx) => match tx.try_send((token, records)) {
                Ok(()) | Err(TrySendError::Disconnected(_)) => {}
                Err(TrySendError::Full(item)) => {
                    tracing::warn!(
                        queued = WAL_QUEUE,
                        "write-ahead-log queue full: the protocol loop waits for the disk"
                    );
                    let _ = tx.send(item);
                }
            },
            Queue::Task(tx) => {
                let _ = tx.send((token, records));
            }
        }
    }
}

/// The log and what the thread or task publishes.
struct Committer {
    wal: Wal,
    durable: watch::Sender<Durable>,
    syncs: u64,
    meter: Arc<WalMeter>,
}

impl Committer {
    /// Appends the group (the batches held from a failed attempt, then
    /// every batch `next` still has); returns the group's highest token,
    /// its record count and the outcome.
    fn write(
        &mut self,
        group: &mut Vec<Batch>,
        mut next: impl FnMut() -> Option<Batch>,
    ) -> (u64, u64, std::io::Result<()>) {
        while let Some(b) = next() {
            group.push(b);
        }
        let top = group.last().map_or(0, |b| b.0);
        let n = group.iter().map(|b| b.1.len() as u64).sum();
        let result = group.iter().try_for_each(|b| self.wal.append_all(&b.1));
        if bug_ack_before_sync() && result.is_ok() {
            let _ = self.durable.send(Durable {
                token: top,
                syncs: self.syncs,
                failed: None,
                alarm: None,
            });
        }
        (top, n, result)
    }

    /// Publishes a group commit's outcome: `Stop` (a failed write or sync
    /// that no retry clears, or nobody listens any more), `Retry` (the
    /// alarm is raised, the group is kept), or `Done`.
    fn publish(&mut self, top: u64, n: u64, result: std::io::Result<()>, took: Duration) -> Next {
        if let Err(e) = &result {
            if retryable(e) {
                let alarm = format!("write-ahead log: {e}");
                let previous = self.durable.borrow().clone();
                if previous.alarm.as_deref() != Some(&alarm) {
                    tracing::warn!(error = %e, "storage alarm: the log cannot write; writes are refused, retrying every {} ms", RETRY.as_millis());
                }
                let receivers = self.durable.send(Durable {
                    alarm: Some(alarm),
                    ..previous
                });
                return if receivers.is_err() {
                    Next::Stop
                } else {
                    Next::Retry
                };
            }
        }
        if result.is_ok() && self.durable.borrow().alarm.is_some() {
            tracing::info!("storage alarm disarmed: the log writes again");
        }
        self.syncs += 1;
        let meter = &self.meter;
        meter.records.fetch_add(n, Ordering::Relaxed);
        meter
            .write_sync_ns
            .fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
        meter.bytes.store(self.wal.size(), Ordering::Relaxed);
        meter.syncs.store(self.syncs, Ordering::Relaxed);
        if BACKGROUND_THREADS {
            meter
                .cpu_ns
                .store(crate::thread_cpu::now_ns(), Ordering::Relaxed);
        }
        let failed = result.err().map(|e| format!("write-ahead log: {e}"));
        let stop = failed.is_some();
        let receivers = self.durable.send(Durable {
            token: top,
            syncs: self.syncs,
            failed,
            alarm: None,
        });
        if stop || receivers.is_err() {
            Next::Stop
        } else {
            Next::Done
        }
    }
}

enum Next {
    Done,
    Retry,
    Stop,
}

/// What differs between the log thread of a real node and the log task
/// of a simulated one: where batches come from and how the loop waits.
/// The loop itself, [`commit_loop`], is one, so that the simulators run
/// the real node's group commit.
trait Runner {
    /// The next batch, waiting for one; `None` once the node has gone.
    async fn next(&mut self) -> Option<Batch>;
    /// A batch already queued, without waiting.
    fn ready(&mut self) -> Option<Batch>;
    async fn sleep(&mut self, d: Duration);
    async fn sleep_until(&mut self, deadline: Instant);
}

/// The real node: a thread of its own, which may block on its queue, on
/// the disk and in its sleeps (driven by [`block_on`]).
struct OnThread(Receiver<Batch>);

impl Runner for OnThread {
    async fn next(&mut self) -> Option<Batch> {
        self.0.recv().ok()
    }
    fn ready(&mut self) -> Option<Batch> {
        self.0.try_recv().ok()
    }
    async fn sleep(&mut self, d: Duration) {
        std::thread::sleep(d);
    }
    async fn sleep_until(&mut self, deadline: Instant) {
        if let Some(d) = deadline.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
    }
}

/// Under simulation: a task of the node's runtime on simulated time.
struct AsTask(tokio::sync::mpsc::UnboundedReceiver<Batch>);

impl Runner for AsTask {
    async fn next(&mut self) -> Option<Batch> {
        self.0.recv().await
    }
    fn ready(&mut self) -> Option<Batch> {
        self.0.try_recv().ok()
    }
    async fn sleep(&mut self, d: Duration) {
        tokio::time::sleep(d).await;
    }
    // Also when the deadline has passed: the simulated schedule (which
    // task runs next) is part of what a seed fixes.
    async fn sleep_until(&mut self, deadline: Instant) {
        tokio::time::sleep_until(deadline).await;
    }
}

/// The group commit: waits for a batch, keeps at most one sync per
/// `interval` (what arrives meanwhile joins the group), writes the group,
/// syncs (after `sync_latency` of the runner's time: zero for a real disk,
/// which takes its own), publishes, and on the storage alarm tries the
/// same group again every [`RETRY`].
async fn commit_loop(
    mut c: Committer,
    mut r: impl Runner,
    interval: Duration,
    sync_latency: Duration,
) {
    let mut last_sync: Option<Instant> = None;
    let mut group: Vec<Batch> = Vec::new();
    loop {
        if group.is_empty() {
            match r.next().await {
                Some(first) => group.push(first),
                None => return,
            }
        }
        if let Some(t) = last_sync {
            r.sleep_until(t + interval).await;
        }
        let started = Instant::now();
        last_sync = Some(started);
        let (top, n, result) = c.write(&mut group, || r.ready());
        let written = started.elapsed();
        if !sync_latency.is_zero() {
            r.sleep(sync_latency).await;
        }
        let result = result.and_then(|_| c.wal.sync());
        if started.elapsed() > SLOW {
            tracing::warn!(
                write_ms = written.as_millis() as u64,
                total_ms = started.elapsed().as_millis() as u64,
                "slow group commit"
            );
        }
        match c.publish(top, n, result, started.elapsed()) {
            Next::Done => group.clear(),
            Next::Retry => r.sleep(RETRY).await,
            Next::Stop => return,
        }
    }
}

/// Runs a future to completion on this thread: the log thread's loop,
/// whose runner blocks instead of returning `Pending`, so one poll
/// normally finishes it; a waker that unparks the thread covers the rest.
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(slot: u64) -> Record {
        Record::Accept {
            slot: stutter_core::Slot(slot),
            ballot: stutter_core::Ballot(1),
            value: stutter_core::Value::Noop,
        }
    }

    fn wait_for(rx: &mut watch::Receiver<Durable>, token: u64) -> Durable {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            loop {
                let d = rx.borrow_and_update().clone();
                if d.token >= token {
                    return d;
                }
                rx.changed().await.unwrap();
            }
        })
    }

    /// Two persists handed over right after a sync wait for the interval
    /// and leave in one group commit, reported by the higher token. (No
    /// fsync here: the interval does not depend on it, and a slow shared
    /// disk must not make the timing of this test flaky.)
    #[test]
    fn persists_within_the_sync_interval_share_one_group_commit() {
        let dir = tempfile::tempdir().unwrap();
        let (wal, _) = Wal::open(dir.path(), false).unwrap();
        let interval = Duration::from_millis(300);
        let (gc, mut rx) = GroupCommit::start(wal, interval).unwrap();

        let before_first = Instant::now();
        gc.persist(1, vec![Record::Ballot(stutter_core::Ballot(1)), accept(1)]);
        assert_eq!(
            wait_for(&mut rx, 1),
            Durable {
                token: 1,
                syncs: 1,
                failed: None,
                alarm: None
            }
        );
        gc.persist(2, vec![accept(2)]);
        gc.persist(3, vec![accept(3)]);
        assert_eq!(
            wait_for(&mut rx, 3),
            Durable {
                token: 3,
                syncs: 2,
                failed: None,
                alarm: None
            },
            "one group commit for both"
        );
        // The second sync started no earlier than one interval after the first.
        assert!(
            before_first.elapsed() >= interval,
            "synced again after {:?}",
            before_first.elapsed()
        );

        drop(gc);
        // The thread ends once the queue is closed and the log is dropped.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async { while rx.changed().await.is_ok() {} });
        let (_, durable) = Wal::open(dir.path(), true).unwrap();
        assert_eq!(
            durable.accepted.len(),
            3,
            "all three accepts are durable: {durable:?}"
        );
    }
}

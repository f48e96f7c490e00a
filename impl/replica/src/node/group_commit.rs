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
//! replica (fail-stop). Under simulation (the `turmoil` feature) the same is a
//! task of the node's runtime, and the sync takes [`SIM_SYNC_LATENCY`] of
//! simulated time, so that a crash can fall between a write and its sync.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use stutter_core::Record;
use tokio::sync::watch;

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
                .spawn(move || wal_thread(c, rx, interval))?;
            Queue::Thread(tx)
        } else {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            tokio::spawn(wal_task(c, rx, interval));
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

fn wal_thread(mut c: Committer, rx: Receiver<Batch>, interval: Duration) {
    let mut last_sync: Option<Instant> = None;
    let mut group: Vec<Batch> = Vec::new();
    loop {
        if group.is_empty() {
            match rx.recv() {
                Ok(first) => group.push(first),
                Err(_) => return,
            }
        }
        // At most one sync per `interval`: what arrives while waiting joins
        // this group commit.
        if let Some(wait) =
            last_sync.and_then(|t| (t + interval).checked_duration_since(Instant::now()))
        {
            std::thread::sleep(wait);
        }
        let started = Instant::now();
        last_sync = Some(started);
        let (top, n, result) = c.write(&mut group, || rx.try_recv().ok());
        let written = started.elapsed();
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
            Next::Retry => std::thread::sleep(RETRY),
            Next::Stop => return,
        }
    }
}

/// The group commit as a task (simulation): the same steps on simulated
/// time; the sync is made to take [`SIM_SYNC_LATENCY`].
async fn wal_task(
    mut c: Committer,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Batch>,
    interval: Duration,
) {
    let mut last_sync: Option<tokio::time::Instant> = None;
    let mut group: Vec<Batch> = Vec::new();
    loop {
        if group.is_empty() {
            match rx.recv().await {
                Some(first) => group.push(first),
                None => return,
            }
        }
        if let Some(t) = last_sync {
            tokio::time::sleep_until(t + interval).await;
        }
        let started = tokio::time::Instant::now();
        last_sync = Some(started);
        let (top, n, result) = c.write(&mut group, || rx.try_recv().ok());
        tokio::time::sleep(SIM_SYNC_LATENCY).await;
        let result = result.and_then(|_| c.wal.sync());
        match c.publish(top, n, result, started.elapsed()) {
            Next::Done => group.clear(),
            Next::Retry => tokio::time::sleep(RETRY).await,
            Next::Stop => return,
        }
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

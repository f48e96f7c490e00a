//! Group commit: a dedicated thread takes every persist request queued,
//! writes them to the write-ahead log, syncs once and publishes the highest
//! durable token.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use stutter_core::Record;
use tokio::sync::watch;

use crate::wal::Wal;

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
}

pub struct GroupCommit {
    tx: SyncSender<(u64, Vec<Record>)>,
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
    /// Starts the log thread; at most one sync per `interval`.
    pub fn start(wal: Wal, interval: Duration) -> std::io::Result<(GroupCommit, watch::Receiver<Durable>)> {
        let (tx, rx) = std::sync::mpsc::sync_channel(WAL_QUEUE);
        let (dtx, drx) = watch::channel(Durable::default());
        let meter = Arc::new(WalMeter::default());
        let m = meter.clone();
        std::thread::Builder::new().name("wal".into()).spawn(move || wal_thread(wal, rx, dtx, interval, &m))?;
        Ok((GroupCommit { tx, meter }, drx))
    }

    pub fn meter(&self) -> &Arc<WalMeter> {
        &self.meter
    }

    /// Queues records; the loop learns through the watch when they are
    /// durable. If the thread has stopped, its failure is in the watch.
    pub fn persist(&self, token: u64, records: Vec<Record>) {
        match self.tx.try_send((token, records)) {
            Ok(()) | Err(TrySendError::Disconnected(_)) => {}
            Err(TrySendError::Full(item)) => {
                tracing::warn!(queued = WAL_QUEUE, "write-ahead-log queue full: the protocol loop waits for the disk");
                let _ = self.tx.send(item);
            }
        }
    }
}

fn wal_thread(mut wal: Wal, rx: Receiver<(u64, Vec<Record>)>, durable: watch::Sender<Durable>, interval: Duration, meter: &WalMeter) {
    let mut last_sync: Option<Instant> = None;
    let mut syncs = 0;
    while let Ok((mut top, records)) = rx.recv() {
        // At most one sync per `interval`: what arrives while waiting joins
        // this group commit.
        if let Some(wait) = last_sync.and_then(|t| (t + interval).checked_duration_since(Instant::now())) {
            std::thread::sleep(wait);
        }
        let started = Instant::now();
        last_sync = Some(started);
        let mut n = records.len() as u64;
        let mut result = wal.append(records);
        while result.is_ok() {
            match rx.try_recv() {
                Ok((t, more)) => {
                    top = t;
                    n += more.len() as u64;
                    result = wal.append(more);
                }
                Err(_) => break,
            }
        }
        let written = started.elapsed();
        let result = result.and_then(|_| wal.sync());
        if started.elapsed() > SLOW {
            tracing::warn!(write_ms = written.as_millis() as u64, total_ms = started.elapsed().as_millis() as u64, "slow group commit");
        }
        syncs += 1;
        meter.records.fetch_add(n, Ordering::Relaxed);
        meter.write_sync_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        meter.bytes.store(wal.size(), Ordering::Relaxed);
        meter.syncs.store(syncs, Ordering::Relaxed);
        meter.cpu_ns.store(crate::thread_cpu::now_ns(), Ordering::Relaxed);
        let failed = result.err().map(|e| format!("write-ahead log: {e}"));
        let stop = failed.is_some();
        let receivers = durable.send(Durable { token: top, syncs, failed });
        if stop || receivers.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(slot: u64) -> Record {
        Record::Accept { slot: stutter_core::Slot(slot), ballot: stutter_core::Ballot(1), value: stutter_core::Value::Noop }
    }

    fn wait_for(rx: &mut watch::Receiver<Durable>, token: u64) -> Durable {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
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
        assert_eq!(wait_for(&mut rx, 1), Durable { token: 1, syncs: 1, failed: None });
        gc.persist(2, vec![accept(2)]);
        gc.persist(3, vec![accept(3)]);
        assert_eq!(wait_for(&mut rx, 3), Durable { token: 3, syncs: 2, failed: None }, "one group commit for both");
        // The second sync started no earlier than one interval after the first.
        assert!(before_first.elapsed() >= interval, "synced again after {:?}", before_first.elapsed());

        drop(gc);
        // The thread ends once the queue is closed and the log is dropped.
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async { while rx.changed().await.is_ok() {} });
        let (_, durable) = Wal::open(dir.path(), true).unwrap();
        assert_eq!(durable.accepted.len(), 3, "all three accepts are durable: {durable:?}");
    }
}

//! Idle and slow client connections. A connection holds one of the
//! client port's `max_client_connections` places; without these rules a
//! connection that sends nothing would hold it for ever, and enough of
//! them lock every new client out (found by hand: 19,900 idle
//! connections, docs/replica.md "Idle and slow clients").
//!
//! - A connection that completes no request for `client_idle_timeout` is
//!   closed (the clock starts again at each complete request).
//! - A request whose first byte has come must be complete within
//!   `client_request_timeout`, or the connection is closed: a client that
//!   trickles a request byte by byte holds no place for long.
//! - At the cap, a new connection takes the place of the oldest connection
//!   that has been idle for `client_evict_idle` (1 s) at least; only when
//!   none has is the new one refused. (The oldest, not the idlest: found in a few
//!   steps, where a flood of connections arrives faster than a scan of
//!   every place could keep up with.)

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncBufReadExt;
use tokio::sync::Notify;
use tokio::time::Instant;

/// One connection's last complete request, and its "close now".
pub struct Activity {
    epoch: Instant,
    last_ms: AtomicU64,
    pub close: Notify,
}

impl Activity {
    /// A complete request came.
    pub fn touch(&self) {
        let ms = self.epoch.elapsed().as_millis() as u64;
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    fn idle(&self) -> Duration {
        let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
        self.epoch.elapsed().saturating_sub(last)
    }
}

/// The client port's open connections.
#[derive(Default)]
pub struct Registry {
    conns: Mutex<BTreeMap<u64, Arc<Activity>>>,
    /// When a search last found no connection to evict: the next is not
    /// tried before [`EVICT_RETRY`] (a flood would scan every place for
    /// each of its connections).
    none_at: Mutex<Option<Instant>>,
}

const EVICT_RETRY: Duration = Duration::from_millis(20);

impl Registry {
    pub fn open(&self, conn: u64) -> Arc<Activity> {
        let a = Arc::new(Activity {
            epoch: Instant::now(),
            last_ms: AtomicU64::new(0),
            close: Notify::new(),
        });
        self.lock().insert(conn, a.clone());
        a
    }

    pub fn closed(&self, conn: u64) {
        self.lock().remove(&conn);
    }

    /// Tells the oldest connection idle for `min_idle` at least to close;
    /// whether there was one.
    pub fn evict_idle(&self, min_idle: Duration) -> bool {
        let mut none_at = self.none_at.lock().unwrap_or_else(|p| p.into_inner());
        if none_at.is_some_and(|t| t.elapsed() < EVICT_RETRY) {
            return false;
        }
        let mut conns = self.lock();
        let victim = conns
            .iter()
            .find(|(_, a)| a.idle() >= min_idle)
            .map(|(n, _)| *n);
        match victim.and_then(|n| conns.remove(&n)) {
            Some(a) => {
                a.close.notify_one();
                *none_at = None;
                true
            }
            None => {
                *none_at = Some(Instant::now());
                false
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<Activity>>> {
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Ends when the connection must close: told to (evicted), or idle for
/// `timeout`.
pub async fn watchdog(act: &Activity, timeout: Option<Duration>) {
    loop {
        let Some(t) = timeout else {
            return act.close.notified().await;
        };
        let left = t.saturating_sub(act.idle());
        if left.is_zero() {
            return;
        }
        tokio::select! {
            _ = act.close.notified() => return,
            _ = tokio::time::sleep(left) => {}
        }
    }
}

/// Waits for the first byte of the next request; false at the end of the
/// stream.
pub async fn request_begins<R: AsyncBufReadExt + Unpin>(r: &mut R) -> std::io::Result<bool> {
    Ok(!r.fill_buf().await?.is_empty())
}

/// `read`, the rest of a request, bounded by `limit`.
pub async fn within<T>(
    limit: Duration,
    read: impl Future<Output = std::io::Result<T>>,
) -> std::io::Result<T> {
    match tokio::time::timeout(limit, read).await {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("request not complete within {limit:?}; closing"),
        )),
    }
}

//! The collector model on the real node (`[gc]` in the config): the same
//! `stutter_gc::Collector` the simulator drives in virtual time, driven
//! here by the node's real allocation and CPU, and obeyed for real.
//!
//! After every protocol-loop turn the driver tells the collector what the
//! process allocated during the turn and how its live bytes changed (from
//! the counting allocator, `alloc_count`), and how many cores the node's
//! threads kept busy (the loop's and the log thread's CPU time over wall
//! time). The collector's answers are carried out:
//! - an assist: the loop thread spins for that much CPU time before it
//!   yields, so the turn's sends and replies wait for it;
//! - a stop-the-world pause: the loop thread blocks for its length. The
//!   runtime has one thread, so every task of the node stops with it:
//!   no socket is read or written, no timer fires, nothing is handled.
//!   The log thread keeps writing and syncing what it was given (its
//!   completions wait for the loop), and so do the snapshot and segment
//!   threads: a real runtime would stop them too, but they are I/O-bound
//!   and give the loop nothing while it is stopped;
//! - concurrent marking: a thread of its own ("gc") spins for the share
//!   of a core the model's dedicated workers hold
//!   (`cores - mutator_cores()`), in 2 ms periods, while a cycle runs.
//!   Marking the model does on idle cores is not burnt: on a shared
//!   machine those cores are other processes' (it still shortens the
//!   modelled mark, as it would on a machine of the node's own).
//!
//! The driver also wakes the loop at the collector's `next_wakeup()` (a
//! mark finishing, which brings the second pause) when no input does.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use stutter_gc::{Alloc, Collector, Event, GcModel, Time};

use super::group_commit::WalMeter;
use crate::alloc_count::{self, Counts};
use crate::thread_cpu;
use crate::wire::GcStatus;

/// The burner's period: it spins `share × PERIOD`, then sleeps the rest.
const PERIOD: Duration = Duration::from_millis(2);
/// Busy cores are measured over intervals at least this long.
const BUSY_WINDOW_US: Time = 1_000;
/// Collector statistics are logged this often.
const LOG_EVERY: Duration = Duration::from_secs(10);
/// A pause longer than this sleeps (most of it) instead of spinning.
const SLEEP_ABOVE: Duration = Duration::from_millis(2);

/// What the driver and its burner thread share.
#[derive(Default)]
struct Burn {
    /// Share of a core to burn now (f64 bits).
    share: AtomicU64,
    stop: AtomicBool,
    /// CPU time burnt so far, ns.
    burnt_ns: AtomicU64,
}

pub struct GcDriver {
    collector: Collector,
    model: &'static str,
    cores: f64,
    dataset: u64,
    t0: Instant,
    wal: Arc<WalMeter>,
    last: Counts,
    last_live: u64,
    /// The last point busy cores were measured at: wall µs, loop CPU ns,
    /// log thread CPU ns; and the value measured.
    busy_at: (Time, u64, u64),
    busy: f64,
    events: Vec<Event>,
    burn: Arc<Burn>,
    burner: Option<std::thread::JoinHandle<()>>,
    assist_ns: u64,
    pause_us: u64,
    last_log: Instant,
    /// Coordinated mode: collections due, to be reported to the protocol
    /// (their headroom in bytes).
    due: Vec<u64>,
}

impl GcDriver {
    /// Starts the model (counting must be on: `alloc_count::enable`).
    pub fn start(
        model: &GcModel,
        cores: f64,
        dataset: u64,
        coordinated: bool,
        wal: Arc<WalMeter>,
    ) -> Result<GcDriver> {
        if !alloc_count::enabled() {
            bail!("the [gc] model needs the allocation counter (alloc-count feature)");
        }
        let last = alloc_count::counts();
        let live = dataset + last.live_delta().max(0) as u64;
        let t0 = Instant::now();
        let burn = Arc::new(Burn::default());
        let b = burn.clone();
        let burner = std::thread::Builder::new()
            .name("gc".into())
            .spawn(move || burner(&b))?;
        tracing::info!(
            model = model.name(),
            cores,
            dataset_mib = dataset >> 20,
            live_mib = live >> 20,
            "collector model on"
        );
        let mut collector = Collector::new(model, cores, live, 0, 100_000);
        collector.set_coordinated(coordinated);
        Ok(GcDriver {
            collector,
            model: model.name(),
            cores,
            dataset,
            t0,
            busy_at: (0, thread_cpu::now_ns(), wal.cpu_ns()),
            wal,
            last,
            last_live: live,
            busy: 0.0,
            events: Vec::new(),
            burn,
            burner: Some(burner),
            assist_ns: 0,
            pause_us: 0,
            last_log: t0,
            due: Vec::new(),
        })
    }

    fn now(&self) -> Time {
        self.t0.elapsed().as_micros() as Time
    }

    /// Cores the node's loop and log threads kept busy lately.
    fn busy(&mut self, now: Time) -> f64 {
        let (at, cpu, wal) = self.busy_at;
        if now >= at + BUSY_WINDOW_US {
            let (c, w) = (thread_cpu::now_ns(), self.wal.cpu_ns());
            let ns = c.saturating_sub(cpu) + w.saturating_sub(wal);
            self.busy = ns as f64 / 1_000.0 / (now - at) as f64;
            self.busy_at = (now, c, w);
        }
        self.busy
    }

    /// A protocol-loop turn ended: tells the collector what it allocated
    /// and carries out the assist and pauses due. Returns (assist µs spun,
    /// pause µs stopped).
    pub fn after_turn(&mut self) -> (u64, u64) {
        let now = self.now();
        let busy = self.busy(now);
        self.collector.advance(now, busy);
        let c = alloc_count::counts();
        let live = (self.dataset as i64 + c.live_delta()).max(0) as u64;
        let a = Alloc {
            bytes: c.allocated.saturating_sub(self.last.allocated),
            retained: live.saturating_sub(self.last_live),
            released: self.last_live.saturating_sub(live),
        };
        self.last = c;
        self.last_live = live;
        let assist = self.collector.allocate(now, a);
        let mut spun = 0;
        if assist > 0 {
            let want = Duration::from_micros(assist);
            let used = thread_cpu::spin(want, (want * 10).max(Duration::from_millis(50)));
            spun = used.as_micros() as u64;
            self.assist_ns += used.as_nanos() as u64;
        }
        let paused = self.pauses();
        self.publish();
        (spun, paused)
    }

    /// Collections due (coordinated mode), for the protocol's `GcDue`.
    pub fn take_due(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.due)
    }

    /// The protocol granted the due collection (`Output::Collect`): runs
    /// it now, the world stopped. Returns the µs stopped.
    pub fn collect_now(&mut self) -> u64 {
        let now = self.now();
        let busy = self.busy(now);
        self.collector.advance(now, busy);
        self.collector.collect_now(now);
        self.pauses()
    }

    /// A full collection asked for from outside (SIGUSR1): uncoordinated,
    /// the world stops now; coordinated, it becomes due and goes to the
    /// protocol like any other. Returns the µs stopped now.
    pub fn request_full(&mut self) -> u64 {
        let now = self.now();
        let busy = self.busy(now);
        self.collector.advance(now, busy);
        let asked = self.collector.request_full(now);
        tracing::info!(
            asked,
            coordinated = self.collector.coordinated(),
            "full collection asked for"
        );
        self.pauses()
    }

    /// Applies the pauses due, back to back, with the world stopped.
    fn pauses(&mut self) -> u64 {
        self.collector.poll(&mut self.events);
        let mut total = 0;
        for e in std::mem::take(&mut self.events) {
            let (duration, phase) = match e {
                Event::Pause { duration, phase } => (duration, phase),
                Event::Due { headroom } => {
                    self.due.push(headroom);
                    continue;
                }
            };
            self.collector.advance(self.now(), 0.0);
            let started = Instant::now();
            stop_the_world(Duration::from_micros(duration));
            let took = started.elapsed().as_micros() as u64;
            total += took;
            if took > 15_000 {
                tracing::warn!(
                    phase = phase.name(),
                    ms = took / 1000,
                    "long collector pause"
                );
            }
            self.collector.advance(self.now(), 0.0);
        }
        self.pause_us += total;
        if self.last_log.elapsed() >= LOG_EVERY {
            self.last_log = Instant::now();
            let s = self.status();
            tracing::info!(
                model = s.model,
                cycles = s.cycles,
                pauses = s.pauses,
                max_pause_ms = s.max_pause_ms,
                cpu_share = s.cpu_share,
                burnt_ms = s.burnt_ms,
                heap_mib = s.heap_mib,
                live_mib = s.live_mib,
                "collector"
            );
        }
        total
    }

    /// Tells the burner the share of a core the dedicated mark workers
    /// hold now.
    fn publish(&self) {
        let m = self.collector.mutator_cores();
        let share = if m.is_finite() {
            (self.cores - m).clamp(0.0, 1.0)
        } else {
            0.0
        };
        let old = f64::from_bits(self.burn.share.swap(share.to_bits(), Ordering::Relaxed));
        if old <= 0.0 && share > 0.0 {
            if let Some(t) = &self.burner {
                t.thread().unpark();
            }
        }
    }

    /// When the loop must call [`GcDriver::wake`] if nothing else happens.
    pub fn next_wakeup(&self) -> Option<tokio::time::Instant> {
        let t = self.collector.next_wakeup()?;
        // `into`, not `from_std`: under madsim tokio's instant is std's.
        Some((self.t0 + Duration::from_micros(t)).into())
    }

    pub fn status(&self) -> GcStatus {
        let burnt_ms = (self.burn.burnt_ns.load(Ordering::Relaxed) + self.assist_ns) as f64 / 1e6;
        let stopped_ms = self.pause_us as f64 / 1e3;
        super::status::gc_status(
            self.model,
            self.cores,
            &self.collector,
            self.t0.elapsed().as_secs_f64() * 1e6,
            burnt_ms,
            stopped_ms,
        )
    }
}

impl Drop for GcDriver {
    fn drop(&mut self) {
        self.burn.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.burner.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// Blocks the calling thread (the node's only runtime thread) for `d`:
/// sleeps most of a long pause, spins the rest (a sleep overshoots by
/// tens of µs, more than a short pause lasts).
fn stop_the_world(d: Duration) {
    let end = Instant::now() + d;
    if d > SLEEP_ABOVE {
        std::thread::sleep(d - Duration::from_millis(1));
    }
    while Instant::now() < end {
        std::hint::spin_loop();
    }
}

/// The dedicated mark workers: spins `share` of each period while the
/// share is positive, parks while it is zero.
fn burner(burn: &Burn) {
    while !burn.stop.load(Ordering::Relaxed) {
        let share = f64::from_bits(burn.share.load(Ordering::Relaxed));
        if share <= 0.0 {
            std::thread::park_timeout(Duration::from_millis(100));
            continue;
        }
        let start = Instant::now();
        let used = thread_cpu::spin(PERIOD.mul_f64(share.min(1.0)), PERIOD);
        burn.burnt_ns
            .fetch_add(used.as_nanos() as u64, Ordering::Relaxed);
        if let Some(rest) = (start + PERIOD).checked_duration_since(Instant::now()) {
            std::thread::sleep(rest);
        }
    }
}

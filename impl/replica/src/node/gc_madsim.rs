//! The collector model (`[gc]`) of a node running under madsim
//! (`dsim/madsim`): the same `stutter_gc::Collector` as the real node's
//! driver (`gc.rs`) and the simulator's, with the same methods for the
//! protocol loop, driven deterministically instead of by the OS.
//!
//! The real driver cannot run here: it spawns a burner thread (madsim
//! refuses OS threads), reads thread CPU time and the process-wide counting
//! allocator, and blocks the runtime's thread for a pause. Under madsim
//! every node shares one process and one thread, so the allocator's counts
//! mix every node's allocation with the harness's, and they would change
//! with logging switched on (a replay with `--log` would collect at other
//! moments). What this driver uses instead:
//! - allocation: estimated from what each turn handles and emits, with the
//!   simulator's allocation table measured on the real node
//!   (`sim/src/calibration.rs`, `ALLOC`; docs/calibration.md): per client
//!   request and per byte of keys and values carried, per reply and per
//!   message sent, per executed slot, and the growth or shrinkage of the
//!   node's long-lived state (store entries, sessions, untrimmed log),
//!   which is retained or released;
//! - busy cores: the CPU the turns would have cost on the real node, from
//!   the simulator's fitted step costs (a wake-up per turn, per input, per
//!   output; `sim/src/calibration.rs`, `service`), over virtual time;
//! - time: madsim's virtual clock.
//!
//! The collector's answers are carried out in virtual time. A
//! stop-the-world pause stops the whole node as the harness's timer pauses
//! do (`Handle::pause`: every task, socket readers, timers and the loop,
//! while messages and timers pile up) and a task on a clock node of the
//! driver's own resumes it when the pause ends. The node's runtime has one
//! thread, so CPU the loop spends stops every task of the node too: an
//! assist, and the share of a turn's CPU the collector's dedicated workers
//! take when they leave the mutator less than one core (concurrent
//! marking slowing the loop), also stop the node for their length. The
//! loop calls [`GcDriver::settle`] at the end of each turn, which applies
//! what is owed and yields so that the loop itself stops (work below
//! madsim's 1 ms shortest sleep is owed until it adds up to 1 ms).
//!
//! Each node's collector activity is tallied per run thread ([`tally`])
//! for the harness: pauses, assists, collections due and granted, and
//! hand-offs (a leader due for a collection telling a follower to take
//! over).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use anyhow::Result;
use madsim::runtime::Handle;
use madsim::task::NodeId;
use stutter_core::{Input, Message, Output, Replica};
use stutter_gc::{Alloc, Collector, Event, GcModel, Time};

use super::calibrate::op_bytes;
use super::group_commit::WalMeter;
use crate::wire::GcStatus;

/// Bytes allocated per input and output kind, and per byte of keys and
/// values (the simulator's `calibration::ALLOC`, measured on the node).
const CLIENT_REQUEST_BYTES: u64 = 349;
const PER_PAYLOAD_BYTE: f64 = 0.23;
const EXECUTED_BYTES: u64 = 69;
const REPLY_BYTES: u64 = 318;
const SEND_BYTES: u64 = 228;
/// Long-lived bytes of a store entry, a session and an untrimmed log slot
/// (the simulator's `state_bytes` at its 24-byte values).
const ENTRY_BYTES: u64 = 24 + 24 + 48;
const SESSION_BYTES: u64 = 64;
const SLOT_BYTES: u64 = 64 + 24 + 24;

/// CPU ns of a turn on the real node (the simulator's fitted `service`
/// table, rounded): the wake-up, an input, a timer, an output.
const WAKEUP_NS: u64 = 19_700;
const INPUT_NS: u64 = 1_500;
const TIMER_NS: u64 = 9_650;
const OUTPUT_NS: u64 = 1_400;
/// madsim's shortest sleep: shorter stops are owed until they add up.
const MIN_STOP_US: Time = 1_000;
/// Busy cores are measured over intervals at least this long.
const BUSY_WINDOW_US: Time = 1_000;

/// What one node's collector did in a run, for the harness.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GcTally {
    /// Incarnations of the node that ran a collector model.
    pub starts: u64,
    /// Stop-the-world pauses and their total and longest length, µs.
    pub pauses: u64,
    pub pause_us: u64,
    pub max_pause_us: u64,
    /// Assist time and the time concurrent marking added to turns, µs.
    pub assist_us: u64,
    pub slowed_us: u64,
    /// Coordinated mode: collections reported due to the protocol, and
    /// collections the protocol granted (`Output::Collect`) that ran.
    pub due: u64,
    pub granted: u64,
    /// Hand-offs: as a leader with a collection due, the node told a
    /// follower to take over (`TimeoutNow`, which only the hand-off sends).
    pub handoffs: u64,
    /// Full collections asked for from outside (the harness's `gc` fault).
    pub requested: u64,
    /// Bytes the node's work allocated, as estimated.
    pub allocated: u64,
    /// Stops of the node, their total virtual time, and stops after which
    /// the loop ran again before the stop's end (the node was not
    /// stopped: must stay 0).
    pub stops: u64,
    pub stopped_us: u64,
    pub resumed_early: u64,
}

thread_local! {
    /// Per madsim node, on the thread of the run.
    static TALLY: RefCell<BTreeMap<NodeId, GcTally>> = const { RefCell::new(BTreeMap::new()) };
}

/// Takes the collector tallies of every node of the run on this thread.
pub fn tally() -> BTreeMap<NodeId, GcTally> {
    TALLY.with(|t| std::mem::take(&mut *t.borrow_mut()))
}

fn count(node: NodeId, f: impl FnOnce(&mut GcTally)) {
    TALLY.with(|t| f(t.borrow_mut().entry(node).or_default()));
}

pub struct GcDriver {
    collector: Collector,
    model: &'static str,
    cores: f64,
    t0: Instant,
    node: NodeId,
    /// Resumes the node after a stop: a task on a node of its own, which
    /// is never paused.
    clock: madsim::runtime::NodeHandle,
    /// Dropped with the driver (the node killed or restarted): a resume
    /// still pending then must not touch the node's next incarnation.
    alive: Arc<()>,
    /// The collector's clock, µs since `t0`: virtual time, but never
    /// before the end of collector work already decided (a pause decided
    /// in this turn has, for the collector, passed).
    busy_until: Time,
    /// Collector work the node owes and has not stood still for yet, µs.
    owed_us: Time,
    /// This turn so far: bytes allocated, CPU ns, and state bytes that
    /// became long-lived or garbage.
    turn_bytes: u64,
    turn_cpu_ns: u64,
    turn_retained: u64,
    turn_released: u64,
    /// The node's long-lived state bytes, and its last executed slot, at
    /// the last input.
    state: u64,
    executed: u64,
    /// CPU ns of turns since the busy window began, and the window's start.
    window_cpu_ns: u64,
    window_at: Time,
    busy: f64,
    events: Vec<Event>,
    assist_us: u64,
    pause_us: u64,
}

/// The node's own long-lived state, as the heap holds it (the data set
/// is the collector's from the start).
fn state_bytes(rep: &Replica) -> u64 {
    let sm = rep.state_machine();
    let log = rep.last_index().0.saturating_sub(rep.trimmed().0);
    sm.kv.len() as u64 * ENTRY_BYTES + sm.sessions.len() as u64 * SESSION_BYTES + log * SLOT_BYTES
}

fn payload_bytes(bytes: u64) -> u64 {
    (bytes as f64 * PER_PAYLOAD_BYTE) as u64
}

impl GcDriver {
    /// Starts the model on the current madsim node. `_wal` is the real
    /// driver's CPU meter of the log thread, which has no thread here.
    pub fn start(
        model: &GcModel,
        cores: f64,
        dataset: u64,
        coordinated: bool,
        _wal: Arc<WalMeter>,
    ) -> Result<GcDriver> {
        let node = madsim::plugin::node();
        let clock = Handle::current()
            .create_node()
            .name(format!("gc-clock-{node}"))
            .build();
        tracing::info!(
            model = model.name(),
            cores,
            dataset_mib = dataset >> 20,
            "collector model on (madsim)"
        );
        let mut collector = Collector::new(model, cores, dataset, 0, 100_000);
        collector.set_coordinated(coordinated);
        count(node, |t| t.starts += 1);
        Ok(GcDriver {
            collector,
            model: model.name(),
            cores,
            t0: Instant::now(),
            node,
            clock,
            alive: Arc::new(()),
            busy_until: 0,
            owed_us: 0,
            turn_bytes: 0,
            turn_cpu_ns: WAKEUP_NS,
            turn_retained: 0,
            turn_released: 0,
            state: 0,
            executed: 0,
            window_cpu_ns: 0,
            window_at: 0,
            busy: 0.0,
            events: Vec::new(),
            assist_us: 0,
            pause_us: 0,
        })
    }

    /// The collector's clock (`busy_until`).
    fn now(&self) -> Time {
        (self.t0.elapsed().as_micros() as Time).max(self.busy_until)
    }

    fn busy(&mut self, now: Time) -> f64 {
        if now >= self.window_at + BUSY_WINDOW_US {
            self.busy = self.window_cpu_ns as f64 / 1_000.0 / (now - self.window_at) as f64;
            self.window_at = now;
            self.window_cpu_ns = 0;
        }
        self.busy
    }

    /// The loop hands `input` to the core.
    pub fn input(&mut self, input: &Input) {
        let (bytes, cpu) = match input {
            Input::Request(req) => (
                CLIENT_REQUEST_BYTES + payload_bytes(op_bytes(&req.op)),
                INPUT_NS,
            ),
            Input::Message { msg, .. } => {
                let carried: u64 = match msg {
                    Message::Accept { value, .. } => {
                        value.requests().iter().map(|r| op_bytes(&r.op)).sum()
                    }
                    Message::CatchUp { entries, .. } | Message::Promise { entries, .. } => entries
                        .iter()
                        .flat_map(|e| e.value.requests())
                        .map(|r| op_bytes(&r.op))
                        .sum(),
                    Message::InstallSnapshot { snapshot, .. } => snapshot
                        .kv
                        .iter()
                        .map(|(k, v)| (k.len() + v.len()) as u64)
                        .sum(),
                    _ => 0,
                };
                (payload_bytes(carried), INPUT_NS)
            }
            Input::Timer(_) => (0, TIMER_NS),
            _ => (0, INPUT_NS),
        };
        self.turn_bytes += bytes;
        self.turn_cpu_ns += cpu;
    }

    /// The core handled an input: what it executed and how its state
    /// changed.
    pub fn handled(&mut self, rep: &Replica) {
        let executed = rep.last_executed().0;
        let ran = executed.saturating_sub(self.executed);
        self.executed = executed;
        self.turn_bytes += ran * EXECUTED_BYTES;
        let state = state_bytes(rep);
        self.turn_retained += state.saturating_sub(self.state);
        self.turn_released += self.state.saturating_sub(state);
        self.state = state;
    }

    /// The loop carried out `out`.
    pub fn output(&mut self, out: &Output) {
        let bytes = match out {
            Output::Reply { .. } => REPLY_BYTES,
            Output::Send { msg, .. } => {
                if matches!(msg, Message::TimeoutNow { .. }) {
                    count(self.node, |t| t.handoffs += 1);
                }
                SEND_BYTES
            }
            _ => return,
        };
        self.turn_bytes += bytes;
        self.turn_cpu_ns += OUTPUT_NS;
    }

    /// A protocol-loop turn ended: tells the collector what the turn
    /// allocated and how the node's state changed, and owes the assist, the
    /// slowdown and the pauses due. Returns (assist µs, pause µs) as the
    /// real driver does; they take effect at [`GcDriver::settle`].
    pub fn after_turn(&mut self) -> (u64, u64) {
        let cpu_ns = std::mem::replace(&mut self.turn_cpu_ns, WAKEUP_NS);
        self.window_cpu_ns += cpu_ns;
        let now = self.now();
        let busy = self.busy(now);
        self.collector.advance(now, busy);
        let retained = std::mem::take(&mut self.turn_retained);
        let released = std::mem::take(&mut self.turn_released);
        let a = Alloc {
            bytes: std::mem::take(&mut self.turn_bytes) + retained,
            retained,
            released,
        };
        count(self.node, |t| t.allocated += a.bytes);
        let assist = self.collector.allocate(now, a);
        // With fewer than one core left to the mutator the turn's CPU took
        // longer by the workers' share.
        let m = self.collector.mutator_cores();
        let slowed = if m.is_finite() && m > 0.0 && m < 1.0 {
            (cpu_ns as f64 / 1_000.0 * (1.0 / m - 1.0)) as u64
        } else {
            0
        };
        let owed = assist + slowed;
        if owed > 0 {
            self.busy_until = now + owed;
            self.owed_us += owed;
            self.assist_us += assist;
            count(self.node, |t| {
                t.assist_us += assist;
                t.slowed_us += slowed;
            });
        }
        let paused = self.pauses();
        (assist, paused)
    }

    /// Collections due (coordinated mode), for the protocol's `GcDue`.
    pub fn take_due(&mut self) -> Vec<u64> {
        let mut due = Vec::new();
        self.events.retain(|e| match e {
            Event::Due { headroom } => {
                due.push(*headroom);
                false
            }
            _ => true,
        });
        if !due.is_empty() {
            count(self.node, |t| t.due += due.len() as u64);
        }
        due
    }

    /// The protocol granted the due collection (`Output::Collect`): runs
    /// it now. Returns the µs the node will stand still.
    pub fn collect_now(&mut self) -> u64 {
        let now = self.now();
        let busy = self.busy(now);
        self.collector.advance(now, busy);
        if self.collector.collect_now(now) {
            count(self.node, |t| t.granted += 1);
        }
        self.pauses()
    }

    /// A full collection asked for from outside (the harness's `gc`
    /// fault, in place of SIGUSR1). Returns the µs the node will stand
    /// still.
    pub fn request_full(&mut self) -> u64 {
        let now = self.now();
        let busy = self.busy(now);
        self.collector.advance(now, busy);
        let asked = self.collector.request_full(now);
        count(self.node, |t| t.requested += 1);
        tracing::info!(
            asked,
            coordinated = self.collector.coordinated(),
            "full collection asked for"
        );
        self.pauses()
    }

    /// Owes the pauses due, back to back after the work already owed.
    /// Dues stay in `events` for [`GcDriver::take_due`].
    fn pauses(&mut self) -> u64 {
        let mut polled = Vec::new();
        self.collector.poll(&mut polled);
        let mut total = 0;
        for e in polled {
            let Event::Pause { duration, phase } = e else {
                self.events.push(e);
                continue;
            };
            let start = self.now();
            self.collector.advance(start, 0.0);
            self.busy_until = start + duration;
            self.owed_us += duration;
            self.collector.advance(self.busy_until, 0.0);
            total += duration;
            tracing::debug!(phase = phase.name(), us = duration, "collector pause");
            count(self.node, |t| {
                t.pauses += 1;
                t.pause_us += duration;
                t.max_pause_us = t.max_pause_us.max(duration);
            });
        }
        self.pause_us += total;
        total
    }

    /// The end of a turn: stops the whole node for the collector work it
    /// owes, and yields, so that the loop stops with it. madsim sleeps at
    /// least 1 ms, so work owed below that (a Go-like cycle's 16 µs and
    /// 4 µs pauses, most assists) is kept until the debt reaches 1 ms and
    /// then stood still for at once: the total is exact, a short pause
    /// comes later than decided, by less than the time it takes to owe
    /// 1 ms.
    pub async fn settle(&mut self) {
        if self.owed_us < MIN_STOP_US {
            return;
        }
        let clock = self.t0.elapsed().as_micros() as Time;
        let until = clock + std::mem::take(&mut self.owed_us);
        let stop = Duration::from_micros(until - clock);
        let handle = Handle::current();
        handle.pause(self.node);
        let alive: Weak<()> = Arc::downgrade(&self.alive);
        let node = self.node;
        self.clock.spawn(async move {
            madsim::time::sleep(stop).await;
            if alive.upgrade().is_some() {
                Handle::current().resume(node);
            }
        });
        crate::platform::yield_once().await;
        let back = self.t0.elapsed().as_micros() as Time;
        count(self.node, |t| {
            t.stops += 1;
            t.stopped_us += back.saturating_sub(clock);
            t.resumed_early += u64::from(back < until);
        });
    }

    /// When the loop must wake if nothing else happens.
    pub fn next_wakeup(&self) -> Option<tokio::time::Instant> {
        let t = self.collector.next_wakeup()?;
        Some((self.t0 + Duration::from_micros(t)).into())
    }

    pub fn status(&self) -> GcStatus {
        // Nothing is burnt under simulation: the node stands still.
        let burnt_ms = self.assist_us as f64 / 1e3;
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

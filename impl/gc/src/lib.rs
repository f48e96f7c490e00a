//! Garbage-collector models driven by allocation, for the simulator (in
//! virtual time) and for the real replica (against its real allocation
//! counts, when its `[gc]` section asks for one).
//!
//! A timer that stops a replica every so often is fault injection, not
//! garbage collection: what a collected runtime costs a replicated service
//! comes from the coupling of load, allocation, live heap, memory limit and
//! cores. A [`Collector`] is told what the mutator allocates and how much of
//! it stays reachable; it decides, as the runtime it models would, when to
//! stop the world and for how long, how many cores its concurrent workers
//! take from the mutator, and how much marking an allocating mutator must do
//! itself (assists). Like the protocol core it is a pure state machine: time
//! is an input, there is no clock, no thread and no randomness, so the same
//! inputs give the same collections.
//!
//! The driver's contract:
//! - [`Collector::advance`] before anything else at a new instant, with how
//!   many cores the mutator kept busy since the previous call (idle cores
//!   speed up a Go-like mark, as Go's idle mark workers do);
//! - [`Collector::allocate`] for each piece of mutator work, which returns
//!   the assist CPU time (µs) that work must spend first;
//! - [`Collector::poll`] after either, for the stop-the-world pauses that
//!   became due (to be applied back to back, all cores stopped);
//! - [`Collector::next_wakeup`]: when to call `advance` + `poll` again if
//!   nothing else happens (a concurrent mark finishing);
//! - [`Collector::mutator_cores`]: the cores left to the mutator now.
//!
//! Models: [`GcModel::None`] (C++, Rust), [`go::GoParams`] (a pacer with
//! GOGC and a soft memory limit, concurrent mark at 25 % of the cores plus
//! assists, two short stop-the-world phases per cycle, a CPU limiter) and
//! [`g1::G1Params`] (young collections, promotion, concurrent marking past
//! an occupancy threshold, mixed collections, full collections). Their
//! constants are measured on real runtimes (`docs/gc-calibration.md`).

pub mod calibration;
pub mod g1;
pub mod go;
mod stats;

use serde::{Deserialize, Serialize};

pub use g1::G1Params;
pub use go::GoParams;
pub use stats::{PauseSummary, Stats};

/// Microseconds, virtual or real, always handed in by the driver.
pub type Time = u64;

pub const MIB: f64 = 1024.0 * 1024.0;

/// Which runtime a replica is modelled as.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "lowercase")]
pub enum GcModel {
    /// No collector: memory is freed by the program (Rust, C++).
    None,
    /// A Go-like concurrent mark-sweep collector with a pacer.
    Go(GoParams),
    /// A G1-like generational, region-based collector (Java's default).
    G1(G1Params),
}

impl GcModel {
    pub fn name(&self) -> &'static str {
        match self {
            GcModel::None => "none",
            GcModel::Go(_) => "go",
            GcModel::G1(_) => "g1",
        }
    }
}

/// One piece of mutator work, as the collector sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Alloc {
    /// Bytes allocated (all of it garbage sooner or later, but `retained`).
    pub bytes: u64,
    /// Of those, bytes that stay reachable as long-lived state (a new
    /// value in the store, a log entry until it is trimmed).
    pub retained: u64,
    /// Bytes of long-lived state that became unreachable (an overwritten
    /// value, trimmed log entries): garbage in the old part of the heap.
    pub released: u64,
}

/// The phases of a collection that stop the world.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Phase {
    /// Go: start of a cycle.
    SweepTermination,
    /// Go: end of marking.
    MarkTermination,
    /// G1: evacuation of the young generation.
    Young,
    /// G1: a young collection that also evacuates old regions.
    Mixed,
    /// G1: end of concurrent marking.
    Remark,
    /// G1: region accounting after remark.
    Cleanup,
    /// G1: the whole heap compacted with the world stopped.
    Full,
    /// A collection the replicated service scheduled (GC coordination):
    /// the whole heap, world stopped, every core collecting.
    Coordinated,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::SweepTermination => "sweep-termination",
            Phase::MarkTermination => "mark-termination",
            Phase::Young => "young",
            Phase::Mixed => "mixed",
            Phase::Remark => "remark",
            Phase::Cleanup => "cleanup",
            Phase::Full => "full",
            Phase::Coordinated => "coordinated",
        }
    }
}

/// What the driver must do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Stop every thread of the process for `duration` µs.
    Pause { duration: Time, phase: Phase },
    /// Coordinated mode: a long collection is due; ask the replicated
    /// service for a moment and call [`Collector::collect_now`] in it.
    /// `headroom`: bytes the mutator may still allocate before the runtime
    /// collects on its own.
    Due { headroom: u64 },
}

/// One process's memory manager.
pub struct Collector {
    kind: Kind,
    stats: Stats,
}

enum Kind {
    None { live: u64 },
    Go(Box<go::GoHeap>),
    G1(Box<g1::G1Heap>),
}

impl Collector {
    /// A collector for a process with `cores` cores whose live heap is
    /// `live` bytes at `now` (the data it starts with).
    pub fn new(model: &GcModel, cores: f64, live: u64, now: Time, window: Time) -> Collector {
        let cores = cores.max(0.01);
        let kind = match model {
            GcModel::None => Kind::None { live },
            GcModel::Go(p) => Kind::Go(Box::new(go::GoHeap::new(p.clone(), cores, live, now))),
            GcModel::G1(p) => Kind::G1(Box::new(g1::G1Heap::new(p.clone(), cores, live, now))),
        };
        Collector {
            kind,
            stats: Stats::new(now, window),
        }
    }

    pub fn model_name(&self) -> &'static str {
        match self.kind {
            Kind::None { .. } => "none",
            Kind::Go(_) => "go",
            Kind::G1(_) => "g1",
        }
    }

    /// Runs background collector work from the previous call up to `now`,
    /// during which the mutator kept `mutator_busy` cores busy.
    pub fn advance(&mut self, now: Time, mutator_busy: f64) {
        match &mut self.kind {
            Kind::None { .. } => {}
            Kind::Go(h) => h.advance(now, mutator_busy, &mut self.stats),
            Kind::G1(h) => h.advance(now, mutator_busy, &mut self.stats),
        }
    }

    /// The mutator did one piece of work; returns the assist CPU time (µs)
    /// it must spend marking before it may go on.
    pub fn allocate(&mut self, now: Time, a: Alloc) -> Time {
        self.stats.allocated += a.bytes;
        match &mut self.kind {
            Kind::None { live } => {
                *live = (*live + a.retained).saturating_sub(a.released);
                0
            }
            Kind::Go(h) => h.allocate(now, a, &mut self.stats),
            Kind::G1(h) => h.allocate(now, a, &mut self.stats),
        }
    }

    /// Long-lived bytes allocated at young epoch `born` ([`Collector::epoch`]
    /// then; `None`: before the run, or unknown) became unreachable: an
    /// overwritten value, a trimmed log entry. A generational collector
    /// copies them no more if they were still young; otherwise they are
    /// old garbage. ([`Alloc::released`] is the same as `None`.)
    pub fn release(&mut self, bytes: u64, born: Option<u64>) {
        match &mut self.kind {
            Kind::None { live } => *live = live.saturating_sub(bytes),
            Kind::Go(h) => h.release(bytes),
            Kind::G1(h) => h.release(bytes, born),
        }
    }

    /// The age clock of a generational collector: young collections so
    /// far (0 for the others). Bytes allocated now are born at this epoch.
    pub fn epoch(&self) -> u64 {
        match &self.kind {
            Kind::G1(h) => h.epoch(),
            _ => 0,
        }
    }

    /// Whether bytes' ages matter ([`Collector::release`]): a driver that
    /// tracks them only for a generational collector saves the work.
    pub fn generational(&self) -> bool {
        matches!(self.kind, Kind::G1(_))
    }

    /// Bytes reachable now only because requests are being handled
    /// (decoded requests waiting for their reply): a young collection
    /// copies them, and they die soon after.
    pub fn set_in_flight(&mut self, bytes: u64) {
        if let Kind::G1(h) = &mut self.kind {
            h.set_in_flight(bytes);
        }
    }

    /// G1: eden bytes the policy allows before the next young collection.
    pub fn young_target(&self) -> Option<u64> {
        match &self.kind {
            Kind::G1(h) => Some(h.young_target()),
            _ => None,
        }
    }

    /// Stop-the-world pauses that became due, oldest first.
    pub fn poll(&mut self, out: &mut Vec<Event>) {
        match &mut self.kind {
            Kind::None { .. } => {}
            Kind::Go(h) => out.append(&mut h.pending),
            Kind::G1(h) => out.append(&mut h.pending),
        }
    }

    /// Coordinated mode (Blade): the long collections — a Go-like cycle, a
    /// G1-like concurrent cycle and full collection — are not started by
    /// the runtime at its trigger but reported [`Event::Due`], and run when
    /// the service says ([`Collector::collect_now`]) as one stop-the-world
    /// collection on every core: with the service routing around the
    /// collecting replica, a simple high-throughput collector beats a
    /// concurrent one. If the heap reaches the point where the runtime must
    /// collect first, it does as usual. Short pauses (G1 young collections)
    /// are never coordinated.
    pub fn set_coordinated(&mut self, on: bool) {
        match &mut self.kind {
            Kind::None { .. } => {}
            Kind::Go(h) => h.coordinated = on,
            Kind::G1(h) => h.coordinated = on,
        }
    }

    /// Runs the due collection now (coordinated mode); its pause comes out
    /// of [`Collector::poll`]. Nothing happens if none is due (the runtime
    /// collected on its own meanwhile). Returns whether it collected.
    pub fn collect_now(&mut self, now: Time) -> bool {
        match &mut self.kind {
            Kind::None { .. } => false,
            Kind::Go(h) => h.collect_now(now, &mut self.stats),
            Kind::G1(h) => h.collect_now(now, &mut self.stats),
        }
    }

    /// Whether GC coordination is on ([`Collector::set_coordinated`]).
    pub fn coordinated(&self) -> bool {
        match &self.kind {
            Kind::None { .. } => false,
            Kind::Go(h) => h.coordinated,
            Kind::G1(h) => h.coordinated,
        }
    }

    /// Someone asks for a full collection now (`System.gc()`,
    /// `runtime.GC()`; the campaigns' `gc` nemesis). Uncoordinated, it runs
    /// at once, stopping the world on every core; coordinated, it becomes
    /// due ([`Event::Due`]) and runs when the service grants it. Returns
    /// whether anything will happen (not with no collector, or while a
    /// Go-like cycle is already marking).
    pub fn request_full(&mut self, now: Time) -> bool {
        match &mut self.kind {
            Kind::None { .. } => false,
            Kind::Go(h) => h.request_full(now, &mut self.stats),
            Kind::G1(h) => h.request_full(now, &mut self.stats),
        }
    }

    /// When background work changes the collector's state by itself.
    pub fn next_wakeup(&self) -> Option<Time> {
        match &self.kind {
            Kind::None { .. } => None,
            Kind::Go(h) => h.next_wakeup(),
            Kind::G1(h) => h.next_wakeup(),
        }
    }

    /// Cores the collector's concurrent work keeps busy now.
    pub fn concurrent_cores(&self) -> f64 {
        match &self.kind {
            Kind::None { .. } => 0.0,
            Kind::Go(h) => h.concurrent_cores(),
            Kind::G1(h) => h.concurrent_cores(),
        }
    }

    /// The share of a core each of the process's threads gets from now on
    /// (1 with cores of its own; less where processes share a host's
    /// cores): the collector's concurrent work progresses at that speed.
    pub fn set_share(&mut self, share: f64) {
        let share = share.clamp(0.01, 1.0);
        match &mut self.kind {
            Kind::None { .. } => {}
            Kind::Go(h) => h.share = share,
            Kind::G1(h) => h.share = share,
        }
    }

    /// Cores the mutator may use now (the rest run concurrent collector work).
    pub fn mutator_cores(&self) -> f64 {
        match &self.kind {
            Kind::None { .. } => f64::INFINITY,
            Kind::Go(h) => h.mutator_cores(),
            Kind::G1(h) => h.mutator_cores(),
        }
    }

    /// Bytes reachable now.
    pub fn live(&self) -> u64 {
        match &self.kind {
            Kind::None { live } => *live,
            Kind::Go(h) => h.live(),
            Kind::G1(h) => h.live(),
        }
    }

    /// Bytes the heap occupies now (live and not yet reclaimed).
    pub fn heap(&self) -> u64 {
        match &self.kind {
            Kind::None { live } => *live,
            Kind::Go(h) => h.heap(),
            Kind::G1(h) => h.heap(),
        }
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Closes the statistics at `now` (the end of a run).
    pub fn finish(&mut self, now: Time, mutator_busy: f64) -> &Stats {
        self.advance(now, mutator_busy);
        self.stats.close(now);
        &self.stats
    }
}

/// `y` at `x` on the curve through `points` (sorted by `x`), linear in
/// log-log between points and flat beyond the ends.
pub fn interpolate_log(points: &[(f64, f64)], x: f64) -> f64 {
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        return 0.0;
    };
    if x <= first.0 {
        return first.1;
    }
    if x >= last.0 {
        return last.1;
    }
    for w in points.windows(2) {
        let ((x0, y0), (x1, y1)) = (w[0], w[1]);
        if x <= x1 {
            let t = (x.ln() - x0.ln()) / (x1.ln() - x0.ln());
            return (y0.ln() + t * (y1.ln() - y0.ln())).exp();
        }
    }
    last.1
}

/// CPU µs for `bytes` at `us_per_mib`.
fn cost(bytes: f64, us_per_mib: f64) -> f64 {
    bytes / MIB * us_per_mib
}

#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    /// A mutator of `busy` cores that allocates `rate` bytes per second of
    /// its own work, `churn` of them replacing long-lived data of the same
    /// size, for `secs` of wall time. Assists and pauses take its time, as
    /// they would a real program's: the work it gets done shrinks.
    /// Returns the pauses and the share of the time it did its own work.
    pub fn drive(
        c: &mut Collector,
        rate: f64,
        churn: f64,
        secs: u64,
        busy: f64,
    ) -> (Vec<Event>, f64) {
        drive_with(c, rate, churn, secs, busy, false)
    }

    /// As `drive`; with `permit`, a due collection runs at once (a service
    /// that always finds a moment).
    pub fn drive_with(
        c: &mut Collector,
        rate: f64,
        churn: f64,
        secs: u64,
        busy: f64,
        permit: bool,
    ) -> (Vec<Event>, f64) {
        let mut events = Vec::new();
        let step = 1_000;
        let per_step = (rate / 1_000.0) as u64;
        let churn_step = (churn / 1_000.0) as u64;
        let end = secs * 1_000_000;
        let (mut now, mut work) = (0, 0);
        while now < end {
            now += step;
            work += step;
            c.advance(now, busy);
            now += c.allocate(
                now,
                Alloc {
                    bytes: per_step,
                    retained: churn_step,
                    released: churn_step,
                },
            );
            let before = events.len();
            c.poll(&mut events);
            // Every Due granted at once, including one a granted
            // collection announces (a young one that makes the old
            // generation due).
            let mut seen = before;
            while permit
                && events[seen..]
                    .iter()
                    .any(|e| matches!(e, Event::Due { .. }))
            {
                seen = events.len();
                c.collect_now(now);
                c.poll(&mut events);
            }
            for e in &events[before..] {
                if let Event::Pause { duration, .. } = e {
                    c.advance(now, 0.0);
                    now += duration;
                    c.advance(now, 0.0);
                }
            }
        }
        c.finish(now, busy);
        (events, work as f64 / now as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::interpolate_log;

    #[test]
    fn interpolation_is_log_log_between_points_and_flat_outside() {
        let pts = [(16.0, 200.0), (64.0, 400.0)];
        assert_eq!(interpolate_log(&pts, 1.0), 200.0);
        assert_eq!(interpolate_log(&pts, 1000.0), 400.0);
        // Halfway in log x between 16 and 64 is 32: halfway in log y.
        let mid = interpolate_log(&pts, 32.0);
        assert!((mid - (200.0f64 * 400.0).sqrt()).abs() < 1e-9, "{mid}");
        assert_eq!(interpolate_log(&[], 5.0), 0.0);
    }
}

#[cfg(test)]
mod request_tests {
    use super::*;

    fn models() -> Vec<GcModel> {
        vec![
            GcModel::Go(go::GoParams {
                memory_limit: Some(512 << 20),
                ..go::GoParams::default()
            }),
            GcModel::G1(g1::G1Params {
                heap_size: 512 << 20,
                ..g1::G1Params::default()
            }),
        ]
    }

    fn pauses(events: &[Event]) -> usize {
        events
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    Event::Pause {
                        phase: Phase::Coordinated | Phase::Full,
                        ..
                    }
                )
            })
            .count()
    }

    #[test]
    fn a_requested_collection_stops_the_world_at_once_when_uncoordinated() {
        for m in models() {
            let mut c = Collector::new(&m, 2.0, 64 << 20, 0, 100_000);
            assert!(c.request_full(1_000), "{}", m.name());
            let mut ev = Vec::new();
            c.poll(&mut ev);
            assert_eq!(pauses(&ev), 1, "{}: {ev:?}", m.name());
            assert!(!ev.iter().any(|e| matches!(e, Event::Due { .. })));
        }
        let mut none = Collector::new(&GcModel::None, 2.0, 64 << 20, 0, 100_000);
        assert!(!none.request_full(1_000));
    }

    #[test]
    fn a_requested_collection_waits_for_the_grant_when_coordinated() {
        for m in models() {
            let mut c = Collector::new(&m, 2.0, 64 << 20, 0, 100_000);
            c.set_coordinated(true);
            assert!(c.request_full(1_000));
            // Asked twice before the grant: still one due, one collection.
            assert!(c.request_full(1_500));
            let mut ev = Vec::new();
            c.poll(&mut ev);
            assert_eq!(
                ev.iter().filter(|e| matches!(e, Event::Due { .. })).count(),
                1,
                "{}: {ev:?}",
                m.name()
            );
            assert_eq!(pauses(&ev), 0);
            assert!(c.collect_now(2_000));
            ev.clear();
            c.poll(&mut ev);
            assert_eq!(pauses(&ev), 1, "{}: {ev:?}", m.name());
            assert!(!c.collect_now(3_000), "nothing left due");
        }
    }
}

//! The replica's status as the client protocols report it.

use stutter_core::Replica;
use stutter_gc::Collector;

use crate::wire::{GcStatus, StatusInfo};

pub fn status(r: &Replica, gc: Option<GcStatus>) -> StatusInfo {
    StatusInfo {
        id: r.id(),
        role: r.role(),
        ballot: r.ballot(),
        leader: r.leader(),
        last_executed: r.last_executed(),
        global_last_executed: r.global_last_executed(),
        last_index: r.last_index(),
        digest: r.executed_digest(),
        gc,
        sessions: r.state_machine().sessions.len() as u64,
        applied_updates: r.applied_updates(),
        storage_alarm: None,
    }
}

/// What both collector drivers (`gc.rs` on a real node, `gc_madsim.rs`
/// under madsim) report of their collector: they differ only in how long
/// the node has run and in what they count as burnt and stopped.
pub fn gc_status(
    model: &str,
    cores: f64,
    collector: &Collector,
    elapsed_us: f64,
    burnt_ms: f64,
    stopped_ms: f64,
) -> GcStatus {
    let s = collector.stats();
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    GcStatus {
        model: model.to_string(),
        cores,
        cycles: s.cycles,
        pauses: s.pause_count(),
        pause_ms: s.pause_us / 1e3,
        max_pause_ms: s.max_pause() as f64 / 1e3,
        cpu_share: s.gc_cpu_us() / (elapsed_us.max(1e-3) * cores),
        assist_ms: s.assist_us / 1e3,
        background_ms: s.background_us / 1e3,
        idle_ms: s.idle_us / 1e3,
        burnt_ms,
        stopped_ms,
        heap_mib: mib(collector.heap()),
        live_mib: mib(collector.live()),
        allocated_mib: mib(s.allocated),
    }
}

//! What a run returns, and its assembly at the end of the run: the
//! checkers' verdict over the history and the replicas' final states, the
//! collectors' statistics, the fault counts and the trace hash.

use std::io::Write;

use stutter_core::{ReplicaId, Slot, Time};

use super::World;
use crate::check::Violation;
use crate::faults::FaultCounts;
use crate::history::HistOp;

pub struct RunOutput {
    pub history: Vec<HistOp>,
    /// Virtual latency of every ok operation from its intended start (µs).
    pub latencies: Vec<Time>,
    pub faults: FaultCounts,
    pub violations: Vec<Violation>,
    pub trace_hash: u64,
    pub events: u64,
    pub end: Time,
    pub final_last_executed: Vec<Slot>,
    /// Each running replica's collector at the end (empty without a model).
    pub gc: Vec<(ReplicaId, stutter_gc::Stats)>,
    /// Elections won (`BecomeLeader` steps): the first leader, then one per
    /// leader change.
    pub elections: u64,
    /// With GC coordination on: its steps in time order, for the study's
    /// account of where the tail comes from (`study::split`).
    pub gc_log: Vec<GcStep>,
}

/// One step of GC coordination at one replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GcStep {
    pub at: Time,
    pub replica: ReplicaId,
    pub mark: GcMark,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GcMark {
    /// The collector said a collection is due.
    Due,
    /// The leader stopped proposing to hand leadership off.
    HandOffStart,
    /// It told `to` to campaign and stepped down.
    HandOff { to: ReplicaId },
    /// Won an election.
    Elected,
    /// Started a collection, under a grant or forced.
    Collect { granted: bool },
    /// Its collection ended.
    Done,
}

impl World {
    pub(super) fn finish(mut self) -> RunOutput {
        for (i, n) in self.nodes.iter().enumerate() {
            if let Some(rep) = n.replica.as_ref() {
                self.checker.state_taken(
                    i as ReplicaId,
                    "at the end of the run",
                    rep.state_machine(),
                );
            }
        }
        let finals: Vec<(ReplicaId, Slot, u64)> = self
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| {
                n.replica
                    .as_ref()
                    .map(|r| (i as ReplicaId, r.last_executed(), r.executed_digest()))
            })
            .collect();
        let states: Vec<_> = self
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| {
                n.replica.as_ref().map(|r| {
                    (
                        i as ReplicaId,
                        r.last_executed(),
                        r.state_machine().kv.clone(),
                    )
                })
            })
            .collect();
        let violations = self.checker.finish(
            &self.clients.history,
            &self.clients.requests,
            &finals,
            &states,
        );
        let _ = self.trace_out.as_mut().map(|w| w.flush());
        let end = self.end;
        let gc = self
            .nodes
            .iter_mut()
            .enumerate()
            .filter_map(|(i, n)| {
                let (_, speed) = n.cpu.slots(n.mutator_cores());
                let busy = n.cpu.busy_cores(speed);
                n.heap
                    .as_mut()
                    .map(|h| (i as ReplicaId, h.finish(end, busy)))
            })
            .collect();
        self.faults.dropped_messages = self.net.dropped;
        self.faults.duplicated_messages = self.net.duplicated;
        RunOutput {
            history: self.clients.history,
            latencies: self.clients.latencies,
            faults: self.faults,
            violations,
            trace_hash: self.hash.value(),
            events: self.events,
            end: self.end,
            final_last_executed: finals.iter().map(|f| f.1).collect(),
            gc,
            elections: self.elections,
            gc_log: self.gc_log,
        }
    }
}

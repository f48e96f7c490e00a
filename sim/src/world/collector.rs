//! The world's side of the collector models (`impl/gc`, adapted by
//! `crate::memory`): a replica's heap is polled for stop-the-world pauses
//! and "collection due" notices, a pause stops the replica's process, a
//! collection the protocol grants runs at once, and executed writes and
//! copied state feed the heap's live size.

use stutter_core::{Action, ClientId, Input, ReplicaId, TraceEvent};

use super::{Ev, World};
use crate::memory::Heap;

impl World {
    /// Applies the collector's stop-the-world pauses and keeps its one
    /// wake-up entry in the queue.
    pub(super) fn collect(&mut self, r: ReplicaId) {
        let mut evs = std::mem::take(&mut self.gc_events);
        if let Some(h) = self.nodes[r as usize].heap.as_mut() {
            h.poll(&mut evs);
        }
        for e in evs.drain(..) {
            match e {
                stutter_gc::Event::Pause { duration, .. } => {
                    self.stop(r, duration, true);
                }
                // Coordination: the protocol decides when (the input runs
                // after what is queued; `kick`'s loop or the caller starts it).
                stutter_gc::Event::Due { headroom } => {
                    if self.nodes[r as usize].replica.is_some() {
                        self.nodes[r as usize]
                            .cpu
                            .inbox
                            .push_back(Input::GcDue { headroom });
                    }
                }
            }
        }
        self.gc_events = evs;
        let node = &mut self.nodes[r as usize];
        let inc = node.inc;
        let Some(h) = node.heap.as_mut() else { return };
        if let Some(t) = h.next_wakeup() {
            if h.wake_queued.is_none_or(|q| q > t) {
                h.wake_queued = Some(t);
                self.at(t, Ev::GcWake { r, inc, at: t });
            }
        }
    }

    pub(super) fn start_heap(&mut self, r: ReplicaId) {
        if !self.s.memory.is_on() {
            return;
        }
        let node = &mut self.nodes[r as usize];
        if let Some(rep) = node.replica.as_ref() {
            node.heap = Some(Heap::new(
                &self.s.memory,
                node.cpu.cores,
                rep,
                self.s.workload.value_size,
                self.now,
            ));
        }
    }

    /// The protocol says collect: the collector runs what is due (its
    /// pause stops the replica), and `GcDone` follows the pause; if
    /// nothing is due any more (the runtime collected on its own), at once.
    pub(super) fn collect_granted(&mut self, r: ReplicaId) {
        let now = self.now;
        let collected = self.nodes[r as usize]
            .heap
            .as_mut()
            .is_some_and(|h| h.collect_now(now));
        if collected {
            self.collect(r);
        }
        let node = &mut self.nodes[r as usize];
        let (inc, end) = (node.inc, if node.paused { node.pause_until } else { now });
        self.at(end, Ev::GcFinished { r, inc });
    }

    /// What the trace tells the memory model about the step: executed
    /// writes replace live values; a trim or an installed snapshot copies
    /// the replica's own state.
    pub(super) fn trace_memory(&mut self, ev: &TraceEvent) {
        let value_size = self.s.workload.value_size;
        let Some(node) = self.nodes.get_mut(ev.replica as usize) else {
            return;
        };
        let own_state = node
            .replica
            .as_ref()
            .map_or(0, |r| r.state_machine().kv.len() as u64 * (value_size + 72));
        let Some(h) = node.heap.as_mut() else { return };
        match &ev.action {
            Action::Execute {
                value: Some(ids), ..
            } => {
                for id in ids {
                    h.executed(if self.clients.is_update(id.client as ClientId, id.seq) {
                        value_size
                    } else {
                        0
                    });
                }
            }
            Action::Trim { .. } | Action::InstallSnapshot { .. } => h.extra(own_state),
            _ => {}
        }
    }
}

//! The world's side of the collector models (`impl/gc`, adapted by
//! `crate::memory`): a replica's heap is polled for stop-the-world pauses
//! and "collection due" notices, a pause stops the replica's process, a
//! collection the protocol grants runs at once, and executed writes and
//! copied state feed the heap's live size.

use stutter_core::{Action, ClientId, Input, ReplicaId, Time, TraceEvent};

use super::{Ev, World};
use crate::history::F;
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
                    let duration = self.host_pause(r, duration);
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
            node.heap = Some(Heap::new(&self.s.memory, node.cpu.cores, rep, self.now));
        }
    }

    /// A step of replica `r` that allocated `step_bytes` is done: tells
    /// its heap, with what the replica holds in flight; returns the assist
    /// µs the step must also spend.
    pub(super) fn heap_after_step(&mut self, r: ReplicaId, step_bytes: u64) -> Time {
        let now = self.now;
        let m = &self.s.memory;
        let w = &self.s.workload;
        let node = &mut self.nodes[r as usize];
        let (Some(rep), Some(h)) = (node.replica.as_ref(), node.heap.as_mut()) else {
            return 0;
        };
        let leader = rep.role() == stutter_core::Role::Leader;
        // Requests waiting for a slot or a read index, in slots not yet
        // executed, and inputs not yet taken: what a young collection
        // would find in flight.
        let in_flight = if h.generational() {
            let proposed: usize = rep
                .instances_from(rep.last_executed())
                .map(|i| i.value.requests().len())
                .sum();
            (rep.pending_len() + rep.pending_reads() + proposed + node.cpu.inbox.len()) as u64
        } else {
            0
        };
        let op_bytes = m.op_bytes(w.read_fraction, w.value_size);
        h.after_step(now, m, step_bytes, rep, leader, in_flight * op_bytes)
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
        let m = &self.s.memory;
        let now = self.now;
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
                slot,
                value: Some(ids),
                ..
            } => {
                for id in ids {
                    let op = self.clients.op_of(id.client as ClientId, id.seq);
                    let update = op.is_some_and(|o| o.f != F::Read);
                    let write = op
                        .filter(|_| update)
                        .map(|o| (o.key, m.value_bytes(value_size)));
                    let log = if update {
                        m.write_log_bytes(value_size)
                    } else {
                        m.log_bytes(false, value_size)
                    };
                    h.executed(now, slot.0, log, write);
                }
            }
            Action::Trim { up_to } => {
                h.trimmed(m, up_to.0);
                h.extra(own_state);
            }
            Action::InstallSnapshot { .. } => h.extra(own_state),
            _ => {}
        }
    }
}

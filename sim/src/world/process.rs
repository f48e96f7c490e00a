//! A replica's process in the world: its inputs queued for its simulated
//! cores, started while it is up and not stopped, stops (pauses), and
//! restarts from what its disk kept.

use stutter_core::{Input, Replica, ReplicaId, Time};

use super::{core_config, Ev, GcMark, GcStep, World};
use crate::cpu::Cpu;

impl World {
    pub(super) fn enqueue(&mut self, r: ReplicaId, input: Input) {
        let node = &mut self.nodes[r as usize];
        if node.replica.is_none() {
            return;
        }
        node.cpu.inbox.push_back(input);
        self.kick(r);
    }

    /// Starts queued inputs on free cores while the replica is up and not
    /// stopped.
    ///
    /// Every input started holds a core until a `CpuFree` event. Without a
    /// heap model, such an event changes nothing but the count of busy
    /// cores unless an input waits for the core then; and inputs only
    /// come in through here. So a core's free-up stays out of the queue
    /// (`Cpu::free_later`, with its sequence number reserved) while the
    /// inbox is empty: the next kick counts the core free if its time has
    /// passed, and an input left waiting puts the free-ups in the queue,
    /// each at the place it would have had. In `sim bench`'s runs two
    /// thirds of the free-ups (30 % of all events) never enter the queue,
    /// and the run is the same, event for event.
    pub(super) fn kick(&mut self, r: ReplicaId) {
        self.retire_frees(r);
        self.start_inputs(r);
        let node = &mut self.nodes[r as usize];
        if !node.cpu.inbox.is_empty() && !node.cpu.free_later.is_empty() {
            let inc = node.inc;
            for (at, seq) in node.cpu.free_later.drain(..) {
                self.queue.push_reserved(at, seq, Ev::CpuFree { r, inc });
            }
        }
    }

    /// Counts the cores free whose free-up, kept out of the queue, would
    /// have run before the current event.
    fn retire_frees(&mut self, r: ReplicaId) {
        let current = self.queue.current();
        let cpu = &mut self.nodes[r as usize].cpu;
        if cpu.free_later.is_empty() {
            return;
        }
        let before = cpu.free_later.len();
        cpu.free_later.retain(|k| *k > current);
        let done = (before - cpu.free_later.len()) as u32;
        cpu.busy = cpu.busy.saturating_sub(done);
        self.events += done as u64;
    }

    /// The process `r` dies: the free-ups it kept out of the queue are
    /// dropped, counted as the (ignored) events they would have been.
    pub(crate) fn forget_frees(&mut self, r: ReplicaId) {
        let end = self.end;
        let cpu = &mut self.nodes[r as usize].cpu;
        self.events += cpu.free_later.iter().filter(|(at, _)| *at <= end).count() as u64;
        cpu.free_later.clear();
    }

    fn start_inputs(&mut self, r: ReplicaId) {
        loop {
            let now = self.now;
            let value_size = self.s.workload.value_size;
            let node = &mut self.nodes[r as usize];
            if node.paused || node.replica.is_none() {
                return;
            }
            let (slots, speed) = node.cpu.slots(node.mutator_cores());
            if node.cpu.busy >= slots {
                return;
            }
            let speed = speed * self.host_share(r);
            let node = &mut self.nodes[r as usize];
            let Some(input) = node.cpu.inbox.pop_front() else {
                return;
            };
            let turn_starts = node.cpu.turn_starts();
            let pending = self.s.service.begin(&input, value_size, turn_starts);
            let input_bytes = match (&node.heap, &node.replica) {
                (Some(_), Some(rep)) => {
                    let leader = rep.role() == stutter_core::Role::Leader;
                    self.s.memory.input_bytes(&input, value_size, leader)
                }
                _ => 0,
            };
            let busy = node.cpu.busy_cores(speed);
            if let Some(h) = node.heap.as_mut() {
                h.advance(now, busy);
            }
            node.cpu.busy += 1;
            let inc = node.inc;
            let mut out = std::mem::take(&mut self.out);
            if let Some(rep) = node.replica.as_mut() {
                rep.handle(now, input, &mut out);
                if self.s.memory.coordinated {
                    let h = rep.handing_off();
                    if let Some(was) = self.handing_off.get_mut(r as usize) {
                        if h && !*was {
                            self.gc_log.push(GcStep {
                                at: now,
                                replica: r,
                                mark: GcMark::HandOffStart,
                            });
                        }
                        *was = h;
                    }
                }
            }
            let cost = self.s.service.end(pending, &out, value_size);
            let step_bytes = if self.nodes[r as usize].heap.is_some() {
                input_bytes + self.s.memory.output_bytes(&out)
            } else {
                0
            };
            self.outputs(r, &mut out);
            self.out = out;
            if let Some(rep) = self.nodes[r as usize].replica.as_ref() {
                self.checker.after_step(r, rep);
            }
            let assist = self.heap_after_step(r, step_bytes);
            let node = &mut self.nodes[r as usize];
            let cost = node.cpu.whole(cost);
            let free_at = now + Cpu::duration(cost, assist, speed);
            if node.heap.is_some() {
                self.at(free_at, Ev::CpuFree { r, inc });
                self.collect(r);
            } else {
                let seq = self.queue.reserve();
                node.cpu.free_later.push((free_at, seq));
            }
        }
    }

    /// Stops replica `r` for `duration`. A pause fault on a stopped
    /// replica is ignored; a collector's pause waits for the stop it falls
    /// into to end (the process cannot collect while it is stopped).
    /// Returns whether the replica was stopped.
    pub(crate) fn stop(&mut self, r: ReplicaId, duration: Time, by_collector: bool) -> bool {
        let now = self.now;
        let node = &mut self.nodes[r as usize];
        if node.replica.is_none() {
            return false;
        }
        if node.paused {
            if !by_collector {
                return false;
            }
            node.pause_until = node.pause_until.max(now) + duration;
        } else {
            node.paused = true;
            node.pause_until = now + duration;
        }
        let (inc, until) = (node.inc, node.pause_until);
        self.at(until, Ev::Resume { r, inc });
        true
    }

    pub(crate) fn restart(&mut self, r: ReplicaId) {
        if self.nodes[r as usize].replica.is_some() {
            return;
        }
        let durable = self.nodes[r as usize].disk.durable();
        let cfg = core_config(&self.s);
        let rep = Replica::recover(r, cfg, durable, self.rng.fork());
        let node = &mut self.nodes[r as usize];
        node.replica = Some(rep);
        node.cpu.inbox.push_back(Input::Start);
        node.disk.restart(self.now);
        self.start_heap(r);
        self.kick(r);
    }
}

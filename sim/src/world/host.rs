//! The world's side of a shared host (`crate::host`): what every replica
//! on it wants of its cores now, and the share each thread gets.

use stutter_core::{ReplicaId, Time};

use super::World;

impl World {
    /// The share of a core an input starting now at replica `r` gets (1
    /// without a shared host); its collector's concurrent work gets the
    /// same from now on.
    pub(super) fn host_share(&mut self, r: ReplicaId) -> f64 {
        let Some(host) = &self.s.host else {
            return 1.0;
        };
        let now = self.now;
        let mut demand = 1.0;
        for (i, n) in self.nodes.iter().enumerate() {
            if n.replica.is_none() {
                continue;
            }
            demand += n.cpu.busy as f64;
            if let Some(h) = &n.heap {
                demand += h.concurrent_cores();
            }
            if self.gc_until.get(i).is_some_and(|t| *t > now) {
                demand += n.cpu.cores as f64;
            }
        }
        let share = host.share(demand);
        if let Some(h) = self.nodes[r as usize].heap.as_mut() {
            h.set_share(share);
        }
        share
    }

    /// A stop-the-world pause of `duration` at replica `r` on a shared
    /// host: its GC threads want every core the process has, beside what
    /// the others run; it lasts longer by the share they get.
    pub(super) fn host_pause(&mut self, r: ReplicaId, duration: Time) -> Time {
        let Some(host) = &self.s.host else {
            return duration;
        };
        let now = self.now;
        let mut demand = 0.0;
        for (i, n) in self.nodes.iter().enumerate() {
            if n.replica.is_none() {
                continue;
            }
            if i == r as usize || self.gc_until.get(i).is_some_and(|t| *t > now) {
                demand += n.cpu.cores as f64;
            } else {
                demand += n.cpu.busy as f64 + n.heap.as_ref().map_or(0.0, |h| h.concurrent_cores());
            }
        }
        let stretched = (duration as f64 / host.share(demand)).ceil() as Time;
        if let Some(t) = self.gc_until.get_mut(r as usize) {
            *t = (*t).max(now) + stretched;
        }
        stretched
    }
}

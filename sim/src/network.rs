//! The network between replicas: one FIFO link per direction, with a
//! delay of `net_delay_min` plus an exponential extra, loss, duplication,
//! partitions (cut links), and connection epochs (a crash breaks the
//! connections of the dead process: what they still carried is lost).

use stutter_core::{ReplicaId, Time};

use crate::rng::Rng;
use crate::scenario::{Scenario, MS};

#[derive(Default, Clone, Copy)]
struct Link {
    epoch: u64,
    last_arrival: Time,
    /// Partitions currently cutting this link (they may overlap).
    cuts: u32,
    /// Delay added to every message while the link is slowed (a fault
    /// aimed at a window; slowdowns may overlap).
    extra: Time,
}

/// What became of one message sent.
pub enum Sent {
    Dropped,
    /// Arrives at `arrival` on connection `epoch`; a duplicate at `duplicate`.
    Delivered {
        arrival: Time,
        epoch: u64,
        duplicate: Option<Time>,
    },
}

pub struct Network {
    n: usize,
    links: Vec<Link>,
    delay_min: Time,
    delay_mean_extra: f64,
    loss: f64,
    duplication: f64,
    pub dropped: u64,
    pub duplicated: u64,
}

impl Network {
    pub fn new(s: &Scenario) -> Network {
        Network {
            n: s.n,
            links: vec![Link::default(); s.n * s.n],
            delay_min: s.net_delay_min,
            delay_mean_extra: s.net_delay_mean_extra,
            loss: s.loss,
            duplication: s.duplication,
            dropped: 0,
            duplicated: 0,
        }
    }

    fn link(&mut self, from: ReplicaId, to: ReplicaId) -> Option<&mut Link> {
        let (f, t) = (from as usize, to as usize);
        if f < self.n && t < self.n {
            self.links.get_mut(f * self.n + t)
        } else {
            None
        }
    }

    /// A one-way delay (also used for the clients' links).
    pub fn delay(&self, rng: &mut Rng) -> Time {
        self.delay_min + rng.exp(self.delay_mean_extra)
    }

    /// Sends one message at `now`: dropped (cut link or loss), or its
    /// arrival time, after every earlier message of the link (FIFO).
    pub fn send(&mut self, rng: &mut Rng, now: Time, from: ReplicaId, to: ReplicaId) -> Sent {
        let Some(cuts) = self.link(from, to).map(|l| l.cuts) else {
            return Sent::Dropped;
        };
        if cuts > 0 || rng.chance(self.loss) {
            self.dropped += 1;
            return Sent::Dropped;
        }
        let delay = self.delay(rng);
        let Some(link) = self.link(from, to) else {
            return Sent::Dropped;
        };
        let arrival = (now + delay + link.extra).max(link.last_arrival);
        link.last_arrival = arrival;
        let epoch = link.epoch;
        let duplicate = if rng.chance(self.duplication) {
            self.duplicated += 1;
            Some(arrival + rng.range(1, 2 * MS))
        } else {
            None
        };
        Sent::Delivered {
            arrival,
            epoch,
            duplicate,
        }
    }

    /// Whether a message sent on connection `epoch` may be delivered now.
    pub fn deliverable(&mut self, from: ReplicaId, to: ReplicaId, epoch: u64) -> bool {
        let ok = self
            .link(from, to)
            .is_some_and(|l| l.epoch == epoch && l.cuts == 0);
        if !ok {
            self.dropped += 1;
        }
        ok
    }

    /// The process `r` died: its connections break both ways.
    pub fn break_connections(&mut self, r: ReplicaId) {
        for other in 0..self.n as ReplicaId {
            if let Some(l) = self.link(r, other) {
                l.epoch += 1;
            }
            if let Some(l) = self.link(other, r) {
                l.epoch += 1;
            }
        }
    }

    pub fn cut(&mut self, links: &[(ReplicaId, ReplicaId)]) {
        for (a, b) in links {
            if let Some(l) = self.link(*a, *b) {
                l.cuts += 1;
            }
        }
    }

    /// Messages from `from` to `to` take `extra` longer (still in order).
    pub fn slow(&mut self, from: ReplicaId, to: ReplicaId, extra: Time) {
        if let Some(l) = self.link(from, to) {
            l.extra += extra;
        }
    }

    /// Ends a slowdown of [`Network::slow`].
    pub fn unslow(&mut self, from: ReplicaId, to: ReplicaId, extra: Time) {
        if let Some(l) = self.link(from, to) {
            l.extra = l.extra.saturating_sub(extra);
        }
    }

    pub fn heal(&mut self, links: &[(ReplicaId, ReplicaId)]) {
        for (a, b) in links {
            if let Some(l) = self.link(*a, *b) {
                l.cuts = l.cuts.saturating_sub(1);
            }
        }
    }
}

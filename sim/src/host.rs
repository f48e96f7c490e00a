//! A host whose cores co-located replicas share, with the load generator
//! that drives them: the set-up of a real cluster on one machine (three
//! replicas and `bench` on two cores), which the simulator otherwise
//! describes with cores of each replica's own.
//!
//! Processor sharing, step by step: whenever a replica starts an input,
//! every runnable thread on the host wants a core (inputs in service,
//! collectors' concurrent workers, the threads of a stop-the-world
//! collection); if they want more than the host has, each gets the same
//! share, and the input runs that much slower. The load generator's
//! threads take `load_cores` (its CPU per operation × the offered rate)
//! off the host first. A collector's concurrent work progresses at the
//! same share, and a pause stretches by it.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Host {
    /// The host's cores.
    pub cores: f64,
    /// Cores the load generator keeps busy.
    pub load_cores: f64,
}

impl Host {
    /// The share of a core each of `demand` runnable threads gets.
    pub fn share(&self, demand: f64) -> f64 {
        let free = (self.cores - self.load_cores).max(0.05 * self.cores);
        if demand <= free {
            1.0
        } else {
            (free / demand).clamp(0.01, 1.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_share_what_the_load_generator_leaves() {
        let h = Host {
            cores: 2.0,
            load_cores: 0.5,
        };
        assert_eq!(h.share(1.0), 1.0);
        assert_eq!(h.share(1.5), 1.0);
        assert!((h.share(3.0) - 0.5).abs() < 1e-12);
        // A load generator that wants the whole host still leaves a sliver.
        let busy = Host {
            cores: 2.0,
            load_cores: 5.0,
        };
        assert!((busy.share(1.0) - 0.1).abs() < 1e-12);
    }
}

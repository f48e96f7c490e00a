//! Pause profiles: stop-the-world pauses drawn on a timer, the
//! fault-injection view of GC (the collector models of `memory` make
//! pauses come from allocation instead).

use serde::{Deserialize, Serialize};
use stutter_core::Time;

use super::{MS, SEC};

/// How often replicas stop the world, and for how long.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PauseProfile {
    pub name: String,
    /// Mean time between pauses of one replica (exponential).
    pub mean_interval: Time,
    pub min_pause: Time,
    pub max_pause: Time,
    /// Chance that a pause is a long one (`long_min..=long_max`).
    pub long_chance: f64,
    pub long_min: Time,
    pub long_max: Time,
    /// Pauses hit all replicas at about the same time (they execute the same
    /// commands, so their heaps grow together).
    pub correlated: bool,
}

impl PauseProfile {
    pub fn preset(name: &str) -> Option<PauseProfile> {
        let p =
            |mean_interval, min_pause, max_pause, long_chance, long_min, long_max| PauseProfile {
                name: name.to_string(),
                mean_interval,
                min_pause,
                max_pause,
                long_chance,
                long_min,
                long_max,
                correlated: false,
            };
        Some(match name {
            "none" => p(0, 0, 0, 0.0, 0, 0),
            // Young-generation collections: a few ms every few hundred ms.
            "frequent-short" => p(300 * MS, 2 * MS, 8 * MS, 0.0, 0, 0),
            // Full collections of a large heap: rare, hundreds of ms to seconds.
            "rare-long" => p(3 * SEC, 200 * MS, 1_500 * MS, 0.0, 0, 0),
            // Both, worse: short pauses more often and some long ones.
            "memory-pressure" => p(150 * MS, 5 * MS, 30 * MS, 0.05, 300 * MS, 2 * SEC),
            "correlated" => PauseProfile {
                correlated: true,
                ..p(400 * MS, 5 * MS, 20 * MS, 0.05, 200 * MS, SEC)
            },
            _ => return None,
        })
    }

    pub fn names() -> [&'static str; 5] {
        [
            "none",
            "frequent-short",
            "rare-long",
            "memory-pressure",
            "correlated",
        ]
    }
}

//! The young generation's objects by age, as G1 keeps them: eden (age 0)
//! and the survivor cohorts (an object's age is how many young
//! collections it has survived). A young collection copies what is still
//! reachable in each: below the tenuring threshold into survivor space one
//! age older, at or above it (or when survivor space overflows) into the
//! old generation. What became unreachable before the collection is not
//! copied: a value written and overwritten between two collections dies in
//! eden, whatever the heap's size.
//!
//! Bytes are tagged with the young collection count (the epoch) at which
//! they were allocated; the driver releases them with that tag, so the
//! release comes out of the cohort that holds them.

use std::collections::VecDeque;

/// G1's largest tenuring threshold (MaxTenuringThreshold).
pub(crate) const MAX_AGE: usize = 15;

#[derive(Clone, Debug, Default)]
pub(crate) struct Young {
    /// Young collections so far: the age clock.
    pub(crate) epoch: u64,
    /// Long-lived bytes allocated since the last young collection and
    /// still reachable.
    pub(crate) eden_live: f64,
    /// Survivor space: reachable bytes by age (index 0 = age 1).
    cohorts: VecDeque<f64>,
    /// Of age 1, bytes that were only in flight at the last collection
    /// (a request being handled): dead by the next one.
    transient: f64,
    /// The tenuring threshold for the next collection, from the ages the
    /// last one left (G1 computes it at the start of a pause from the age
    /// table of the previous).
    pub(crate) threshold: usize,
}

/// What one young collection did with the young generation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Evacuation {
    /// Bytes copied (to survivor space or the old generation).
    pub(crate) copied: f64,
    /// Of those, bytes promoted to the old generation.
    pub(crate) promoted: f64,
    /// Bytes copied out of eden (its survival, for the policy's rate).
    pub(crate) from_eden: f64,
}

impl Young {
    pub(crate) fn new() -> Young {
        Young {
            threshold: MAX_AGE,
            ..Young::default()
        }
    }

    /// Reachable bytes in survivor space (in-flight leftovers included).
    pub(crate) fn survivors(&self) -> f64 {
        self.cohorts.iter().sum::<f64>() + self.transient
    }

    /// Long-lived reachable bytes in survivor space.
    pub(crate) fn long_lived(&self) -> f64 {
        self.cohorts.iter().sum()
    }

    /// Long-lived bytes born at `epoch` became unreachable: returns the
    /// part that was not young (already promoted: old garbage now).
    pub(crate) fn release(&mut self, bytes: f64, born: u64) -> f64 {
        if born >= self.epoch {
            let young = bytes.min(self.eden_live);
            self.eden_live -= young;
            return bytes - young;
        }
        let age = (self.epoch - born) as usize;
        match self.cohorts.get_mut(age - 1) {
            Some(c) => {
                let young = bytes.min(*c);
                *c -= young;
                bytes - young
            }
            None => bytes,
        }
    }

    /// A young collection with `in_flight` bytes reachable only because
    /// requests are being handled, and survivor space of `capacity` bytes
    /// of which `desired` is the tenuring target (TargetSurvivorRatio).
    pub(crate) fn collect(&mut self, in_flight: f64, capacity: f64, desired: f64) -> Evacuation {
        let from_eden = self.eden_live + in_flight;
        // The in-flight leftovers of the last collection have been
        // answered since: dead, not copied.
        self.transient = 0.0;
        let mut copied = from_eden;
        let mut promoted = 0.0;
        // Ages 1.. in survivor space: below the threshold they stay, one
        // older; at or above it they go to the old generation.
        let mut kept: VecDeque<f64> = VecDeque::with_capacity(self.cohorts.len() + 1);
        kept.push_back(self.eden_live);
        for (i, bytes) in self.cohorts.drain(..).enumerate() {
            copied += bytes;
            let age = i + 1;
            if age >= self.threshold || age >= MAX_AGE {
                promoted += bytes;
            } else {
                kept.push_back(bytes);
            }
        }
        // Survivor space overflows: the oldest go to the old generation.
        let mut room = capacity - in_flight.min(capacity);
        let transient = in_flight.min(capacity);
        promoted += in_flight - transient;
        for c in kept.iter_mut() {
            let fit = c.min(room.max(0.0));
            promoted += *c - fit;
            room -= fit;
            *c = fit;
        }
        while kept.back().is_some_and(|c| *c <= 0.0) {
            kept.pop_back();
        }
        self.cohorts = kept;
        self.transient = transient;
        self.eden_live = 0.0;
        self.epoch += 1;
        self.threshold = self.tenuring_threshold(desired);
        Evacuation {
            copied,
            promoted,
            from_eden,
        }
    }

    /// The smallest age at which the survivors up to it exceed `desired`
    /// (HotSpot's age table), at most [`MAX_AGE`].
    fn tenuring_threshold(&self, desired: f64) -> usize {
        let mut total = self.transient;
        for (i, c) in self.cohorts.iter().enumerate() {
            total += c;
            if total > desired {
                return (i + 1).max(1);
            }
        }
        MAX_AGE
    }

    /// A full collection: everything reachable goes to the old generation.
    pub(crate) fn clear(&mut self) {
        self.cohorts.clear();
        self.transient = 0.0;
        self.eden_live = 0.0;
        self.epoch += 1;
        self.threshold = MAX_AGE;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_released_before_the_collection_are_not_copied() {
        let mut y = Young::new();
        y.eden_live = 100.0;
        assert_eq!(y.release(60.0, 0), 0.0);
        let e = y.collect(0.0, 1e9, 1e9);
        assert_eq!(e.copied, 40.0);
        assert_eq!(e.promoted, 0.0);
        // Now age 1: released from its cohort, not from the old generation.
        assert_eq!(y.release(10.0, 0), 0.0);
        assert_eq!(y.survivors(), 30.0);
        // Released more than the cohort holds: the rest was promoted.
        assert_eq!(y.release(50.0, 0), 20.0);
    }

    #[test]
    fn survivors_age_until_the_threshold_then_are_promoted() {
        let mut y = Young::new();
        y.threshold = 2;
        y.eden_live = 10.0;
        let a = y.collect(0.0, 1e9, 1e9);
        assert_eq!((a.copied, a.promoted), (10.0, 0.0));
        y.threshold = 2;
        y.eden_live = 5.0;
        let b = y.collect(0.0, 1e9, 1e9);
        // Age 1 (10) stays below 2: copied again to age 2.
        assert_eq!((b.copied, b.promoted), (15.0, 0.0));
        y.threshold = 2;
        let c = y.collect(0.0, 1e9, 1e9);
        // Age 2 reaches the threshold: promoted; age 1 (5) copied on.
        assert_eq!((c.copied, c.promoted), (15.0, 10.0));
        assert_eq!(y.survivors(), 5.0);
    }

    #[test]
    fn in_flight_bytes_are_copied_once_and_an_overflow_is_promoted() {
        let mut y = Young::new();
        y.eden_live = 10.0;
        let a = y.collect(30.0, 25.0, 1e9);
        // 30 in flight + 10 long-lived, 25 fit: the 10 and 5 of the
        // in-flight bytes overflow.
        assert_eq!(a.copied, 40.0);
        assert_eq!(a.promoted, 15.0);
        let b = y.collect(0.0, 1e9, 1e9);
        assert_eq!(b.copied, 0.0, "the in-flight leftovers died");
    }

    #[test]
    fn the_threshold_drops_when_survivors_exceed_the_target() {
        let mut y = Young::new();
        y.eden_live = 100.0;
        y.collect(0.0, 1e9, 50.0);
        assert_eq!(y.threshold, 1);
        let mut z = Young::new();
        z.eden_live = 10.0;
        z.collect(0.0, 1e9, 50.0);
        assert_eq!(z.threshold, MAX_AGE);
    }
}

//! G1's policy, as OpenJDK 17's `G1Policy`, `G1YoungGenSizer` and
//! `G1AdaptiveIHOPControl` decide: how large eden may grow before the next
//! young collection, and when to start marking the old generation.
//!
//! Young sizing: after each collection, the largest eden whose predicted
//! pause fits the pause-time goal (MaxGCPauseMillis), between
//! G1NewSizePercent and G1MaxNewSizePercent of the heap and within the
//! free space less the reserve (G1ReservePercent), and whose predicted
//! survivors, with a safety margin, fit in what is left; the minimum when
//! even that does not fit, and the minimum during mixed collections (so
//! that they come often). A pause is predicted as a fixed cost plus the
//! copying of survivor space and of eden's predicted survivors, the
//! survival rate being a decaying average with a confidence margin.
//!
//! Adaptive IHOP: marking starts when the old generation reaches the
//! target occupancy (the heap less the reserve and G1HeapWastePercent)
//! minus what is predicted to be promoted while marking runs (predicted
//! marking time × predicted old-generation allocation rate) and the young
//! generation G1 would like to have; until it has three samples of each,
//! at InitiatingHeapOccupancyPercent.

use super::predict::Seq;

/// What the sizing needs to know of the heap after a collection, bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HeapState {
    pub(crate) heap: f64,
    pub(crate) old_used: f64,
    pub(crate) survivors: f64,
    /// Parallel GC threads (a pause's CPU is spread over them).
    pub(crate) threads: f64,
}

/// The constants of the prediction: pause CPU = fixed + per MiB copied.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Costs {
    pub(crate) fixed_us: f64,
    pub(crate) copy_us_per_mib: f64,
    pub(crate) max_pause_us: f64,
    pub(crate) young_min: f64,
    pub(crate) young_max: f64,
    pub(crate) reserve: f64,
    pub(crate) sigma: f64,
}

/// The result of a sizing.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct YoungSize {
    /// Eden bytes to allocate before the next young collection.
    pub(crate) eden: f64,
    /// The eden the pause goal alone allows, before the free space and
    /// the reserve bound it (what adaptive IHOP plans for).
    pub(crate) unrestrained: f64,
}

pub(crate) struct Policy {
    /// Share of eden that survives a young collection.
    survival: Seq,
}

/// The survival rate G1 assumes before it has measured one
/// (G1SurvRateGroup's initial prediction).
const INITIAL_SURVIVAL: f64 = 0.4;
/// Headroom for copying: 1 / confidence × (1 + TargetPLABWastePct).
const PLAB_WASTE: f64 = 0.10;

impl Policy {
    pub(crate) fn new() -> Policy {
        let mut survival = Seq::analytics();
        survival.add(INITIAL_SURVIVAL);
        Policy { survival }
    }

    /// A young collection copied `from_eden` of `eden` bytes.
    pub(crate) fn observe(&mut self, eden: f64, from_eden: f64) {
        if eden > 0.0 {
            self.survival.add((from_eden / eden).clamp(0.0, 1.0));
        }
    }

    pub(crate) fn predicted_survival(&self, sigma: f64) -> f64 {
        self.survival.predict(sigma).min(1.0)
    }

    /// Predicted pause (wall µs) of a young collection of `eden` bytes.
    pub(crate) fn predict_pause(&self, h: &HeapState, c: &Costs, eden: f64) -> f64 {
        let copied = h.survivors + self.predicted_survival(c.sigma) * eden;
        (c.fixed_us + copied / crate::MIB * c.copy_us_per_mib) / h.threads.max(1.0)
    }

    /// Eden for the next young-only collection (`mixed`: during mixed
    /// collections, the minimum).
    pub(crate) fn size(&self, h: &HeapState, c: &Costs, mixed: bool) -> YoungSize {
        let reserve = (h.heap * c.reserve).ceil();
        let free = (h.heap - h.old_used - h.survivors).max(0.0);
        let base_free = (free - reserve).max(0.0);
        // At least one region's worth of eden, and G1NewSizePercent of
        // the heap for survivors and eden together.
        let min_eden = (c.young_min * h.heap - h.survivors).max(region(h.heap));
        let max_eden = (c.young_max * h.heap - h.survivors).max(min_eden);
        let survival = self.predicted_survival(c.sigma);
        let safety = (1.0 / c.sigma.max(0.01)) * (1.0 + PLAB_WASTE);
        let fits = |eden: f64| {
            eden < base_free
                && self.predict_pause(h, c, eden) <= c.max_pause_us
                && safety * survival * eden <= base_free - eden
        };
        let unrestrained = if mixed || !fits(min_eden) {
            min_eden
        } else if fits(max_eden) {
            max_eden
        } else {
            // The largest fitting eden, to a region.
            let (mut lo, mut hi) = (min_eden, max_eden);
            while hi - lo > region(h.heap) {
                let mid = (lo + hi) / 2.0;
                if fits(mid) {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            lo
        };
        // Not into the reserve, but never below the minimum; and never
        // more than the free regions, which a full heap does not have
        // (live data at or above -Xmx: every allocation then fails into
        // a collection, back to back, as the real JVM's 198 full
        // collections while loading at 1.5×, docs/gc-study.md).
        let eden = unrestrained.min(base_free).max(min_eden).min(free);
        YoungSize { eden, unrestrained }
    }
}

/// G1's region size for a heap: heap / 2048 rounded down to a power of
/// two, between 1 and 32 MiB (JDK 17).
pub(crate) fn region(heap: f64) -> f64 {
    let target = (heap / 2048.0).max(1.0);
    let mut r = 1u64 << 20;
    while (r * 2) as f64 <= target && r < (32 << 20) {
        r *= 2;
    }
    r as f64
}

/// The adaptive IHOP (G1UseAdaptiveIHOP, on by default).
pub(crate) struct Ihop {
    initial: f64,
    adaptive: bool,
    waste: f64,
    reserve: f64,
    sigma: f64,
    marking_s: Seq,
    old_rate: Seq,
    young: f64,
}

/// Samples of each kind before the prediction replaces the initial
/// threshold (G1AdaptiveIHOPNumInitialSamples).
const IHOP_SAMPLES: u32 = 3;

impl Ihop {
    pub(crate) fn new(initial: f64, adaptive: bool, reserve: f64, waste: f64, sigma: f64) -> Ihop {
        Ihop {
            initial,
            adaptive,
            waste,
            reserve,
            sigma,
            marking_s: Seq::ihop(),
            old_rate: Seq::ihop(),
            young: 0.0,
        }
    }

    /// A concurrent mark took `secs` from its start to the first mixed
    /// collection.
    pub(crate) fn marking(&mut self, secs: f64) {
        if secs > 1e-6 {
            self.marking_s.add(secs);
        }
    }

    /// A young-only collection: `promoted` bytes went to the old
    /// generation over `secs` of mutator time since the previous one; the
    /// policy would like an eden of `young` bytes.
    pub(crate) fn young_only(&mut self, secs: f64, promoted: f64, young: f64) {
        if secs > 1e-6 {
            self.old_rate.add(promoted / secs);
        }
        self.young = young;
    }

    /// Old-generation occupancy (bytes) at which marking starts.
    pub(crate) fn threshold(&self, heap: f64) -> f64 {
        let ready = self.marking_s.num() >= IHOP_SAMPLES && self.old_rate.num() >= IHOP_SAMPLES;
        if !self.adaptive || !ready {
            return self.initial * heap;
        }
        let target = heap * (1.0 - (self.reserve + self.waste).min(1.0));
        let needed =
            self.marking_s.predict(self.sigma) * self.old_rate.predict(self.sigma) + self.young;
        (target - needed).max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: f64 = crate::MIB;

    fn costs() -> Costs {
        Costs {
            fixed_us: 1_000.0,
            copy_us_per_mib: 1_000.0,
            max_pause_us: 200_000.0,
            young_min: 0.05,
            young_max: 0.60,
            reserve: 0.10,
            sigma: 0.5,
        }
    }

    fn settled(rate: f64) -> Policy {
        let mut p = Policy::new();
        for _ in 0..40 {
            p.observe(100.0, 100.0 * rate);
        }
        p
    }

    #[test]
    fn eden_is_the_largest_whose_predicted_pause_fits_the_goal() {
        let h = HeapState {
            heap: 32_768.0 * MIB,
            old_used: 4_096.0 * MIB,
            survivors: 0.0,
            threads: 1.0,
        };
        // 10 % survive at 1 ms/MiB on one thread: 200 ms allow ~1,990 MiB.
        let s = settled(0.10).size(&h, &costs(), false);
        let pause = settled(0.10).predict_pause(&h, &costs(), s.eden);
        assert!(pause <= 200_000.0, "{pause}");
        assert!(
            (s.eden / MIB - 1_990.0).abs() < 40.0,
            "{} MiB",
            s.eden / MIB
        );
        // Cheap survival: G1MaxNewSizePercent bounds it.
        let s = settled(0.001).size(&h, &costs(), false);
        assert!((s.eden - 0.60 * h.heap).abs() < 1.0, "{}", s.eden / MIB);
        // Eight threads: eight times the eden.
        let h8 = HeapState { threads: 8.0, ..h };
        let s8 = settled(0.10).size(&h8, &costs(), false);
        assert!(s8.eden > 7.0 * 1_990.0 * MIB, "{}", s8.eden / MIB);
    }

    #[test]
    fn a_full_old_generation_leaves_the_minimum_and_mixed_phases_use_it() {
        let c = costs();
        let h = HeapState {
            heap: 1_024.0 * MIB,
            old_used: 900.0 * MIB,
            survivors: 0.0,
            threads: 2.0,
        };
        let s = settled(0.01).size(&h, &c, false);
        assert!(
            (s.eden - 0.05 * 1_024.0 * MIB).abs() < 1.0,
            "{}",
            s.eden / MIB
        );
        let roomy = HeapState {
            old_used: 100.0 * MIB,
            ..h
        };
        let m = settled(0.01).size(&roomy, &c, true);
        assert!((m.eden - 0.05 * 1_024.0 * MIB).abs() < 1.0);
        let y = settled(0.01).size(&roomy, &c, false);
        assert!(y.eden > 5.0 * m.eden);
        // Never into the reserve.
        assert!(y.eden <= 1_024.0 * MIB * 0.9 - 100.0 * MIB);
    }

    #[test]
    fn adaptive_ihop_starts_marking_early_enough_for_what_is_promoted_meanwhile() {
        let heap = 1_000.0;
        let mut i = Ihop::new(0.45, true, 0.10, 0.05, 0.5);
        assert_eq!(i.threshold(heap), 450.0, "the initial threshold");
        for _ in 0..5 {
            i.marking(2.0);
            i.young_only(1.0, 50.0, 100.0);
        }
        // 850 target − (2 s × 50 B/s + 100 young) = 650.
        assert!(
            (i.threshold(heap) - 650.0).abs() < 1e-6,
            "{}",
            i.threshold(heap)
        );
        let fixed = Ihop::new(0.45, false, 0.10, 0.05, 0.5);
        assert_eq!(fixed.threshold(heap), 450.0);
    }

    #[test]
    fn regions_follow_the_heap_size() {
        assert_eq!(region(256.0 * MIB), MIB);
        assert_eq!(region(4_096.0 * MIB), 2.0 * MIB);
        assert_eq!(region(32_768.0 * MIB), 16.0 * MIB);
        assert_eq!(region(1e15), 32.0 * MIB);
    }
}

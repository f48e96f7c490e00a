//! Collector constants measured on real runtimes on this kind of machine
//! (`impl/gc/calibrate/run`, `docs/gc-calibration.md`).
//!
//! PROVISIONAL: placeholders until the calibration run lands; replaced by
//! measured figures before this crate is used by any study.

use crate::Time;

pub const GO_MARK_US_PER_MIB: f64 = 1_000.0;
pub const GO_MARK_FIXED_US: f64 = 200.0;
pub const GO_SWEEP_TERMINATION_US: Time = 30;
pub const GO_MARK_TERMINATION_US: Time = 60;

pub const G1_YOUNG_FIXED_US: f64 = 300.0;
pub const G1_COPY_US_PER_MIB: f64 = 2_000.0;
pub const G1_MARK_US_PER_MIB: f64 = 1_000.0;
pub const G1_REMARK_US: Time = 2_000;
pub const G1_CLEANUP_US: Time = 300;
pub const G1_FULL_FIXED_US: f64 = 2_000.0;
pub const G1_FULL_US_PER_MIB: f64 = 4_000.0;

//! The simulated replica's costs, measured on the real node.
//!
//! PROVISIONAL: placeholders until the calibration run lands.

use crate::cpu::ServiceTable;
use crate::memory::AllocTable;

pub const ALLOC: AllocTable =
    AllocTable { client_request: 256, message: 192, timer: 0, persisted: 0, per_payload_byte: 2.0, executed: 96 };

pub fn service() -> ServiceTable {
    ServiceTable::default()
}

/// Heap bytes per byte of key-value data (map buckets, headers, slices).
pub const GO_OVERHEAD: f64 = 1.15;
pub const G1_OVERHEAD: f64 = 1.3;

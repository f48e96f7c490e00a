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

/// Live heap bytes per byte of key-value data (keys and values), measured
/// with the same 23-byte keys and 500-byte values in Go
/// (`map[string][]byte`) and Java (`HashMap<String, byte[]>`):
/// docs/gc-calibration.md.
pub const GO_OVERHEAD: f64 = 1.18;
pub const G1_OVERHEAD: f64 = 1.25;

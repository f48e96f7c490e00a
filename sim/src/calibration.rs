//! The simulated replica's costs, measured on the real node
//! (docs/calibration.md).
//!
//! Measured 2026-11-23 on the project's 2-core VM (3 replicas and the load
//! generator on the same two cores, other work running: load average
//! 6–8), workload A, 500-byte values, 64 clients, 1,000 keys, at 2, 5, 10
//! and 20 k ops/s, by
//!
//! ```sh
//! impl/replica/calibrate/run.py --out results/calibrate --rates 2000,5000,10000,20000 --repeat 2
//! impl/replica/calibrate/fit.py results/calibrate
//! ```
//!
//! (non-negative least squares over protocol-loop turns; the fit's
//! quality and residuals are in docs/calibration.md).

use std::collections::BTreeMap;

use crate::cpu::{ServiceTable, StepCosts};
use crate::memory::AllocTable;

/// Bytes allocated per input and output (the whole process's allocation
/// over the turns, fitted per input kind, per byte of keys and values
/// decoded, per request executed, per reply and per message sent). Of the
/// 1.23 bytes allocated per byte decoded, 1.0 is the decoded value itself,
/// which stays live in the log and the store: the memory model allocates
/// that state itself (`Heap::after_step`: state grown, values replaced), so
/// only the rest, 0.23, is charged per payload byte here.
pub const ALLOC: AllocTable = AllocTable {
    client_request: 349,
    message: 0,
    timer: 0,
    persisted: 0,
    per_payload_byte: 0.23,
    executed: 69,
    reply: 318,
    send: 228,
};

/// CPU µs of the real node's protocol-loop thread (which also runs its
/// sockets' tasks), per turn, input, output, KiB and executed request, at
/// full speed (a core of its own). The wake-up excludes the 1.6 µs per
/// turn of the measurement itself.
pub fn service() -> ServiceTable {
    let messages: BTreeMap<String, f64> = [
        ("Accept", 1.03),
        ("Accepted", 1.40),
        ("Heartbeat", 44.70),
        ("HeartbeatReply", 3.48),
        ("ReadProbe", 1.03),
        ("ReadProbeAck", 2.71),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    ServiceTable {
        steps: Some(StepCosts {
            wakeup: 19.68,
            get: 0.78,
            write: 1.14,
            messages,
            // Kinds too rare in the calibration runs to fit (elections,
            // catch-up): the mean of the fitted message kinds.
            message: 2.0,
            timer: 9.65,
            persisted: 1.78,
            send: 1.36,
            reply: 1.95,
            persist: 0.62,
            input_kb: 2.24,
            output_kb: 0.48,
            executed: 0.99,
            speed: 1.0,
        }),
        ..ServiceTable::default()
    }
}

/// Live heap bytes per byte of key-value data (keys and values), measured
/// with the same 23-byte keys and 500-byte values in Go
/// (`map[string][]byte`) and Java (`HashMap<String, byte[]>`):
/// docs/gc-calibration.md.
pub const GO_OVERHEAD: f64 = 1.18;
pub const G1_OVERHEAD: f64 = 1.25;

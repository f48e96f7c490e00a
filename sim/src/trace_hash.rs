//! The run's fingerprint: every field of every trace event, in order,
//! through a fixed hash, so that two runs compare across builds and
//! machines without storing their traces.

use std::hash::{Hash, Hasher};

use stutter_core::TraceEvent;

/// FNV-1a over 64-bit words: fixed and platform-independent (little-endian
/// words), unlike std's randomly keyed SipHash; words rather than bytes
/// for 8x fewer multiplies.
pub struct TraceHash(u64);

impl Default for TraceHash {
    fn default() -> Self {
        TraceHash(0xcbf2_9ce4_8422_2325)
    }
}

impl TraceHash {
    pub fn add(&mut self, ev: &TraceEvent) {
        ev.hash(self);
    }

    pub fn value(&self) -> u64 {
        self.0
    }
}

impl Hasher for TraceHash {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
        for b in chunks.remainder() {
            self.write_u64(*b as u64);
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(i as u64);
    }
    fn write_u16(&mut self, i: u16) {
        self.write_u64(i as u64);
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(i as u64);
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
    fn write_u64(&mut self, i: u64) {
        self.0 ^= i;
        self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
    }
}

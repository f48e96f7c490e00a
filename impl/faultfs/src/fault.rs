//! Faults on command: writes and syncs that fail with ENOSPC or EIO, and
//! what a torn last write needs to be undone in part.

use serde::{Deserialize, Serialize};

/// The error a failing operation returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FailMode {
    /// No space left on device: writes, syncs, creations and renames fail;
    /// removals still work (they free space).
    Enospc,
    /// Input/output error: every operation that changes the file system
    /// fails, removals included.
    Eio,
}

impl FailMode {
    pub fn errno(self) -> i32 {
        match self {
            FailMode::Enospc => libc::ENOSPC,
            FailMode::Eio => libc::EIO,
        }
    }
}

/// A failure switched on: its mode and, if bounded, how many more
/// operations fail before it switches itself off (an error a retry clears).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fail {
    pub mode: FailMode,
    pub remaining: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Write,
    Sync,
    Create,
    Remove,
}

/// The last write not yet synced, with the bytes it overwrote, so that a
/// torn drop can undo its tail.
#[derive(Debug)]
pub(crate) struct TornWrite {
    pub ino: u64,
    pub off: u64,
    pub len: u64,
    pub before: Vec<u8>,
    pub old_size: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Faults {
    pub fail: Option<Fail>,
    pub failed_ops: u64,
    pub last_write: Option<TornWrite>,
}

impl Faults {
    /// Err if `op` must fail now.
    pub fn check(&mut self, op: Op) -> Result<(), i32> {
        let Some(f) = &mut self.fail else {
            return Ok(());
        };
        if op == Op::Remove && f.mode == FailMode::Enospc {
            return Ok(());
        }
        let errno = f.mode.errno();
        self.failed_ops += 1;
        if let Some(r) = &mut f.remaining {
            *r = r.saturating_sub(1);
            if *r == 0 {
                self.fail = None;
            }
        }
        Err(errno)
    }
}

/// A 64-bit mix (splitmix64's finalizer): the torn cut from a seed.
pub fn mix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

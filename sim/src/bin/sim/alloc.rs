//! The simulator's allocator: mimalloc, told to keep the memory a run
//! frees for the next run.
//!
//! A run allocates and frees a message, a request or a trace event per
//! step: mimalloc does that in about half the instructions of glibc's
//! malloc (docs/simulator-speed.md). When a run ends, everything it held
//! is freed at once; by default mimalloc then returns ("purges") those
//! pages to the OS, and the next run faults every one of them back in,
//! zeroed by the kernel: `sim bench --runs 30` took 5,911 minor page
//! faults so, 206 without purging (2026-12-06), for the same peak
//! resident size (74 MB). A simulator that runs seed after seed gains
//! nothing from giving memory back between them. Allocation addresses
//! never reach the simulation, so runs stay the same.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc v3's `mi_option_e`
/// (include/mimalloc.h; libmimalloc-sys names no constant for it).
/// -1: never purge.
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Freed memory stays with the process (call before the first run).
pub fn keep_freed_memory() {
    // SAFETY: mi_option_set only stores an integer in mimalloc's option
    // table (an atomic store); any option index below `_mi_option_last`
    // and any value are valid.
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_option_set(PURGE_DELAY, -1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_option_set_is_the_purge_delay() {
        // mimalloc v3's purge delay defaults to 1,000 ms and no other of
        // its options does: index 15 is the purge delay.
        // SAFETY: reads an option (an atomic load, initialized on first use).
        #[allow(unsafe_code)]
        let before = unsafe { libmimalloc_sys::mi_option_get(PURGE_DELAY) };
        assert_eq!(before, 1_000);
        keep_freed_memory();
        #[allow(unsafe_code)]
        // SAFETY: as above.
        let after = unsafe { libmimalloc_sys::mi_option_get(PURGE_DELAY) };
        assert_eq!(after, -1);
    }
}

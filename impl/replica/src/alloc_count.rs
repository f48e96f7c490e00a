//! Counts the bytes the process allocates and frees, for the calibration
//! of the simulator's allocation table (`replica --calibrate`) and for the
//! collector model a `[gc]` section runs against the node's real
//! allocation (`node::gc`).
//!
//! [`Counting`] wraps another global allocator (the replica binary wraps
//! mimalloc when built with the `alloc-count` feature, the default). It
//! counts only after [`enable`]: until then each call costs one relaxed
//! load and a branch. Counters are process-wide (every thread), because a
//! collected runtime's heap is: a record allocated by the protocol loop
//! and freed by the log thread is the loop's garbage all the same.
//!
//! A global allocator is unsafe code by nature (`GlobalAlloc` is an unsafe
//! trait): allowed in this module only.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

static ENABLED: AtomicBool = AtomicBool::new(false);
static ALLOCATED: AtomicU64 = AtomicU64::new(0);
static FREED: AtomicU64 = AtomicU64::new(0);
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

/// A global allocator that counts what passes through to `A`.
pub struct Counting<A>(pub A);

#[inline]
fn on() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

#[inline]
fn count_alloc(bytes: usize) {
    ALLOCATED.fetch_add(bytes as u64, Ordering::Relaxed);
    ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
}

#[inline]
fn count_free(bytes: usize) {
    FREED.fetch_add(bytes as u64, Ordering::Relaxed);
}

// SAFETY: every call is forwarded unchanged to the wrapped allocator; the
// counters touch no memory the allocator hands out.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Counting<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if on() {
            count_alloc(layout.size());
        }
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { self.0.alloc(layout) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if on() {
            count_alloc(layout.size());
        }
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { self.0.alloc_zeroed(layout) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if on() {
            count_free(layout.size());
        }
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { self.0.dealloc(ptr, layout) }
    }

    /// A reallocation is counted as a new block and the old one freed, as
    /// a collected runtime would see a grown buffer (copied, the old one
    /// garbage).
    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if on() {
            count_alloc(new_size);
            count_free(layout.size());
        }
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { self.0.realloc(ptr, layout, new_size) }
    }
}

/// The process's counters since [`enable`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Bytes allocated (reallocations count their new size).
    pub allocated: u64,
    /// Bytes freed (of blocks allocated before `enable` too).
    pub freed: u64,
    /// Number of allocations.
    pub allocations: u64,
}

impl Counts {
    /// Bytes allocated and not freed since `enable` (negative when more
    /// was freed than allocated, e.g. blocks allocated before).
    pub fn live_delta(&self) -> i64 {
        self.allocated as i64 - self.freed as i64
    }
}

pub fn counts() -> Counts {
    Counts {
        allocated: ALLOCATED.load(Ordering::Relaxed),
        freed: FREED.load(Ordering::Relaxed),
        allocations: ALLOCATIONS.load(Ordering::Relaxed),
    }
}

/// Starts counting. Returns whether counting works, i.e. whether the
/// process's global allocator is a [`Counting`] (checked with one
/// allocation): a replica built without the `alloc-count` feature cannot
/// calibrate or run a collector model.
pub fn enable() -> bool {
    ENABLED.store(true, Ordering::Relaxed);
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let probe = std::hint::black_box(Box::new([0u8; 64]));
    drop(probe);
    ALLOCATIONS.load(Ordering::Relaxed) > before
}

pub fn enabled() -> bool {
    on()
}

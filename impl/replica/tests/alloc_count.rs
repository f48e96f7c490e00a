//! The counting allocator counts what the process allocates and frees,
//! once switched on, and nothing before.

use stutter_replica::alloc_count::{self, Counting};

#[global_allocator]
static GLOBAL: Counting<std::alloc::System> = Counting(std::alloc::System);

#[test]
fn counts_allocations_frees_and_reallocations_after_enable() {
    let before_enable = alloc_count::counts();
    let early = vec![0u8; 10_000];
    assert_eq!(
        alloc_count::counts(),
        before_enable,
        "nothing is counted before enable"
    );
    assert!(
        alloc_count::enable(),
        "the counting allocator is the global one"
    );
    assert!(alloc_count::enabled());

    let a = alloc_count::counts();
    let v = std::hint::black_box(vec![1u8; 100_000]);
    let b = alloc_count::counts();
    assert!(b.allocated - a.allocated >= 100_000, "{a:?} -> {b:?}");
    assert!(b.allocations > a.allocations);
    drop(v);
    let c = alloc_count::counts();
    assert!(c.freed - b.freed >= 100_000, "{b:?} -> {c:?}");

    // A grown vector: its new size allocated, its old size freed.
    let mut g: Vec<u8> = Vec::with_capacity(1_000);
    g.extend_from_slice(&[7u8; 1_000]);
    let d = alloc_count::counts();
    g.reserve_exact(49_000);
    let e = alloc_count::counts();
    assert!(e.allocated - d.allocated >= 50_000, "{d:?} -> {e:?}");
    assert!(e.freed - d.freed >= 1_000, "{d:?} -> {e:?}");
    drop(g);

    // A block allocated before counting began is counted when freed:
    // live bytes may go below zero, as `live_delta` says.
    let f = alloc_count::counts();
    drop(early);
    let h = alloc_count::counts();
    assert!(h.freed - f.freed >= 10_000);
    assert!(h.live_delta() < f.live_delta());
}

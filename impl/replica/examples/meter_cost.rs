//! Prints what the calibration meter's own readings cost per protocol-loop
//! turn on this machine (`replica --calibrate` adds them to every turn it
//! measures): `cargo run --release -p stutter-replica --example meter_cost`.
//! The best of five rounds (the machine may be shared).

use std::time::Instant;

use stutter_replica::alloc_count::{self, Counting};

#[global_allocator]
static GLOBAL: Counting<std::alloc::System> = Counting(std::alloc::System);

fn best_ns(mut f: impl FnMut()) -> f64 {
    const N: u32 = 200_000;
    (0..5)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..N {
                f();
            }
            t.elapsed().as_nanos() as f64 / N as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    assert!(alloc_count::enable(), "the counting allocator is installed");
    let mut sink = 0u64;
    let clock = best_ns(|| sink = sink.wrapping_add(stutter_replica::thread_cpu::now_ns()));
    let counts = best_ns(|| sink = sink.wrapping_add(alloc_count::counts().allocated));
    let alloc = best_ns(|| {
        let b = std::hint::black_box(Box::new([0u8; 48]));
        sink = sink.wrapping_add(b[0] as u64);
    });
    println!("thread CPU clock read        {clock:7.1} ns (two per turn)");
    println!("allocation counters read     {counts:7.1} ns (two per turn)");
    println!("48-byte alloc + free counted {alloc:7.1} ns");
    println!(
        "per turn, readings only      {:7.1} ns",
        2.0 * (clock + counts)
    );
    std::hint::black_box(sink);
}

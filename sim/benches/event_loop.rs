//! The simulator's event loop, timed: the event queue alone at the size
//! and spread of a run's, and whole runs of the `sim bench` scenario
//! (events per second and runs per second of one core). Run with
//! `cargo bench -p stutter-sim --bench event_loop`; docs/simulator-speed.md
//! ("Speed and CI") has the figures and how to read them.

// Test code: unwrap, expect and panic are how a test fails (the
// workspace lints deny them in the code under test).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use stutter_sim::queue::Queue;
use stutter_sim::scenario::Scenario;

// As the `sim` binary: the allocator is part of the loop's cost.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A run's queue: about 150 pending events, most due within a few
/// milliseconds (messages, disk, CPU), some seconds away (faults, client
/// timeouts). Each step pops the earliest and schedules one more.
fn queue(c: &mut Criterion) {
    const STEPS: u64 = 100_000;
    let mut g = c.benchmark_group("queue");
    g.throughput(Throughput::Elements(STEPS));
    g.bench_function("pop_push_150_pending", |b| {
        b.iter(|| {
            let mut q: Queue<[u64; 16]> = Queue::default();
            let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
            let mut draw = move || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            let delay = |r: u64| {
                if r & 7 == 0 {
                    1_000_000 + r % 4_000_000
                } else {
                    r % 5_000
                }
            };
            for i in 0..150u64 {
                q.push(0, delay(draw()), [i; 16]);
            }
            let mut sum = 0u64;
            for _ in 0..STEPS {
                if let Some((now, ev)) = q.pop() {
                    sum = sum.wrapping_add(ev[0]);
                    q.push(now, now + delay(draw()), ev);
                }
            }
            sum
        })
    });
    g.finish();
}

/// Whole runs of `sim bench`'s scenario: 10 virtual seconds, 3 replicas,
/// 2,000 ops/s, memory-pressure pauses, every checker.
fn runs(c: &mut Criterion) {
    let s = Scenario::named("gc-memory-pressure").expect("preset");
    let events = stutter_sim::run(s.clone(), 1).events;
    let mut g = c.benchmark_group("run");
    g.sample_size(10);
    g.throughput(Throughput::Elements(events));
    g.bench_function("gc_memory_pressure_10s_events", |b| {
        b.iter(|| stutter_sim::run(s.clone(), 1).trace_hash)
    });
    g.finish();
}

criterion_group!(benches, queue, runs);
criterion_main!(benches);

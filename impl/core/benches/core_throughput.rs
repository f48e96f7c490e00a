//! CPU cost of the protocol core alone: requests pushed through a leader and
//! two followers in memory, with instant delivery and instant disk. Prints
//! requests per second of one core thread; the real node's budget per
//! request is what is left after networking and fsync.

use std::collections::VecDeque;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use rand_xoshiro::rand_core::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use stutter_core::*;

/// Clients of the load, registered before it.
const CLIENTS: u64 = 64;

struct Trio {
    replicas: Vec<Replica>,
    now: Time,
    queue: VecDeque<(ReplicaId, Input)>,
    /// Replies other than `Registered`.
    replies: usize,
    /// Replies that executed a request (`Done`).
    done: usize,
}

impl Trio {
    fn new(window: usize) -> Trio {
        let cfg = Config {
            window,
            ..Config::default()
        };
        let mut t = Trio {
            replicas: Vec::new(),
            now: 0,
            queue: VecDeque::new(),
            replies: 0,
            done: 0,
        };
        for id in 0..3u8 {
            let rng = Box::new(Xoshiro256PlusPlus::seed_from_u64(id as u64));
            t.replicas.push(Replica::new(id, cfg.clone(), rng));
        }
        for id in 0..3u8 {
            t.queue.push_back((id, Input::Start));
        }
        t.drain();
        t.now = 10_000_000;
        t.queue.push_back((0, Input::Timer(Timer::Election)));
        t.drain();
        assert_eq!(t.replicas[0].role(), Role::Leader);
        for nonce in 1..=CLIENTS {
            t.queue
                .push_back((0, Input::Request(Request::register(nonce))));
        }
        t.drain();
        (t.replies, t.done) = (0, 0);
        t
    }

    fn drain(&mut self) {
        let mut out = Vec::new();
        while let Some((id, input)) = self.queue.pop_front() {
            self.replicas[id as usize].handle(self.now, input, &mut out);
            for o in out.drain(..) {
                match o {
                    Output::Send { to, msg } => {
                        self.queue.push_back((to, Input::Message { from: id, msg }))
                    }
                    Output::Persist { token, .. } => {
                        self.queue.push_back((id, Input::Persisted { token }))
                    }
                    Output::Reply { reply, .. } => {
                        self.replies += usize::from(!matches!(reply, Reply::Registered { .. }));
                        self.done += usize::from(reply == Reply::Done);
                    }
                    Output::SetTimer { .. } | Output::Collect { .. } | Output::Trace(_) => {}
                }
            }
        }
    }
}

fn bench(c: &mut Criterion) {
    const N: u64 = 10_000;
    let mut g = c.benchmark_group("core");
    g.throughput(Throughput::Elements(N));
    for window in [1usize, 16] {
        g.bench_function(format!("put_500B_window_{window}"), |b| {
            b.iter_batched(
                || Trio::new(window),
                |mut t| {
                    for i in 0..N {
                        let req = Request::new(
                            REGISTERED_BASE + i % CLIENTS,
                            i / CLIENTS + 1,
                            Op::Put {
                                key: format!("user{:019}", i % 1000).into(),
                                value: bytes::Bytes::from(vec![b'x'; 500]),
                            },
                        );
                        t.queue.push_back((0, Input::Request(req)));
                        if i % CLIENTS == CLIENTS - 1 {
                            t.drain();
                        }
                    }
                    t.drain();
                    assert_eq!((t.replies as u64, t.done as u64), (N, N));
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

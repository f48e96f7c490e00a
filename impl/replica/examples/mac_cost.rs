//! Prints the CPU cost of sealing and opening one peer frame (the
//! per-frame HMAC-SHA256 of `peer_auth`), by frame size, on this machine:
//! `cargo run --release -p stutter-replica --example mac_cost`.
//! Times are per frame, the best of five rounds (the machine may be shared).

// Test code: unwrap, expect and panic are how a test fails (the
// workspace lints deny them in the code under test).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Instant;

use stutter_core::{Ballot, Message, Op, Request, Slot, Value};
use stutter_replica::peer_auth::{ClusterKey, NONCE_LEN};

fn accept_of(requests: usize, value_bytes: usize) -> Message {
    let reqs = (0..requests)
        .map(|i| {
            Request::new(
                1,
                i as u64,
                Op::Put {
                    key: format!("key-{i:019}").into(),
                    value: vec![b'v'; value_bytes].into(),
                },
            )
        })
        .collect();
    Message::Accept {
        ballot: Ballot(258),
        slot: Slot(9),
        value: Value::Batch(std::sync::Arc::new(reqs)),
        committed: None,
    }
}

fn main() {
    let key = ClusterKey::new(Some(b"mac cost secret, 32 bytes long.."));
    let cases = [
        (
            "heartbeat",
            Message::Heartbeat {
                ballot: Ballot(258),
                last_executed: Slot(9),
                global_last_executed: Slot(8),
            },
        ),
        ("accept of 1 put (500 B)", accept_of(1, 500)),
        ("accept of 16 puts", accept_of(16, 500)),
        ("accept of 256 puts", accept_of(256, 500)),
    ];
    for (name, msg) in cases {
        let mut frame = Vec::new();
        let (mut s, _) = key.session_of(1, 0, [1; NONCE_LEN], [2; NONCE_LEN]);
        s.seal(&msg, 1 << 30, &mut frame).expect("seal");
        let body_len = frame.len() - 4 - stutter_replica::peer_auth::TAG_LEN;
        let body = frame[4..4 + body_len].to_vec();
        let n = (20_000_000 / (body_len + 64)).clamp(1_000, 200_000);
        let mut best = f64::MAX;
        for _ in 0..5 {
            let (mut s, mut o) = key.session_of(1, 0, [1; NONCE_LEN], [2; NONCE_LEN]);
            let mut out = Vec::with_capacity(frame.len());
            let t = Instant::now();
            for _ in 0..n {
                out.clear();
                s.seal_body(&body, 1 << 30, &mut out).expect("seal");
                let tag = &out[out.len() - stutter_replica::peer_auth::TAG_LEN..];
                assert!(o.open(&out[4..out.len() - tag.len()], tag));
            }
            best = best.min(t.elapsed().as_secs_f64() / n as f64);
        }
        println!(
            "{name:<26} {body_len:>7} B body: seal + open {:>8.2} µs/frame ({:.2} GB/s)",
            best * 1e6,
            body_len as f64 / best / 1e9
        );
    }
}

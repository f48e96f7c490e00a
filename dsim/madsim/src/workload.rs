//! The clients: the real client library (`stutter_replica::client`) on
//! madsim client nodes. Each issues puts of unique values and gets on a few
//! keys, one at a time, and records them in the history; the final reader,
//! after the faults are healed, waits for the replicas to agree on how far
//! they executed and reads every key.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use madsim::runtime::Handle;
use madsim::task::{JoinHandle, NodeId};
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use stutter_core::{Op as CoreOp, Reply};
use stutter_replica::client::{status, Client, ClientError};
use stutter_replica::config::ClusterConfig;

use crate::cluster::client_ip;
use crate::history::{Finals, History, Kind, Op, Outcome};
use crate::Options;

/// Client id of the final reader (workload clients are 1..).
const FINAL_CLIENT: u64 = 1_000_000;

fn now() -> Duration {
    madsim::time::TimeHandle::current().elapsed()
}

fn key_bytes(k: u64) -> bytes::Bytes {
    bytes::Bytes::from(format!("k{k}"))
}

fn record(history: &Mutex<History>, op: Op) {
    history
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .ops
        .push(op);
}

/// Runs one operation through the client and records it.
async fn call(client: &mut Client, who: usize, key: u64, kind: Kind, history: &Mutex<History>) {
    let op = match kind {
        Kind::Put(v) => CoreOp::Put {
            key: key_bytes(key),
            value: bytes::Bytes::from(v.to_string()),
        },
        Kind::Get => CoreOp::Get {
            key: key_bytes(key),
        },
    };
    let invoke = now();
    let outcome = match client.call(op).await {
        Ok(Reply::Done) => Outcome::Ok(None),
        Ok(Reply::Value(v)) => {
            Outcome::Ok(v.and_then(|b| std::str::from_utf8(&b).ok()?.parse().ok()))
        }
        Ok(_)
        | Err(ClientError::Timeout)
        | Err(ClientError::Protocol(_))
        | Err(ClientError::SessionExpired) => Outcome::Unknown,
        Err(ClientError::Rejected(_)) => Outcome::Failed,
    };
    record(
        history,
        Op {
            client: who,
            key,
            kind,
            invoke,
            complete: now(),
            outcome,
        },
    );
}

/// Starts the workload's client nodes `c0..`; returns their ids and the
/// handles of their tasks.
pub fn start(
    handle: &Handle,
    cfg: &ClusterConfig,
    opts: &Options,
    seed: u64,
    history: Arc<Mutex<History>>,
) -> (Vec<NodeId>, Vec<JoinHandle<()>>) {
    let mut ids = Vec::new();
    let mut tasks = Vec::new();
    for c in 0..opts.clients {
        let addrs = cfg.client_addrs();
        let history = history.clone();
        let opts = opts.clone();
        let node = handle
            .create_node()
            .name(format!("c{c}"))
            .ip(client_ip(c))
            .build();
        ids.push(node.id());
        tasks.push(node.spawn(async move {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(
                seed ^ (c as u64 + 1).wrapping_mul(0xa076_1d64_78bd_642f),
            );
            // The deadline of a call (its retries included), drawn per
            // client: at 5 s every fault of the plan (2 s at most) is
            // ridden out and every call answered; at 1-2 s calls time out
            // and their outcome is unknown, which the checker must allow.
            let deadline = Duration::from_millis([1000, 2000, 5000][(rng.next_u64() % 3) as usize]);
            let mut client = Client::new(addrs, c as u64 + 1)
                .with_timeouts(Duration::from_millis(500), deadline);
            for i in 0..opts.ops {
                let key = rng.next_u64() % opts.keys.max(1);
                let kind = if rng.next_u64() % 2 == 0 {
                    Kind::Put((c as u64 + 1) * 1_000_000 + i as u64 + 1)
                } else {
                    Kind::Get
                };
                call(&mut client, c, key, kind, &history).await;
                madsim::time::sleep(Duration::from_millis(rng.next_u64() % 50)).await;
            }
        }));
    }
    (ids, tasks)
}

/// Starts the final reader on a node of its own: it waits (up to 60 s)
/// until every replica answers with the same `last_executed`, records
/// their digests, then reads every key.
pub fn finish(
    handle: &Handle,
    cfg: &ClusterConfig,
    opts: &Options,
    history: Arc<Mutex<History>>,
    finals: Arc<Mutex<Finals>>,
) -> JoinHandle<()> {
    let addrs = cfg.client_addrs();
    let keys = opts.keys;
    let node = handle
        .create_node()
        .name("final")
        .ip(client_ip(250))
        .build();
    node.spawn(async move {
        let give_up = now() + Duration::from_secs(60);
        loop {
            let mut seen = Vec::new();
            let mut detail = Vec::new();
            for a in &addrs {
                let s = status(a, Duration::from_millis(500)).await.ok();
                detail.push(match &s {
                    Some(s) => format!(
                        "r{} {:?} leader {:?} ballot {} executed {} global {} last {}",
                        s.id,
                        s.role,
                        s.leader,
                        s.ballot.0,
                        s.last_executed.0,
                        s.global_last_executed.0,
                        s.last_index.0
                    ),
                    None => "no answer".to_string(),
                });
                seen.push(s.map(|s| (s.last_executed.0, s.digest)));
            }
            let converged = match seen.first() {
                None => true,
                Some(first) => first
                    .is_some_and(|(le, _)| seen.iter().all(|s| s.is_some_and(|(l, _)| l == le))),
            };
            let stop = converged || now() > give_up;
            *finals.lock().unwrap_or_else(|p| p.into_inner()) = Finals {
                status: seen,
                converged,
                refused: Vec::new(),
                detail,
            };
            if stop {
                break;
            }
            madsim::time::sleep(Duration::from_millis(200)).await;
        }
        let mut client = Client::new(addrs, FINAL_CLIENT)
            .with_timeouts(Duration::from_millis(500), Duration::from_secs(10));
        for key in 0..keys {
            call(&mut client, usize::MAX, key, Kind::Get, &history).await;
        }
    })
}

//! The clients: the real client library (`stutter_replica::client`) on
//! turmoil client hosts, and (`Options::text_clients` of them) clients of
//! the text protocol (`text_client`). Each issues puts of unique values and
//! gets on a few keys, one at a time, and records them in the history; the final
//! reader, after the faults are healed, waits for the replicas to agree on
//! how far they executed and reads every key.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use stutter_core::{Op as CoreOp, Reply};
use stutter_replica::client::{status, Client, ClientError};
use stutter_replica::config::ClusterConfig;
use turmoil::Sim;

use crate::cluster::Refused;
use crate::history::{Finals, History, Kind, Op, Outcome};
use crate::text_client::TextClient;
use crate::Options;

/// Client id of the final reader (workload clients are 1..).
const FINAL_CLIENT: u64 = 1_000_000;

fn now() -> Duration {
    turmoil::sim_elapsed().unwrap_or_default()
}

fn key_bytes(k: u64) -> bytes::Bytes {
    bytes::Bytes::from(format!("k{k}"))
}

/// Runs one operation through the client and records it.
async fn call(client: &mut Client, who: usize, key: u64, kind: Kind, history: &RefCell<History>) {
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
    history.borrow_mut().ops.push(Op {
        client: who,
        key,
        kind,
        invoke,
        complete: now(),
        outcome,
    });
}

/// Registers the workload's client hosts `c0..`.
pub fn start(
    sim: &mut Sim<'_>,
    cfg: &ClusterConfig,
    opts: &Options,
    seed: u64,
    history: Rc<RefCell<History>>,
) {
    for c in 0..opts.clients {
        let addrs = cfg.client_addrs();
        let history = history.clone();
        let opts = opts.clone();
        sim.client(format!("c{c}"), async move {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(
                seed ^ (c as u64 + 1).wrapping_mul(0xa076_1d64_78bd_642f),
            );
            let text = c < opts.text_clients;
            let mut framed = (!text).then(|| {
                Client::new(addrs.clone(), c as u64 + 1)
                    .with_timeouts(Duration::from_millis(500), Duration::from_secs(5))
            });
            let mut text = text.then(|| TextClient::new(addrs, c));
            for i in 0..opts.ops {
                let key = rng.next_u64() % opts.keys.max(1);
                let kind = if rng.next_u64() % 2 == 0 {
                    Kind::Put((c as u64 + 1) * 1_000_000 + i as u64 + 1)
                } else {
                    Kind::Get
                };
                if let Some(client) = framed.as_mut() {
                    call(client, c, key, kind, &history).await;
                } else if let Some(client) = text.as_mut() {
                    let invoke = now();
                    let name = String::from_utf8_lossy(&key_bytes(key)).into_owned();
                    let outcome = client.call(&name, kind).await;
                    history.borrow_mut().ops.push(Op {
                        client: c,
                        key,
                        kind,
                        invoke,
                        complete: now(),
                        outcome,
                    });
                }
                tokio::time::sleep(Duration::from_millis(rng.next_u64() % 50)).await;
            }
            Ok(())
        });
    }
}

/// Registers the final reader: it waits (up to 60 s) until every replica
/// that runs (did not refuse on damaged state) answers with the same
/// `last_executed`, records their digests, then reads every key.
pub fn finish(
    sim: &mut Sim<'_>,
    cfg: &ClusterConfig,
    opts: &Options,
    history: Rc<RefCell<History>>,
    finals: Rc<RefCell<Finals>>,
    refused: Refused,
) {
    let addrs = cfg.client_addrs();
    let keys = opts.keys;
    sim.client("final", async move {
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
            let out: Vec<usize> = (0..seen.len())
                .filter(|i| refused.borrow().get(*i).copied().unwrap_or(false))
                .collect();
            let running: Vec<Option<(u64, u64)>> = seen
                .iter()
                .enumerate()
                .filter(|(i, _)| !out.contains(i))
                .map(|(_, s)| *s)
                .collect();
            // A majority refused (every replica, or 3 of 5): the others
            // have no quorum, cannot catch up, and nothing is required of
            // them but safety (their digests are still compared). Found
            // with 5 replicas, seeds 133 and 142 at --damage 0.2.
            let no_quorum = out.len() * 2 > seen.len();
            let converged = no_quorum
                || match running.first() {
                    None => true,
                    Some(first) => first.is_some_and(|(le, _)| {
                        running.iter().all(|s| s.is_some_and(|(l, _)| l == le))
                    }),
                };
            let stop = converged || now() > give_up;
            *finals.borrow_mut() = Finals {
                status: seen,
                converged,
                refused: out,
                detail,
            };
            if stop {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let mut client = Client::new(addrs, FINAL_CLIENT)
            .with_timeouts(Duration::from_millis(500), Duration::from_secs(10));
        for key in 0..keys {
            call(&mut client, usize::MAX, key, Kind::Get, &history).await;
        }
        Ok(())
    });
}

//! The preload: every key written once before the measured runs, with
//! blocking-style calls on a few tokio tasks (its speed does not matter).

use std::sync::Arc;

use tokio::sync::Mutex;

use std::time::Duration;

use crate::spec::RunSpec;
use crate::text_target::{Answer, CallError, TextConn};
use crate::workload::{Generator, Op};

/// Tries of one preload write before the preload fails. With the back-off
/// below they span some 15 s: a cluster electing a leader (Replicant's
/// election waits 1.5-2 commit intervals, seconds with a long interval)
/// answers "retry" or "leader is" meanwhile, and loading the data must
/// outlast that, whatever its speed.
const PRELOAD_TRIES: usize = 100;

async fn execute(
    conn: &mut TextConn,
    op: &Op,
    shared_redirects: &mut u64,
) -> Result<Answer, CallError> {
    let mut last = CallError::NotLeader;
    let mut backoff = Duration::from_millis(10);
    for tried in 0..PRELOAD_TRIES {
        match conn.call(op).await {
            Ok(a) => return Ok(a),
            Err(CallError::NotLeader) => {
                *shared_redirects += 1;
                conn.next_replica();
                last = CallError::NotLeader;
            }
            Err(CallError::Io(e)) => {
                conn.next_replica();
                last = CallError::Io(e);
            }
            Err(e @ (CallError::Unexpected(_) | CallError::SessionExpired)) => return Err(e),
        }
        // The next replica at once (a redirect usually finds the leader
        // there); after a round of the cluster without one, back off.
        if tried + 1 >= conn.replicas() {
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_millis(160));
        }
    }
    Err(last)
}

/// Writes every key once, with `connections` connections in parallel.
pub async fn preload(spec: &RunSpec, gen: &mut Generator) -> anyhow::Result<()> {
    let keys = gen.keys;
    let mut ops = Vec::with_capacity(keys as usize);
    for i in 0..keys {
        let key = gen.key(i);
        let value = gen.value(&key);
        ops.push(Op::Update { key, value });
    }
    let ops = Arc::new(Mutex::new(ops));
    let mut tasks = Vec::new();
    for c in 0..spec.connections.max(1) {
        let ops = ops.clone();
        let mut conn = TextConn::new(spec.addrs.clone(), c, spec.timeout);
        tasks.push(tokio::spawn(async move {
            let mut redirects = 0;
            loop {
                let Some(op) = ops.lock().await.pop() else {
                    return Ok::<(), anyhow::Error>(());
                };
                match execute(&mut conn, &op, &mut redirects).await {
                    Ok(Answer::Written) => {}
                    Ok(a) => anyhow::bail!("preload: {op:?} answered {a:?}"),
                    Err(e) => anyhow::bail!("preload failed: {e:?}"),
                }
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

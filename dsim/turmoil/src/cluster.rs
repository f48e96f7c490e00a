//! The simulated cluster: three replica hosts running the unchanged node
//! (`stutter_replica::node::run`) on turmoil's network and disk.

use std::time::{Duration, UNIX_EPOCH};

use stutter_replica::config::ClusterConfig;
use stutter_replica::node::{run, NodeOptions};
use turmoil::Sim;

use crate::faults::Plan;

pub const REPLICAS: usize = 3;
pub const PEER_PORT: u16 = 7000;
pub const CLIENT_PORT: u16 = 7001;
/// Where each replica keeps its log and snapshot on its simulated disk.
const DATA_DIR: &str = "/data";
/// Simulated time after which turmoil gives up (a run that never ends).
pub const TIME_LIMIT: Duration = Duration::from_secs(900);

pub fn host(i: usize) -> String {
    format!("r{i}")
}

/// A simulation seeded with `seed`, with the plan's disk faults.
pub fn build<'a>(seed: u64, plan: &Plan, corruption: f64) -> Sim<'a> {
    let mut b = turmoil::Builder::new();
    b.rng_seed(seed)
        // A fixed epoch: the core's clock and the client ids derive from it.
        .epoch(UNIX_EPOCH + Duration::from_secs(1_750_000_000))
        .simulation_duration(TIME_LIMIT)
        .min_message_latency(Duration::from_millis(1))
        .max_message_latency(Duration::from_millis(plan.max_latency_ms));
    let fs = b.fs();
    if plan.torn_writes {
        // A crash keeps a random prefix of each unsynced write, in blocks.
        fs.block_size(512);
    }
    fs.io_error_probability(plan.io_error_probability);
    fs.corruption_probability(corruption);
    b.build()
}

/// Registers the replica hosts and returns their configuration.
pub fn register(sim: &mut Sim<'_>, seed: u64) -> ClusterConfig {
    let mut toml = String::new();
    for i in 0..REPLICAS {
        let ip = sim.lookup(host(i));
        toml.push_str(&format!(
            "[[replica]]\nid = {i}\npeer_addr = \"{ip}:{PEER_PORT}\"\nclient_addr = \"{ip}:{CLIENT_PORT}\"\n\n"
        ));
    }
    // Frequent trims: snapshot files are written and segments retired many
    // times per run.
    toml.push_str("[protocol]\ntrim_every = 40\ntrim_grace_ms = 200\n");
    let cfg: ClusterConfig = match toml::from_str(&toml) {
        Ok(c) => c,
        Err(e) => panic!("the harness's own config does not parse: {e}"),
    };
    for i in 0..REPLICAS {
        let cfg = cfg.clone();
        sim.host(host(i), move || {
            let cfg = cfg.clone();
            async move {
                let opts = NodeOptions {
                    config: cfg,
                    id: i as stutter_core::ReplicaId,
                    data_dir: DATA_DIR.into(),
                    trace: None,
                    unsafe_no_fsync: false,
                    unsafe_local_reads: false,
                    calibrate: None,
                    seed: Some(seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
                };
                // The data directory exists before the replica starts (an
                // operator's step): its own entry is durable.
                if turmoil::fs::shim::std::fs::create_dir_all(DATA_DIR).is_ok() {
                    let _ = turmoil::fs::shim::std::fs::sync_dir("/");
                }
                // A fail-stop (a disk error) ends the host; the harness's
                // supervisor restarts it, as systemd would.
                if let Err(e) = run(opts).await {
                    tracing::warn!(replica = i, error = %format!("{e:#}"), "replica stopped");
                }
                Ok(())
            }
        });
    }
    cfg
}

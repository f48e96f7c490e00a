//! The simulated cluster: three replica hosts running the unchanged node
//! (`stutter_replica::node::run`) on turmoil's network and disk.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, UNIX_EPOCH};

use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use stutter_replica::config::ClusterConfig;
use stutter_replica::node::{run, NodeOptions};
use stutter_replica::wal::Damaged;
use turmoil::Sim;

use crate::faults::Plan;

/// Replicas of a run unless `Options::replicas` says otherwise.
pub const DEFAULT_REPLICAS: usize = 3;
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

/// Which replicas refused to start on damaged acceptor state; shared by
/// the hosts (who set it), the supervisor (who leaves them down) and the
/// final reader (who judges convergence among the others).
pub type Refused = Rc<RefCell<Vec<bool>>>;

/// Registers the replica hosts, one per entry of `refused`, and returns
/// their configuration. `damage`:
/// probability that a restarting replica finds one byte of one of its
/// data files flipped for good (bit rot while it was down).
/// `trace_dir`: each replica writes its trace there
/// ([`crate::node_traces`]).
pub fn register(
    sim: &mut Sim<'_>,
    seed: u64,
    damage: f64,
    refused: Refused,
    trace_dir: Option<&std::path::Path>,
) -> anyhow::Result<ClusterConfig> {
    let replicas = refused.borrow().len();
    let mut toml = String::new();
    for i in 0..replicas {
        let ip = sim.lookup(host(i));
        toml.push_str(&format!(
            "[[replica]]\nid = {i}\npeer_addr = \"{ip}:{PEER_PORT}\"\nclient_addr = \"{ip}:{CLIENT_PORT}\"\n\n"
        ));
    }
    // Frequent trims: snapshot files are written and segments retired many
    // times per run.
    // Pre-vote on, the replica's default, traced runs included (the trace
    // spec reads its steps since issue 17).
    toml.push_str("[protocol]\ntrim_every = 40\ntrim_grace_ms = 200\npre_vote = true\n");
    let cfg: ClusterConfig = toml::from_str(&toml)
        .map_err(|e| anyhow::anyhow!("the harness's own config does not parse: {e}"))?;
    for i in 0..replicas {
        let cfg = cfg.clone();
        let refused = refused.clone();
        let trace_dir = trace_dir.map(std::path::Path::to_path_buf);
        let starts = Rc::new(Cell::new(0u64));
        sim.host(host(i), move || {
            let cfg = cfg.clone();
            let refused = refused.clone();
            let start = starts.get();
            starts.set(start + 1);
            let trace = trace_dir.as_deref().map(|d| crate::node_traces::file(d, i, start));
            async move {
                let opts = NodeOptions {
                    config: cfg,
                    id: i as stutter_core::ReplicaId,
                    data_dir: DATA_DIR.into(),
                    trace,
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
                if start > 0 && damage > 0.0 {
                    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ ((i as u64) << 48) ^ start.wrapping_mul(0xd1b5_4a32_d192_ed03));
                    if ((rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < damage {
                        rot_one_byte(&mut rng, i);
                    }
                }
                // A fail-stop (a disk error) ends the host; the harness's
                // supervisor restarts it, as systemd would. A refusal on
                // damaged state is final: the supervisor leaves it down.
                if let Err(e) = run(opts).await {
                    let damaged = e.chain().find_map(Damaged::find).is_some();
                    if damaged {
                        refused.borrow_mut()[i] = true;
                    }
                    tracing::warn!(replica = i, damaged, error = %format!("{e:#}"), "replica stopped");
                }
                Ok(())
            }
        });
    }
    Ok(cfg)
}

/// Flips one byte of one of replica `i`'s data files (segments and
/// `snapshot.bin`), persistently: the damage a disk can do while a
/// replica is down, which no re-read repairs.
fn rot_one_byte(rng: &mut Xoshiro256PlusPlus, i: usize) {
    use std::os::unix::fs::FileExt;
    use turmoil::fs::shim::std::fs;
    let Ok(entries) = fs::read_dir(DATA_DIR) else {
        return;
    };
    let mut files: Vec<_> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n == "snapshot.bin" || n.ends_with(".log"))
        })
        .collect();
    files.sort();
    if files.is_empty() {
        return;
    }
    let path = &files[(rng.next_u64() % files.len() as u64) as usize];
    let Ok(len) = fs::metadata(path).map(|m| m.len()) else {
        return;
    };
    if len == 0 {
        return;
    }
    let off = rng.next_u64() % len;
    let flip = (rng.next_u64() % 255) as u8 + 1;
    let Ok(f) = fs::OpenOptions::new().read(true).write(true).open(path) else {
        return;
    };
    let mut b = [0u8; 1];
    // A read corrupted by the simulation only changes which wrong byte is
    // written (and, one time in 255, writes the right one back).
    if f.read_at(&mut b, off).is_ok()
        && f.write_at(&[b[0] ^ flip], off).is_ok()
        && f.sync_all().is_ok()
    {
        tracing::warn!(target: "dsim", replica = i, file = %path.display(), offset = off, "disk damage: one byte flipped for good");
    }
}

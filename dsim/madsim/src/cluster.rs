//! The simulated cluster: replica nodes running the unchanged node
//! (`stutter_replica::node::run`) on madsim's network and clock, each with
//! its own data directory on the replica's in-memory simulated disk
//! (`stutter_replica::platform::fs` under the `madsim` feature).

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

use madsim::runtime::Handle;
use madsim::task::NodeId;
use stutter_replica::config::ClusterConfig;
use stutter_replica::node::{run, NodeOptions};
use stutter_replica::platform::fs as simfs;

/// Replicas of a run unless `Options::replicas` says otherwise.
pub const DEFAULT_REPLICAS: usize = 3;
pub const PEER_PORT: u16 = 7000;
pub const CLIENT_PORT: u16 = 7001;

pub fn replica_ip(i: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, i as u8 + 1))
}

pub fn client_ip(c: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 1, c as u8 + 1))
}

/// The cluster's configuration: `replicas` replicas at 10.0.0.1.., with
/// frequent trims (snapshots written and segments retired many times per
/// run), as in the turmoil layer. Pre-vote on, the replica's default,
/// traced runs included (the trace spec reads its steps since issue 17).
pub fn config(replicas: usize, gc: Option<&GcMode>) -> anyhow::Result<ClusterConfig> {
    let mut toml = String::new();
    for i in 0..replicas {
        let ip = replica_ip(i);
        toml.push_str(&format!("[[replica]]\nid = {i}\npeer_addr = \"{ip}:{PEER_PORT}\"\nclient_addr = \"{ip}:{CLIENT_PORT}\"\n\n"));
    }
    toml.push_str("[protocol]\ntrim_every = 40\ntrim_grace_ms = 200\npre_vote = true\n");
    if let Some(g) = gc {
        toml.push_str(&g.section());
    }
    toml::from_str(&toml)
        .map_err(|e| anyhow::anyhow!("the harness's own config does not parse: {e}"))
}

/// The collector model every replica runs in a GC run (`[gc]`, docs/
/// replica-gc.md "Collector model"; under madsim driven in virtual time by
/// the node's `gc_madsim.rs`).
#[derive(Clone, Debug, PartialEq)]
pub struct GcMode {
    /// `go` or `g1`.
    pub model: String,
    /// The memory limit (Go's GOMEMLIMIT, G1's -Xmx) over the data set.
    pub memory_ratio: f64,
    /// Data the modelled heap holds besides the node's own state, MiB.
    pub dataset_mib: u64,
    /// GC coordination (Blade): long collections wait for the protocol's
    /// grant, a leader hands off first.
    pub blade: bool,
}

impl GcMode {
    /// Memory tight enough that a run of the default workload (a few
    /// hundred KiB allocated per replica, most by the leader) collects:
    /// Go with a 64 MiB data set and GOMEMLIMIT at 1.19× (76 MiB: the heap
    /// goal, 85 % of the limit, leaves about 0.6 MiB to allocate; each
    /// cycle marks 64 MiB); G1 with 8 MiB and -Xmx at 1.15× (9 MiB: the
    /// old generation is past the marking threshold, eden is a few hundred
    /// KiB). Measured on seeds 0..20: docs/simulator-madsim.md.
    pub fn tight(model: &str, blade: bool) -> GcMode {
        let (dataset_mib, memory_ratio) = if model == "go" { (64, 1.19) } else { (8, 1.15) };
        GcMode {
            model: model.to_string(),
            memory_ratio,
            dataset_mib,
            blade,
        }
    }

    /// The memory limit in whole MiB (the config's unit), above the data.
    pub fn memory_limit_mib(&self) -> u64 {
        ((self.dataset_mib as f64 * self.memory_ratio).round() as u64).max(self.dataset_mib + 1)
    }

    /// The `[gc]` section: one core, as the node's one runtime thread.
    pub fn section(&self) -> String {
        format!(
            "[gc]\nmodel = \"{}\"\nmemory_limit_mib = {}\ncores = 1.0\ndataset_mib = {}\ncoordinated = {}\n",
            self.model,
            self.memory_limit_mib(),
            self.dataset_mib,
            self.blade
        )
    }
}

/// Creates one madsim node per replica; each runs the node from its
/// initial task, which madsim runs again on every `restart`.
pub fn data_dir(dir: &Path, i: usize) -> std::path::PathBuf {
    dir.join(format!("r{i}"))
}

pub fn start(
    handle: &Handle,
    cfg: &ClusterConfig,
    seed: u64,
    dir: &Path,
    no_fsync: bool,
    trace_dir: Option<&Path>,
) -> anyhow::Result<Vec<NodeId>> {
    let mut ids = Vec::new();
    for i in 0..cfg.replica.len() {
        let data_dir = data_dir(dir, i);
        let trace_dir = trace_dir.map(Path::to_path_buf);
        let incarnation = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        // The data directory exists before the replica starts (an
        // operator's step).
        simfs::create_dir_all(&data_dir)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", data_dir.display()))?;
        let cfg = cfg.clone();
        let node = handle
            .create_node()
            .name(format!("r{i}"))
            .ip(replica_ip(i))
            .init(move || {
                let k = incarnation.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let opts = NodeOptions {
                    config: cfg.clone(),
                    id: i as stutter_core::ReplicaId,
                    data_dir: data_dir.clone(),
                    trace: trace_dir
                        .as_deref()
                        .map(|d| crate::node_traces::file(d, i, k)),
                    unsafe_no_fsync: no_fsync,
                    unsafe_local_reads: false,
                    calibrate: None,
                    seed: Some(seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
                };
                async move {
                    // A fail-stop ends the node; the driver's supervisor
                    // restarts it, as systemd would.
                    if let Err(e) = run(opts).await {
                        tracing::warn!(replica = i, error = %format!("{e:#}"), "replica stopped");
                    }
                }
            })
            .build();
        ids.push(node.id());
    }
    Ok(ids)
}

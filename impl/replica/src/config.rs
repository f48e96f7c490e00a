//! The cluster configuration file (TOML).
//!
//! ```toml
//! [[replica]]
//! id = 0
//! peer_addr = "127.0.0.1:7101"
//! client_addr = "127.0.0.1:7201"
//! # ... one [[replica]] per member, ids 0..n
//!
//! [protocol]              # optional; times in milliseconds
//! heartbeat_ms = 50
//! election_timeout_ms = 300
//! election_jitter_ms = 300
//! window = 16
//! max_batch = 256
//! pre_vote = true         # pre-vote and leader stickiness (default on)
//!
//! [storage]               # optional
//! sync_interval_us = 1000 # at most one write-ahead-log fsync per interval
//!
//! [security]              # optional, but without it peers are unauthenticated
//! cluster_secret_file = "secret"  # or cluster_secret = "..." (at least 16 bytes)
//!
//! [limits]                # optional; defaults below
//! max_client_connections = 1024
//! max_inflight_per_connection = 1024
//! max_client_frame_kb = 4096
//! max_peer_frame_mb = 256
//! client_idle_timeout_s = 60      # no request for this long: closed (0 = never)
//! client_request_timeout_s = 10   # a request begun must be complete within this
//! client_evict_idle_ms = 1000     # at the cap, one idle this long gives way
//!
//! [gc]                    # optional; a collector model run against the
//! model = "go"            # node's real allocation: none (default) | go | g1
//! memory_limit_mib = 96   # go: GOMEMLIMIT; g1: -Xmx (default 1024)
//! gogc = 100              # go: GOGC; -1 is off (only the limit paces)
//! cores = 1.0             # cores the modelled runtime has
//! dataset_mib = 0         # data it holds besides the node's real state
//! coordinated = false     # GC coordination (Blade): long collections wait
//!                         # for the protocol's grant, a leader hands off first
//! handoff_grace_ms = 250  # after a hand-off, how long the old leader
//!                         # redirects its clients before it collects
//! handoff = "fast"        # with coordination: fast (the default) | wait
//! ```

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use stutter_core::ReplicaId;

#[derive(Clone, Debug, Deserialize)]
pub struct ReplicaAddr {
    pub id: ReplicaId,
    pub peer_addr: String,
    pub client_addr: String,
}

#[derive(Clone, Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Protocol {
    pub heartbeat_ms: Option<u64>,
    pub election_timeout_ms: Option<u64>,
    pub election_jitter_ms: Option<u64>,
    pub window: Option<usize>,
    pub max_batch: Option<usize>,
    pub max_pending: Option<usize>,
    pub trim_every: Option<u64>,
    pub trim_mb: Option<u64>,
    pub trim_grace_ms: Option<u64>,
    /// Pre-vote and leader stickiness (`stutter_core::Config::pre_vote`,
    /// on by default): a replica cut off from the leader alone cannot
    /// unseat it when it returns.
    pub pre_vote: Option<bool>,
    /// At most this many client sessions (`stutter_core::Config::session_limit`,
    /// 100,000 by default; 0: no bound).
    /// Must be the same in every replica's file: expiry is decided by
    /// executing the log.
    pub session_limit: Option<usize>,
}

#[derive(Clone, Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Storage {
    /// The write-ahead log syncs at most once per this many microseconds;
    /// what arrives meanwhile joins the next group commit. Every `fdatasync`
    /// writes whole pages and costs a VM exit here, so syncing less often
    /// saves disk bandwidth and CPU for at most this much added latency.
    pub sync_interval_us: Option<u64>,
}

/// Default of [`Storage::sync_interval_us`] (docs/performance.md).
pub const DEFAULT_SYNC_INTERVAL_US: u64 = 1000;

/// The cluster secret that authenticates replicas to each other
/// (docs/replica-hardening.md, "Peer authentication"). Give one of the two.
#[derive(Clone, Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Security {
    /// The secret itself (at least [`MIN_SECRET_LEN`] bytes).
    pub cluster_secret: Option<String>,
    /// A file holding the secret (a trailing newline is ignored); a
    /// relative path is relative to the config file.
    pub cluster_secret_file: Option<std::path::PathBuf>,
}

/// A shorter secret is refused: it could be guessed.
pub const MIN_SECRET_LEN: usize = 16;

/// Caps on what clients and peers can make a replica hold.
#[derive(Clone, Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Client connections served at once; one more is answered with an
    /// error and closed.
    pub max_client_connections: Option<usize>,
    /// Requests of one framed connection waiting for their replies; past
    /// it the replica stops reading that connection until replies go out.
    pub max_inflight_per_connection: Option<usize>,
    /// Largest client frame (or text line), KiB.
    pub max_client_frame_kb: Option<usize>,
    /// Largest peer frame, MiB (at least 2). Snapshots travel in parts of
    /// 1 MiB (`peer_frame.rs`), the first with the session table: this must
    /// hold a part and that table, not the whole state machine.
    pub max_peer_frame_mb: Option<usize>,
    /// A client connection that sends no request for this long is closed
    /// (0: never). Longer than a reply can take (10 s).
    pub client_idle_timeout_s: Option<u64>,
    /// A request (frame or line) whose first byte came must be complete
    /// within this; the connection is closed otherwise.
    pub client_request_timeout_s: Option<u64>,
    /// At the cap, a connection idle this long gives its place to a new one.
    pub client_evict_idle_ms: Option<u64>,
}

/// [`Limits`] with the defaults filled in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caps {
    pub max_client_connections: usize,
    pub max_inflight_per_connection: usize,
    pub max_client_frame: usize,
    pub max_peer_frame: usize,
    pub client_idle_timeout: Option<Duration>,
    pub client_request_timeout: Duration,
    pub client_evict_idle: Duration,
}

impl Default for Caps {
    fn default() -> Caps {
        Caps {
            // Room for bench (128 connections by default) and YCSB many
            // times over; each connection holds a socket and two small
            // buffers (about 70 KiB).
            max_client_connections: 1024,
            max_inflight_per_connection: 1024,
            max_client_frame: 4 << 20,
            max_peer_frame: 256 << 20,
            client_idle_timeout: Some(Duration::from_secs(60)),
            client_request_timeout: Duration::from_secs(10),
            client_evict_idle: Duration::from_secs(1),
        }
    }
}

impl Limits {
    pub fn caps(&self) -> Caps {
        let d = Caps::default();
        Caps {
            max_client_connections: self
                .max_client_connections
                .unwrap_or(d.max_client_connections)
                .max(1),
            max_inflight_per_connection: self
                .max_inflight_per_connection
                .unwrap_or(d.max_inflight_per_connection)
                .max(1),
            max_client_frame: self
                .max_client_frame_kb
                .map_or(d.max_client_frame, |k| k.saturating_mul(1 << 10))
                .max(64),
            max_peer_frame: self
                .max_peer_frame_mb
                .map_or(d.max_peer_frame, |m| m.saturating_mul(1 << 20))
                .max(2 * crate::peer_frame::PART_BYTES),
            client_idle_timeout: match self.client_idle_timeout_s {
                None => d.client_idle_timeout,
                Some(0) => None,
                Some(s) => Some(Duration::from_secs(s)),
            },
            client_request_timeout: self
                .client_request_timeout_s
                .map_or(d.client_request_timeout, |s| Duration::from_secs(s.max(1))),
            client_evict_idle: self
                .client_evict_idle_ms
                .map_or(d.client_evict_idle, Duration::from_millis),
        }
    }
}

/// A garbage-collector model the node runs against its real allocation
/// (docs/replica-gc.md, "Collector model"). Off unless `model` is `go` or
/// `g1`.
#[derive(Clone, Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Gc {
    /// `none` (the default), `go` or `g1`.
    pub model: Option<String>,
    /// Go: the soft memory limit (GOMEMLIMIT), MiB; none by default.
    /// G1: the heap size (-Xmx), MiB; 1024 by default.
    pub memory_limit_mib: Option<u64>,
    /// Go: GOGC (100 by default); a negative value turns the GOGC pacer
    /// off, as `debug.SetGCPercent(-1)` does, leaving the memory limit.
    pub gogc: Option<i64>,
    /// Cores the modelled runtime has (the share its concurrent workers
    /// take is a share of these). 1 by default.
    pub cores: Option<f64>,
    /// Data the modelled heap holds besides the node's real state, MiB
    /// (never materialized: the simulator's `dataset_mib`). 0 by default.
    pub dataset_mib: Option<u64>,
    /// GC coordination in the manner of Blade (docs/protocol-gc-coordination.md): the
    /// model's long collections wait for the protocol's grant, and a
    /// leader hands leadership off first. Off by default; every replica of
    /// a cluster should agree.
    pub coordinated: Option<bool>,
    /// With coordination: how long an old leader redirects its clients
    /// after a hand-off before it asks for its grant (Config::
    /// gc_handoff_grace). Longer than most clients' gap between requests,
    /// or the clients that sent nothing meanwhile wait out its pause.
    pub handoff_grace_ms: Option<u64>,
    /// With coordination, how a leader hands off: `fast` (the default:
    /// `TimeoutNow` carries the old leader's promise, is sent at once, and
    /// every `Accept` carries the commit point; Config::
    /// gc_handoff_promise, gc_handoff_eager, commit_on_accept) or `wait`
    /// (the target is brought up to date first and runs a full election;
    /// docs/gc-study-blade.md, "The fast hand-off"). Every replica of a cluster
    /// must agree: the messages differ.
    pub handoff: Option<String>,
}

impl Gc {
    /// The collector model the section describes.
    pub fn model(&self) -> Result<stutter_gc::GcModel> {
        use stutter_gc::{G1Params, GcModel, GoParams};
        let mib = |m: u64| m.saturating_mul(1 << 20);
        Ok(match self.model.as_deref().unwrap_or("none") {
            "none" => GcModel::None,
            "go" => GcModel::Go(GoParams {
                gogc: match self.gogc {
                    None => Some(100),
                    Some(g) if g < 0 => None,
                    Some(g) => Some(u32::try_from(g).context("[gc] gogc is too large")?),
                },
                memory_limit: self.memory_limit_mib.map(mib),
                ..GoParams::default()
            }),
            "g1" => GcModel::G1(G1Params {
                heap_size: mib(self.memory_limit_mib.unwrap_or(1024)),
                ..G1Params::default()
            }),
            other => bail!("[gc] model {other:?}: none, go or g1"),
        })
    }

    /// Whether a coordinated hand-off is the fast one (`handoff`).
    pub fn fast_handoff(&self) -> Result<bool> {
        match self.handoff.as_deref().unwrap_or("fast") {
            "fast" => Ok(self.coordinated.unwrap_or(false)),
            "wait" => Ok(false),
            other => bail!("[gc] handoff {other:?}: fast or wait"),
        }
    }

    pub fn cores(&self) -> f64 {
        self.cores.unwrap_or(1.0)
    }

    pub fn dataset_bytes(&self) -> u64 {
        self.dataset_mib.unwrap_or(0).saturating_mul(1 << 20)
    }

    fn validate(&self) -> Result<()> {
        let m = self.model()?;
        if !(self.cores() > 0.0 && self.cores() <= 64.0) {
            bail!("[gc] cores must be in (0, 64]");
        }
        if matches!(m, stutter_gc::GcModel::G1(_)) && self.gogc.is_some() {
            bail!("[gc] gogc applies to model = \"go\" only");
        }
        if self.memory_limit_mib == Some(0) {
            bail!("[gc] memory_limit_mib must be positive");
        }
        self.fast_handoff()?;
        Ok(())
    }
}

#[derive(Clone, Debug, Deserialize)]
pub struct ClusterConfig {
    pub replica: Vec<ReplicaAddr>,
    #[serde(default)]
    pub protocol: Protocol,
    #[serde(default)]
    pub storage: Storage,
    #[serde(default)]
    pub security: Security,
    #[serde(default)]
    pub limits: Limits,
    #[serde(default)]
    pub gc: Gc,
    /// Where the file was read from (relative secret file paths start
    /// there).
    #[serde(skip)]
    pub dir: Option<std::path::PathBuf>,
}

impl ClusterConfig {
    pub fn load(path: &Path) -> Result<ClusterConfig> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let mut cfg: ClusterConfig =
            toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        cfg.dir = path.parent().map(Path::to_path_buf);
        cfg.validate()?;
        Ok(cfg)
    }

    /// The cluster secret, or `None` if the config names none (peers are
    /// then unauthenticated). A secret that is too short, or both forms
    /// at once, is an error.
    pub fn cluster_secret(&self) -> Result<Option<Vec<u8>>> {
        let s = &self.security;
        let secret = match (&s.cluster_secret, &s.cluster_secret_file) {
            (Some(_), Some(_)) => {
                bail!("[security]: give cluster_secret or cluster_secret_file, not both")
            }
            (Some(v), None) => v.as_bytes().to_vec(),
            (None, Some(file)) => {
                let path = match &self.dir {
                    Some(dir) if file.is_relative() => dir.join(file),
                    _ => file.clone(),
                };
                let mut bytes = std::fs::read(&path)
                    .with_context(|| format!("reading the cluster secret {}", path.display()))?;
                while matches!(bytes.last(), Some(b'\n' | b'\r')) {
                    bytes.pop();
                }
                bytes
            }
            (None, None) => return Ok(None),
        };
        if secret.len() < MIN_SECRET_LEN {
            bail!(
                "[security]: the cluster secret has {} bytes; it needs at least {MIN_SECRET_LEN}",
                secret.len()
            );
        }
        Ok(Some(secret))
    }

    /// Client addresses resolved to socket addresses, in replica order.
    pub fn client_socket_addrs(&self) -> Result<Vec<SocketAddr>> {
        self.replica
            .iter()
            .map(|r| resolve(&r.client_addr))
            .collect()
    }

    fn validate(&self) -> Result<()> {
        if self.replica.is_empty() {
            bail!("the config lists no [[replica]]");
        }
        if self.replica.len() > usize::from(ReplicaId::MAX) {
            bail!("at most {} replicas", ReplicaId::MAX);
        }
        for (i, r) in self.replica.iter().enumerate() {
            if r.id as usize != i {
                bail!(
                    "replica ids must be 0..n in order; entry {i} has id {}",
                    r.id
                );
            }
        }
        self.gc.validate()
    }

    pub fn n(&self) -> usize {
        self.replica.len()
    }

    pub fn get(&self, id: ReplicaId) -> Option<&ReplicaAddr> {
        self.replica.get(id as usize)
    }

    pub fn client_addrs(&self) -> Vec<String> {
        self.replica.iter().map(|r| r.client_addr.clone()).collect()
    }

    /// The core's parameters: defaults overridden by `[protocol]`.
    pub fn core_config(&self) -> stutter_core::Config {
        let d = stutter_core::Config::default();
        let p = &self.protocol;
        let ms = |v: Option<u64>, default: u64| v.map_or(default, |m| m * 1000);
        let fast = self.gc.fast_handoff().unwrap_or(false);
        stutter_core::Config {
            n: self.n(),
            heartbeat_interval: ms(p.heartbeat_ms, d.heartbeat_interval),
            election_timeout: ms(p.election_timeout_ms, d.election_timeout),
            election_jitter: ms(p.election_jitter_ms, d.election_jitter),
            window: p.window.unwrap_or(d.window),
            max_batch: p.max_batch.unwrap_or(d.max_batch),
            max_pending: p.max_pending.unwrap_or(d.max_pending),
            trim_every: p.trim_every.unwrap_or(d.trim_every),
            trim_bytes: p.trim_mb.map_or(d.trim_bytes, |mb| mb << 20),
            trim_grace: ms(p.trim_grace_ms, d.trim_grace),
            gc_coordination: self.gc.coordinated.unwrap_or(false),
            gc_handoff_grace: ms(self.gc.handoff_grace_ms, d.gc_handoff_grace),
            // `validate` refused any other value.
            gc_handoff_promise: fast,
            gc_handoff_eager: fast,
            commit_on_accept: fast,
            pre_vote: p.pre_vote.unwrap_or(d.pre_vote),
            // TOML has no integer as large as `usize::MAX`: 0 stands for it.
            session_limit: match p.session_limit {
                Some(0) => usize::MAX,
                Some(n) => n,
                None => d.session_limit,
            },
            ..d
        }
    }
}

/// Resolves `host:port` (first address).
pub fn resolve(addr: &str) -> Result<SocketAddr> {
    use std::net::ToSocketAddrs;
    addr.to_socket_addrs()
        .with_context(|| format!("bad address {addr}"))?
        .next()
        .with_context(|| format!("{addr} resolves to no address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_maps_protocol_parameters() {
        let cfg: ClusterConfig = toml::from_str(
            r#"
            [[replica]]
            id = 0
            peer_addr = "127.0.0.1:1"
            client_addr = "127.0.0.1:2"
            [[replica]]
            id = 1
            peer_addr = "127.0.0.1:3"
            client_addr = "127.0.0.1:4"
            [protocol]
            heartbeat_ms = 20
            window = 4
            [storage]
            sync_interval_us = 250
            "#,
        )
        .unwrap();
        cfg.validate().unwrap();
        assert_eq!(cfg.storage.sync_interval_us, Some(250));
        let c = cfg.core_config();
        assert_eq!(c.n, 2);
        assert_eq!(c.heartbeat_interval, 20_000);
        assert_eq!(c.window, 4);
        assert_eq!(
            c.election_timeout,
            stutter_core::Config::default().election_timeout
        );
        assert!(c.pre_vote, "pre-vote is on unless the file turns it off");
        assert_eq!(c.session_limit, 100_000, "sessions are bounded by default");
        let off: ClusterConfig =
            toml::from_str("[[replica]]\nid = 0\npeer_addr = \"a:1\"\nclient_addr = \"a:2\"\n[protocol]\npre_vote = false\nsession_limit = 50\n")
                .unwrap();
        assert!(!off.core_config().pre_vote);
        assert_eq!(off.core_config().session_limit, 50);
        // The switches of clients that chose their own ids are gone: a
        // file that still sets one is refused, not silently obeyed.
        for gone in ["registered_clients_only = false", "session_tombstones = 8"] {
            let text = format!("[[replica]]\nid = 0\npeer_addr = \"a:1\"\nclient_addr = \"a:2\"\n[protocol]\n{gone}\n");
            assert!(toml::from_str::<ClusterConfig>(&text).is_err(), "{gone}");
        }
        let unbounded: ClusterConfig =
            toml::from_str("[[replica]]\nid = 0\npeer_addr = \"a:1\"\nclient_addr = \"a:2\"\n[protocol]\nsession_limit = 0\n").unwrap();
        assert_eq!(unbounded.core_config().session_limit, usize::MAX);
    }

    fn with_security(extra: &str) -> ClusterConfig {
        let text =
            format!("[[replica]]\nid = 0\npeer_addr = \"a:1\"\nclient_addr = \"a:2\"\n{extra}");
        toml::from_str(&text).unwrap()
    }

    #[test]
    fn cluster_secret_inline_from_a_file_absent_or_too_short() {
        assert_eq!(with_security("").cluster_secret().unwrap(), None);
        let inline = with_security("[security]\ncluster_secret = \"0123456789abcdef\"\n");
        assert_eq!(
            inline.cluster_secret().unwrap(),
            Some(b"0123456789abcdef".to_vec())
        );
        assert!(with_security("[security]\ncluster_secret = \"short\"\n")
            .cluster_secret()
            .is_err());

        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("secret"), "a secret read from a file\n").unwrap();
        let mut from_file = with_security("[security]\ncluster_secret_file = \"secret\"\n");
        from_file.dir = Some(dir.path().to_path_buf());
        assert_eq!(
            from_file.cluster_secret().unwrap(),
            Some(b"a secret read from a file".to_vec())
        );
        let both = with_security(
            "[security]\ncluster_secret = \"0123456789abcdef\"\ncluster_secret_file = \"x\"\n",
        );
        assert!(both.cluster_secret().is_err());
        let missing = with_security("[security]\ncluster_secret_file = \"/nonexistent/secret\"\n");
        assert!(missing.cluster_secret().is_err());
    }

    #[test]
    fn limits_default_and_override() {
        assert_eq!(with_security("").limits.caps(), Caps::default());
        let c = with_security("[limits]\nmax_client_frame_kb = 8\nmax_peer_frame_mb = 2\nmax_client_connections = 3\n").limits.caps();
        assert_eq!(
            (
                c.max_client_frame,
                c.max_peer_frame,
                c.max_client_connections
            ),
            (8 << 10, 2 << 20, 3)
        );
        assert!(toml::from_str::<ClusterConfig>("[[replica]]\nid = 0\npeer_addr = \"a:1\"\nclient_addr = \"a:2\"\n[limits]\nmax_frame = 1\n").is_err());
    }

    #[test]
    fn rejects_unknown_storage_settings() {
        let text = "[[replica]]\nid = 0\npeer_addr = \"a:1\"\nclient_addr = \"a:2\"\n[storage]\nsync_interval = 5\n";
        assert!(toml::from_str::<ClusterConfig>(text).is_err());
    }

    #[test]
    fn gc_section_maps_to_a_collector_model() {
        use stutter_gc::GcModel;
        assert_eq!(with_security("").gc.model().unwrap(), GcModel::None);
        let go = with_security("[gc]\nmodel = \"go\"\nmemory_limit_mib = 96\ngogc = 50\ncores = 2.0\ndataset_mib = 64\n");
        go.validate().unwrap();
        match go.gc.model().unwrap() {
            GcModel::Go(p) => {
                assert_eq!(p.memory_limit, Some(96 << 20));
                assert_eq!(p.gogc, Some(50));
            }
            m => panic!("{m:?}"),
        }
        assert_eq!((go.gc.cores(), go.gc.dataset_bytes()), (2.0, 64 << 20));
        let off = with_security("[gc]\nmodel = \"go\"\ngogc = -1\nmemory_limit_mib = 40\n");
        assert!(matches!(off.gc.model().unwrap(), GcModel::Go(p) if p.gogc.is_none()));
        let g1 = with_security("[gc]\nmodel = \"g1\"\nmemory_limit_mib = 256\n");
        assert!(matches!(g1.gc.model().unwrap(), GcModel::G1(p) if p.heap_size == 256 << 20));
        assert!(with_security("[gc]\nmodel = \"zgc\"\n").validate().is_err());
        assert!(with_security("[gc]\nmodel = \"g1\"\ngogc = 100\n")
            .validate()
            .is_err());
        assert!(with_security("[gc]\nmodel = \"go\"\ncores = 0.0\n")
            .validate()
            .is_err());
        // Coordinated hand-offs are fast unless `handoff = "wait"`; without
        // coordination nothing changes.
        let fast = with_security("[gc]\nmodel = \"go\"\ncoordinated = true\n").core_config();
        assert!(
            fast.gc_coordination
                && fast.gc_handoff_promise
                && fast.gc_handoff_eager
                && fast.commit_on_accept
        );
        let wait = with_security("[gc]\nmodel = \"go\"\ncoordinated = true\nhandoff = \"wait\"\n")
            .core_config();
        assert!(
            wait.gc_coordination
                && !wait.gc_handoff_promise
                && !wait.gc_handoff_eager
                && !wait.commit_on_accept
        );
        let plain = with_security("[gc]\nmodel = \"go\"\n").core_config();
        assert!(!plain.gc_handoff_promise && !plain.commit_on_accept);
        assert!(with_security("[gc]\nmodel = \"go\"\nhandoff = \"eager\"\n")
            .validate()
            .is_err());
        assert!(toml::from_str::<ClusterConfig>(
            "[[replica]]\nid = 0\npeer_addr = \"a:1\"\nclient_addr = \"a:2\"\n[gc]\nheap = 1\n"
        )
        .is_err());
    }

    #[test]
    fn rejects_ids_out_of_order() {
        let cfg: ClusterConfig = toml::from_str(
            r#"
            [[replica]]
            id = 1
            peer_addr = "a:1"
            client_addr = "a:2"
            "#,
        )
        .unwrap();
        assert!(cfg.validate().is_err());
    }
}

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
//!
//! [storage]               # optional
//! sync_interval_us = 1000 # at most one write-ahead-log fsync per interval
//! ```

use std::net::SocketAddr;
use std::path::Path;

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

#[derive(Clone, Debug, Deserialize)]
pub struct ClusterConfig {
    pub replica: Vec<ReplicaAddr>,
    #[serde(default)]
    pub protocol: Protocol,
    #[serde(default)]
    pub storage: Storage,
}

impl ClusterConfig {
    pub fn load(path: &Path) -> Result<ClusterConfig> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let cfg: ClusterConfig = toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        cfg.validate()?;
        Ok(cfg)
    }

    fn validate(&self) -> Result<()> {
        if self.replica.is_empty() {
            bail!("the config lists no [[replica]]");
        }
        for (i, r) in self.replica.iter().enumerate() {
            if r.id as usize != i {
                bail!("replica ids must be 0..n in order; entry {i} has id {}", r.id);
            }
        }
        Ok(())
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
        assert_eq!(c.election_timeout, stutter_core::Config::default().election_timeout);
    }

    #[test]
    fn rejects_unknown_storage_settings() {
        let text = "[[replica]]\nid = 0\npeer_addr = \"a:1\"\nclient_addr = \"a:2\"\n[storage]\nsync_interval = 5\n";
        assert!(toml::from_str::<ClusterConfig>(text).is_err());
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

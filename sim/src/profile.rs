//! Allocation profiles: what a real implementation allocates and spends
//! per operation, by role, and what its data costs in live heap, measured
//! on that implementation (`sim/profiles/NAME.toml`, written by the
//! ground-truth harness; format in docs/gc-models.md, "Profiles").
//!
//! `sim study --profile NAME` models the replicas with a profile's figures
//! instead of stutter's own allocation table and step costs: the runtime
//! it names picks the collector model, its live bytes per key make the
//! heap, its bytes per operation feed the collector, and its CPU per
//! operation is the replica's service time. The figures are already the
//! runtime's own bytes (measured in Go or Java), so no runtime overhead
//! factor applies to them.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// Reads that come with each write in a mix of `read_fraction` reads.
fn reads_per_write(read_fraction: f64) -> f64 {
    if read_fraction >= 1.0 {
        0.0
    } else {
        read_fraction / (1.0 - read_fraction)
    }
}

/// stutter's node trims its log every 16 MiB executed (Config::trim_bytes).
pub const STUTTER_TRIM_BYTES: u64 = 16 << 20;

/// One profile, as the file holds it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub name: String,
    /// `none`, `go` or `java`: the collector model it runs under.
    pub runtime: String,
    /// When and by what command the figures were measured (or, for a
    /// provisional profile, where they come from).
    pub measured: String,
    /// Whether the figures are placeholders until measured here.
    #[serde(default)]
    pub provisional: bool,
    pub value_bytes: u64,
    pub key_bytes: u64,
    /// Whether the implementation sends reads through the log like
    /// writes (Replicant) rather than answering them on the leader alone
    /// (stutter's lease reads): followers are then charged for reads.
    /// Said by the harness for the implementation, never inferred from
    /// the figures: a follower's measured read allocation is small but
    /// not zero where reads are not replicated.
    pub reads_replicated: bool,
    pub alloc: AllocPerOp,
    #[serde(default)]
    pub objects: ObjectsPerOp,
    pub live: Live,
    #[serde(default)]
    pub young: Young,
    pub cpu: CpuPerOp,
    /// When the implementation trims its log (optional; by default as
    /// stutter's node, every 16 MiB executed).
    #[serde(default)]
    pub log: LogRule,
}

/// The log's trimming: every `trim_interval_ms` (Replicant's commit round,
/// which trims to the global last executed of the round before), or every
/// `trim_bytes` executed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogRule {
    #[serde(default)]
    pub trim_interval_ms: u64,
    #[serde(default)]
    pub trim_bytes: u64,
}

/// Bytes allocated per client operation, by role.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllocPerOp {
    pub leader_read: f64,
    pub leader_write: f64,
    pub follower_read: f64,
    pub follower_write: f64,
    /// With no load (heartbeats and the like), bytes per second.
    pub leader_idle_per_s: f64,
    pub follower_idle_per_s: f64,
}

/// Objects allocated per operation (informative: the Go-like model's
/// marking cost is per MiB of a heap of the same shape, not per object).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectsPerOp {
    #[serde(default)]
    pub leader_read: f64,
    #[serde(default)]
    pub leader_write: f64,
    #[serde(default)]
    pub follower_write: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Live {
    /// Live heap per preloaded key (key, value and the store's own
    /// structures), bytes.
    pub bytes_per_key: f64,
    /// Live heap of an empty replica, bytes.
    pub base_bytes: f64,
}

/// Java only: the measured share of eden that survives a young
/// collection (for comparison with the G1-like model's own, which it
/// computes from what the replica keeps).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Young {
    #[serde(default)]
    pub survivor_fraction: f64,
}

/// Mutator CPU per operation, µs, at a low load without collector work.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuPerOp {
    pub leader_read_us: f64,
    pub leader_write_us: f64,
    pub follower_write_us: f64,
    /// Optional: a follower's CPU per replicated read.
    #[serde(default)]
    pub follower_read_us: f64,
}

impl Profile {
    /// Parses and checks a profile's text.
    pub fn parse(text: &str) -> Result<Profile> {
        let p: Profile = toml::from_str(text).context("profile")?;
        p.check()?;
        Ok(p)
    }

    /// Reads `NAME` from `dir` (`NAME.toml`), or a path to a file.
    pub fn load(name: &str, dir: &Path) -> Result<Profile> {
        let path = if name.ends_with(".toml") || name.contains('/') {
            PathBuf::from(name)
        } else {
            dir.join(format!("{name}.toml"))
        };
        let text = std::fs::read_to_string(&path).with_context(|| format!("{}", path.display()))?;
        Profile::parse(&text).with_context(|| format!("{}", path.display()))
    }

    /// The folder the profiles live in: `STUTTER_PROFILES`, or
    /// `sim/profiles` of this source tree.
    pub fn dir() -> PathBuf {
        std::env::var_os("STUTTER_PROFILES")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("profiles"))
    }

    /// The collector model of `sim study` its runtime runs under.
    pub fn model(&self) -> &'static str {
        match self.runtime.as_str() {
            "go" => "go",
            "java" => "g1",
            _ => "none",
        }
    }

    /// The memory model's rule for the log (`memory::LogTrim`).
    pub fn log_trim(&self) -> crate::memory::LogTrim {
        use crate::memory::LogTrim;
        if self.log.trim_interval_ms > 0 {
            LogTrim::Interval {
                interval: self.log.trim_interval_ms * 1_000,
            }
        } else {
            LogTrim::Bytes {
                bytes: if self.log.trim_bytes > 0 {
                    self.log.trim_bytes
                } else {
                    STUTTER_TRIM_BYTES
                },
            }
        }
    }

    /// The memory model's per-operation figures for `keys` preloaded keys
    /// and a workload of `read_fraction` reads.
    pub fn per_op(&self, keys: u64, read_fraction: f64) -> crate::memory::PerOp {
        let a = &self.alloc;
        crate::memory::PerOp {
            leader_read: a.leader_read,
            leader_write: a.leader_write,
            follower_read: a.follower_read,
            follower_write: a.follower_write,
            leader_idle_per_s: a.leader_idle_per_s,
            follower_idle_per_s: a.follower_idle_per_s,
            bytes_per_key: self.live.bytes_per_key,
            base_bytes: self.live.base_bytes,
            keys,
            key_bytes: self.key_bytes,
            value_bytes: self.value_bytes,
            reads_replicated: self.reads_replicated,
            reads_per_write: reads_per_write(read_fraction),
        }
    }

    /// The replicas' service costs at `speed` for a workload of
    /// `read_fraction` reads (none without measured CPU: the simulator's
    /// own step costs then).
    pub fn op_costs(&self, speed: f64, read_fraction: f64) -> Option<crate::cpu::OpCosts> {
        let reads = if self.reads_replicated {
            reads_per_write(read_fraction)
        } else {
            0.0
        };
        self.has_cpu().then_some(crate::cpu::OpCosts {
            leader_read: self.cpu.leader_read_us,
            leader_write: self.cpu.leader_write_us,
            follower_write: self.cpu.follower_write_us + reads * self.cpu.follower_read_us,
            speed,
        })
    }

    /// Whether its CPU figures can drive the replicas (all measured).
    pub fn has_cpu(&self) -> bool {
        let c = &self.cpu;
        c.leader_read_us > 0.0 && c.leader_write_us > 0.0 && c.follower_write_us > 0.0
    }

    fn check(&self) -> Result<()> {
        if !["none", "go", "java"].contains(&self.runtime.as_str()) {
            bail!("runtime {:?}: none, go or java", self.runtime);
        }
        let a = &self.alloc;
        let figures = [
            ("alloc.leader_read", a.leader_read),
            ("alloc.leader_write", a.leader_write),
            ("alloc.follower_read", a.follower_read),
            ("alloc.follower_write", a.follower_write),
            ("alloc.leader_idle_per_s", a.leader_idle_per_s),
            ("alloc.follower_idle_per_s", a.follower_idle_per_s),
            ("live.bytes_per_key", self.live.bytes_per_key),
            ("live.base_bytes", self.live.base_bytes),
            ("young.survivor_fraction", self.young.survivor_fraction),
            ("cpu.leader_read_us", self.cpu.leader_read_us),
            ("cpu.leader_write_us", self.cpu.leader_write_us),
            ("cpu.follower_write_us", self.cpu.follower_write_us),
            ("cpu.follower_read_us", self.cpu.follower_read_us),
        ];
        for (name, x) in figures {
            if !(x.is_finite() && x >= 0.0) {
                bail!("{name} = {x}: a finite number >= 0");
            }
        }
        if self.young.survivor_fraction > 1.0 {
            bail!("young.survivor_fraction above 1");
        }
        if self.value_bytes == 0 || self.key_bytes == 0 {
            bail!("value_bytes and key_bytes must be positive");
        }
        // Without a collector nothing reads the live heap (the harness
        // does not measure it for Rust or C++): 0 there means unmeasured.
        let unmeasured = self.runtime == "none" && self.live.bytes_per_key == 0.0;
        if !unmeasured && self.live.bytes_per_key < (self.key_bytes + self.value_bytes) as f64 {
            bail!(
                "live.bytes_per_key {} is less than a key and a value ({} bytes)",
                self.live.bytes_per_key,
                self.key_bytes + self.value_bytes
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GO: &str = r#"
name = "replicant-go"
runtime = "go"
measured = "2026-11-28, groundtruth/run profile --impl go-tcp"
value_bytes = 500
key_bytes = 23
reads_replicated = true

[alloc]
leader_read = 5000.0
leader_write = 9200.0
follower_read = 0.0
follower_write = 3600.0
leader_idle_per_s = 2000.0
follower_idle_per_s = 1000.0

[objects]
leader_write = 47.0

[live]
bytes_per_key = 640.0
base_bytes = 4000000.0

[cpu]
leader_read_us = 20.0
leader_write_us = 30.0
follower_write_us = 12.0
"#;

    #[test]
    fn a_profile_in_the_contract_format_parses() {
        let p = Profile::parse(GO).expect("parses");
        assert_eq!(p.model(), "go");
        assert_eq!(p.alloc.leader_write, 9200.0);
        assert_eq!(p.objects.leader_write, 47.0);
        assert_eq!(p.objects.leader_read, 0.0, "optional tables and fields");
        assert_eq!(p.young.survivor_fraction, 0.0);
        assert!(p.has_cpu());
        assert!(!p.provisional);
    }

    #[test]
    fn bad_profiles_are_refused_with_the_field_named() {
        let err = |text: String| format!("{:#}", Profile::parse(&text).unwrap_err());
        assert!(err(GO.replace("\"go\"", "\"python\"")).contains("runtime"));
        assert!(
            err(GO.replace("leader_write = 9200.0", "leader_write = -1.0"))
                .contains("alloc.leader_write")
        );
        assert!(
            err(GO.replace("bytes_per_key = 640.0", "bytes_per_key = 100.0"))
                .contains("bytes_per_key")
        );
        // Unmeasured (0) live bytes pass only where no collector reads them.
        assert!(
            err(GO.replace("bytes_per_key = 640.0", "bytes_per_key = 0.0"))
                .contains("bytes_per_key")
        );
        let none = GO
            .replace("\"go\"", "\"none\"")
            .replace("bytes_per_key = 640.0", "bytes_per_key = 0.0");
        assert!(Profile::parse(&none).is_ok());
        assert!(err(GO.replace("[cpu]", "[cpu]\ntypo = 1.0")).contains("typo"));
        assert!(err(GO.replace("[live]", "[lives]")).contains("live"));
        // Whether reads are replicated is said, never guessed.
        assert!(err(GO.replace("reads_replicated = true\n", "")).contains("reads_replicated"));
    }

    #[test]
    fn the_shipped_profiles_parse() {
        for name in [
            "stutter",
            "replicant-go",
            "replicant-java",
            "replicant-rust",
        ] {
            let p = Profile::load(name, &Profile::dir()).expect(name);
            assert_eq!(p.name, name);
        }
    }
}

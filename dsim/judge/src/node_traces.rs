//! The replicas' own traces (`replica --trace`, the core's trace events)
//! from a simulated run, for validation against the TLA+ spec
//! (`spec/trace/merge.py`, `spec/validate`; docs/simulator-turmoil.md). Shared by
//! the turmoil and madsim layers.
//!
//! Each start of a replica writes a file of its own, because the node
//! creates its trace file afresh; [`join`] puts each replica's back
//! together in order, so that a restart shows as its `Recover` event. The
//! files are on the real file system, not on the simulated disk.

use std::path::{Path, PathBuf};

/// The trace file of start `k` (0 the first) of replica `i`.
pub fn file(dir: &Path, i: usize, k: u64) -> PathBuf {
    dir.join(format!("r{i}-{k:05}.ndjson"))
}

/// Concatenates the starts of each replica's trace, in order, into
/// `dir/trace-{i}.ndjson` (removing the parts).
pub fn join(dir: &Path, replicas: usize) -> std::io::Result<()> {
    for i in 0..replicas {
        let mut joined = Vec::new();
        let mut k = 0;
        while let Ok(bytes) = std::fs::read(file(dir, i, k)) {
            joined.extend_from_slice(&bytes);
            std::fs::remove_file(file(dir, i, k))?;
            k += 1;
        }
        std::fs::write(dir.join(format!("trace-{i}.ndjson")), joined)?;
    }
    Ok(())
}

//! `replica --config FILE --id N [--data-dir DIR] [--trace FILE] [--calibrate FILE]`

use std::path::PathBuf;

use anyhow::Result;
use clap::Parser;
use stutter_replica::config::ClusterConfig;
use stutter_replica::node::{self, NodeOptions};

// Frees of whole trimmed log prefixes and per-request allocations: about 5x
// faster than glibc's malloc here (docs/performance.md). Counted (once
// switched on) for --calibrate and the [gc] collector model.
#[cfg(feature = "alloc-count")]
#[global_allocator]
static GLOBAL: stutter_replica::alloc_count::Counting<mimalloc::MiMalloc> =
    stutter_replica::alloc_count::Counting(mimalloc::MiMalloc);
#[cfg(not(feature = "alloc-count"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
#[command(about = "One stutter replica: MultiPaxos over TCP with a write-ahead log")]
struct Args {
    #[arg(long)]
    config: PathBuf,
    #[arg(long)]
    id: u8,
    /// Where the write-ahead log lives (default ./data-<id>).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Write every protocol step as one JSON line (docs/trace-format.md).
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Log filter (tracing EnvFilter syntax); RUST_LOG overrides it.
    #[arg(long, default_value = "info")]
    log_level: String,
    /// UNSAFE: acknowledge without fsync. For negative-control experiments only.
    #[arg(long, hide = true)]
    unsafe_no_fsync: bool,
    /// UNSAFE: answer `get` from local state on any replica (stale reads).
    /// For negative-control experiments only.
    #[arg(long, hide = true)]
    unsafe_local_reads: bool,
    /// Runtime threads for the network and the protocol loop. 1 (the
    /// default): everything on one thread, no cross-thread wake-ups; the
    /// write-ahead log and snapshots have threads of their own either way.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Write one CSV line per protocol-loop turn to FILE: inputs, outputs,
    /// the loop thread's CPU time, bytes allocated and freed
    /// (docs/calibration.md). Costs a little CPU per turn.
    #[arg(long, value_name = "FILE")]
    calibrate: Option<PathBuf>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(&args.log_level));
    // Colours only on a terminal: logs redirected to a file (campaigns,
    // systemd, the process tests) stay plain text that grep can read.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .init();
    let config = ClusterConfig::load(&args.config)?;
    // Both measure and stop "the node's thread": with a multi-threaded
    // runtime the loop moves between threads and the others run on.
    if args.threads > 1
        && (args.calibrate.is_some() || config.gc.model()? != stutter_gc::GcModel::None)
    {
        anyhow::bail!(
            "--calibrate and a [gc] model need the single-threaded runtime (--threads 1)"
        );
    }
    let data_dir = args
        .data_dir
        .unwrap_or_else(|| PathBuf::from(format!("data-{}", args.id)));
    let rt = if args.threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(args.threads)
            .enable_all()
            .build()?
    };
    rt.block_on(node::run(NodeOptions {
        config,
        id: args.id,
        data_dir,
        trace: args.trace,
        unsafe_no_fsync: args.unsafe_no_fsync,
        unsafe_local_reads: args.unsafe_local_reads,
        calibrate: args.calibrate,
        seed: None,
    }))
}

//! The replica process: the tokio driver of the protocol core.
//!
//! One task, the protocol loop, owns the core and turns its outputs into
//! actions; the other tasks and threads feed it through bounded channels:
//!
//! ```text
//! peers (listener, handshake, readers) ─┐ Event          ┌─→ peers (one sender per peer)
//! clients (framed and text sessions) ───┼──────→ protocol_loop ─→ group_commit (WAL thread)
//! group_commit (durable token, watch) ──┘                 └─→ client reply slots, trace
//! ```
//!
//! Module graph (each uses only those after it; nothing points back):
//! `mod` (wires them) → `protocol_loop` → {`routes`, `timers`, `status`,
//! `calibrate`, `gc`, `group_commit`, `peers`} ; `clients` → {`framed_session`,
//! `text_session`} ; all of them → `event`. Below the node, and knowing
//! nothing of it: `peer_auth`, `wire`, `text`, `config`, `wal`.

mod calibrate;
mod clients;
mod event;
mod framed_session;
// Under madsim the collector model runs in virtual time and stops the
// whole simulated node (gc_madsim.rs); the real node's driver uses OS
// threads, thread CPU time and the process's allocation counts.
#[cfg(not(feature = "madsim"))]
mod gc;
#[cfg(feature = "madsim")]
mod gc_madsim;
#[cfg(feature = "madsim")]
use gc_madsim as gc;
mod group_commit;
mod idle;
mod peers;
mod protocol_loop;
mod routes;
mod status;
mod text_session;
mod timers;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use rand_core::SeedableRng;
use stutter_core::{Replica, ReplicaId};
use tokio::sync::{mpsc, oneshot};

use crate::config::{resolve, ClusterConfig, DEFAULT_SYNC_INTERVAL_US};
use crate::peer_auth::ClusterKey;
use crate::platform::{listen_addr, net::TcpListener};
use crate::wal::Wal;
use event::EVENT_QUEUE;
use group_commit::GroupCommit;
use peers::{LinkParams, PeerLinks, Redials};
use protocol_loop::ProtocolLoop;

#[cfg(feature = "madsim")]
pub use gc::{tally as gc_tally, GcTally};
pub use group_commit::WAL_QUEUE;
pub use peers::{HANDSHAKE_TIMEOUT, MAX_PENDING_HANDSHAKES, PEER_QUEUE};

pub struct NodeOptions {
    pub config: ClusterConfig,
    pub id: ReplicaId,
    pub data_dir: PathBuf,
    pub trace: Option<PathBuf>,
    /// Skip fsync: acknowledges writes that a crash can lose. Negative
    /// controls only.
    pub unsafe_no_fsync: bool,
    /// Switch on the core's injected bug `Bug::LocalReads` (the leader
    /// answers `get` from its local state without confirming it is still
    /// the leader: stale reads). Negative controls only (jepsen/run
    /// --unsafe local-reads); needs the `negative-controls` feature.
    pub unsafe_local_reads: bool,
    /// Write a line per protocol-loop turn to this file (CSV, for the
    /// simulator's calibration: docs/calibration.md).
    pub calibrate: Option<PathBuf>,
    /// Seed of the core's random number generator; `None` draws one from
    /// the clock. A simulation sets it so that a run can be replayed.
    pub seed: Option<u64>,
}

/// Runs a replica until a fatal error (a failed disk write) or a signal.
pub async fn run(opts: NodeOptions) -> Result<()> {
    let cfg = opts.config.clone();
    let me = cfg
        .get(opts.id)
        .with_context(|| format!("id {} is not in the config", opts.id))?
        .clone();
    let caps = cfg.limits.caps();
    let mut core_cfg = cfg.core_config();
    core_cfg.trace = opts.trace.is_some();
    if opts.unsafe_local_reads {
        local_reads(&mut core_cfg)?;
    }
    let secret = cfg.cluster_secret()?;
    let key = ClusterKey::new(secret.as_deref());
    let gc_model = cfg.gc.model()?;
    // Counting starts before the log is read, so that the recovered state
    // counts as live. (Under madsim the model estimates allocation from
    // the node's work instead: gc_madsim.rs.)
    let counted = opts.calibrate.is_some()
        || (gc_model != stutter_gc::GcModel::None && !cfg!(feature = "madsim"));
    if counted && !crate::alloc_count::enable() {
        anyhow::bail!("--calibrate and [gc] need a replica built with the `alloc-count` feature (on by default)");
    }

    let (wal, durable) = Wal::open(&opts.data_dir, !opts.unsafe_no_fsync)
        .with_context(|| format!("opening the write-ahead log in {}", opts.data_dir.display()))?;
    let seed = opts.seed.unwrap_or_else(|| {
        crate::platform::since_epoch().as_nanos() as u64 ^ ((opts.id as u64) << 56)
    });
    let rng = Box::new(rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed));
    // A data directory without a log is a first start: no Recover step to
    // trace. A restart traces one even when nothing was recovered (a
    // replica that had written nothing, or whose only record was torn),
    // so that the trace shows the earlier process's volatile state gone.
    let restarted = wal.restart();
    let replica = if !restarted {
        Replica::new(opts.id, core_cfg, rng)
    } else {
        Replica::recover(opts.id, core_cfg, durable, rng)
    };

    let interval = Duration::from_micros(
        cfg.storage
            .sync_interval_us
            .unwrap_or(DEFAULT_SYNC_INTERVAL_US),
    );
    let (wal, durable) = GroupCommit::start(wal, interval)?;

    let peer_listener = TcpListener::bind(listen_addr(resolve(&me.peer_addr)?))
        .await
        .with_context(|| format!("listening on {}", me.peer_addr))?;
    let client_listener = TcpListener::bind(listen_addr(resolve(&me.client_addr)?))
        .await
        .with_context(|| format!("listening on {}", me.client_addr))?;
    tracing::info!(id = opts.id, peer = %me.peer_addr, client = %me.client_addr, "replica listening");
    if key.authenticates() {
        tracing::info!("peer connections are authenticated by the cluster secret");
    } else {
        tracing::warn!(
            peer = %me.peer_addr,
            "no [security] cluster_secret in the config: peer connections are NOT authenticated; \
             anyone who can reach the peer port can act as a replica (docs/replica.md)"
        );
    }

    let (events, events_rx) = mpsc::channel(EVENT_QUEUE);
    let link = LinkParams {
        me: opts.id,
        n: cfg.n(),
        key,
        max_frame: caps.max_peer_frame,
        redialled: Redials::new(cfg.n()),
    };
    tokio::spawn(peers::listen(peer_listener, events.clone(), link.clone()));
    let port = clients::ClientPort {
        me: opts.id,
        caps,
        events,
    };
    tokio::spawn(clients::listen(client_listener, port));
    let others = cfg
        .replica
        .iter()
        .filter(|r| r.id != opts.id)
        .map(|r| (r.id, r.peer_addr.clone()));
    let peers = PeerLinks::start(&link, others);
    let (stop, shutdown) = oneshot::channel();
    tokio::spawn(forward_shutdown(stop));

    // A restart continues the trace of the earlier processes (after its
    // `Recover` step, one trace is the history of this data directory, as
    // trace validation reads it); a first start begins it afresh.
    let trace = match &opts.trace {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::OpenOptions::new()
                .create(true)
                .write(true)
                .append(restarted)
                .truncate(!restarted)
                .open(path)
                .with_context(|| format!("opening {}", path.display()))?,
        )),
        None => None,
    };
    let meter = match &opts.calibrate {
        Some(path) => Some(calibrate::TurnMeter::create(path, wal.meter().clone())?),
        None => None,
    };
    let gc = match gc_model {
        stutter_gc::GcModel::None => None,
        ref m => Some(gc::GcDriver::start(
            m,
            cfg.gc.cores(),
            cfg.gc.dataset_bytes(),
            cfg.gc.coordinated.unwrap_or(false),
            wal.meter().clone(),
        )?),
    };
    let mut lp = ProtocolLoop {
        replica,
        clock: timers::CoreClock::new(),
        timers: timers::Timers::default(),
        peers,
        wal,
        routes: routes::Routes::default(),
        trace,
        cfg,
        meter,
        gc,
        collect: false,
        role: None,
        storage_alarm: None,
    };
    lp.run(events_rx, durable, shutdown).await
}

#[cfg(feature = "negative-controls")]
fn local_reads(core: &mut stutter_core::Config) -> Result<()> {
    tracing::warn!("UNSAFE: injected bug LocalReads (stale reads); negative controls only");
    core.injected_bug = Some(stutter_core::Bug::LocalReads);
    Ok(())
}

#[cfg(not(feature = "negative-controls"))]
fn local_reads(_: &mut stutter_core::Config) -> Result<()> {
    anyhow::bail!("--unsafe-local-reads needs a replica built with `--features negative-controls`")
}

/// Turns SIGTERM or SIGINT into the loop's shutdown (the trace file is
/// flushed; everything acknowledged is in the write-ahead log).
#[cfg(not(any(feature = "turmoil", feature = "madsim")))]
async fn forward_shutdown(stop: oneshot::Sender<()>) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::warn!(
            "cannot install signal handlers; SIGTERM will kill without flushing the trace"
        );
        // Dropping `stop` would read as a shutdown: hold it.
        std::future::pending::<()>().await;
        drop(stop);
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    let _ = stop.send(());
}

/// A simulated host has no signals (and tokio's signal driver needs a
/// real reactor): the simulation crashes or stops it instead.
#[cfg(any(feature = "turmoil", feature = "madsim"))]
async fn forward_shutdown(stop: oneshot::Sender<()>) {
    std::future::pending::<()>().await;
    drop(stop);
}

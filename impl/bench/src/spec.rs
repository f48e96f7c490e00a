//! What one measured run is asked to do, and what it found.

use std::net::SocketAddr;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct RunSpec {
    pub addrs: Vec<SocketAddr>,
    pub rate: f64,
    pub duration: Duration,
    pub warmup: Duration,
    pub connections: usize,
    /// Requests outstanding per connection at most.
    pub window: usize,
    pub protocol: Protocol,
    pub timeout: Duration,
    /// Keep every measured operation's (intended start, latency).
    pub timeline: bool,
    /// Framed protocol: a position takes a new client id after this many
    /// operations (client churn; 0: one id per position for the run).
    pub ops_per_client: u64,
}

/// The client protocol a run speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Protocol {
    /// Replicant's line protocol (both systems speak it): no request ids,
    /// replies in request order; a `window` above 1 queues requests behind
    /// each other on the connection.
    Text,
    /// stutter's framed protocol: each of a connection's `window` positions
    /// is a logical client of its own, answered independently.
    Framed,
}

#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct RunResult {
    pub offered: f64,
    pub achieved: f64,
    pub ok: u64,
    pub io_errors: u64,
    pub redirects: u64,
    /// Replies that are not a correct answer: a run with any is invalid.
    pub wrong: u64,
    /// Scheduled operations that never completed before the drain deadline.
    pub unfinished: u64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    /// The whole latency distribution as HdrHistogram's percentile table.
    pub percentiles: Percentiles,
    /// Writes acknowledged, warm-up included (each a distinct `(client, seq)`).
    pub writes_acked: u64,
    /// Operations answered "session expired" (outcome unknown).
    pub session_expired: u64,
    /// Calls that ended without an answer (timed out, connection lost),
    /// warm-up included: each may or may not have executed.
    pub unanswered: u64,
    /// Distinct client ids used (framed protocol).
    pub clients: u64,
    /// The measured part in Unix seconds: from the end of the warm-up to
    /// when the last measured operation completed (or the schedule ended),
    /// the span `achieved` divides by. A harness that samples the measured
    /// system (CPU, allocation) cuts its samples to this window.
    pub measured_from_unix_s: f64,
    pub measured_to_unix_s: f64,
    /// Latency distribution as (quantile, ms) points, for CDF plots.
    pub cdf: Vec<(f64, f64)>,
    #[serde(skip)]
    pub first_wrong: Option<String>,
    /// With `RunSpec::timeline`: (intended start in ms since the measured
    /// part began, latency in µs) of every measured operation that succeeded.
    #[serde(skip)]
    pub timeline: Vec<(u32, u32)>,
}

/// How many times one operation is sent before it counts as an error. A
/// leader change takes a few tries to find; with the back-off below, 20
/// tries span about 2.5 s of retrying, longer than an election.
pub const MAX_TRIES: usize = 20;

/// A latency distribution as HdrHistogram prints it
/// (`outputPercentileDistribution`): the value at quantiles that step
/// towards 100 %, five steps each time the distance to it halves, ending
/// at the maximum; `sim run --summary-json` and `sim study run` write the
/// same shape (sim/src/percentiles.rs).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Percentiles {
    /// Latencies the table describes.
    pub count: u64,
    /// `(quantile, ms)` rows, the quantile rising to 1 (the maximum).
    pub points: Vec<(f64, f64)>,
}

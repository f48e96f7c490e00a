//! `bench`: open-loop load generator for stutter and, side by side in the
//! same invocation, Replicant. See docs/performance.md.

//!
//! Module graph (one way): `main` → `open_loop` → `connection` → `tally`
//! → `check`; `main` → `preload`; and below all of them the protocols and
//! the workload: `framed_target` → `text_target` → `workload`, and `spec`.

mod check;
mod connection;
mod framed_target;
mod open_loop;
mod preload;
mod spec;
mod tally;
mod text_target;
mod workload;

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Parser;

use spec::{Protocol, RunResult, RunSpec};
use workload::{Distribution, Generator, Mix};

#[derive(Parser, Debug)]
#[command(
    about = "Open-loop, coordinated-omission-free load generator for stutter (and Replicant)"
)]
struct Args {
    /// stutter cluster config (TOML with [[replica]] client_addr = ...).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Replicant client addresses (peer port + 1), comma separated: measures
    /// Replicant too, with the same schedule, and prints the ratio.
    #[arg(long, value_delimiter = ',')]
    replicant: Vec<String>,
    /// Offered load, operations per second.
    #[arg(long, default_value_t = 5000.0)]
    rate: f64,
    /// Measured duration of one run (after the warm-up).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    duration: Duration,
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    warmup: Duration,
    #[arg(long, value_enum, default_value_t = Mix::A)]
    workload: Mix,
    #[arg(long, value_enum, default_value_t = Distribution::Zipfian)]
    distribution: Distribution,
    /// Number of keys, all written during the preload.
    #[arg(long, default_value_t = 100_000)]
    keys: u64,
    #[arg(long, default_value_t = 23)]
    key_size: usize,
    #[arg(long, default_value_t = 500)]
    value_size: usize,
    /// Client connections to each system.
    #[arg(long, default_value_t = 128)]
    connections: usize,
    /// Requests outstanding per connection at most (stutter). With the
    /// framed protocol each is a logical client of its own; Replicant's
    /// protocol cannot multiplex a connection, so Replicant gets
    /// `connections × window` connections of one request each instead: the
    /// same number of requests outstanding for both.
    #[arg(long, default_value_t = 1)]
    window: usize,
    /// The protocol bench speaks to stutter: its own framed protocol, or
    /// the text protocol it shares with Replicant (Replicant is always
    /// measured with its text protocol).
    #[arg(long, value_enum, default_value_t = Protocol::Framed)]
    protocol: Protocol,
    /// Per-request timeout.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    timeout: Duration,
    /// Skip the preload (keys already written by an earlier run).
    #[arg(long)]
    no_preload: bool,
    /// Search for the highest offered rate whose p99 meets --slo-p99.
    #[arg(long)]
    find_max: bool,
    #[arg(long, default_value = "20ms", value_parser = humantime::parse_duration)]
    slo_p99: Duration,
    /// --find-max: runs at one rate before it counts as missing the SLO. A
    /// single stall (here: a shared disk's fsync pause, a time slice lost on
    /// two busy cores) can push one 5-second run's p99 over the SLO at any
    /// load; without a second try the search would then bisect below a
    /// rate the system sustains. The same rule applies to every system.
    #[arg(long, default_value_t = 2)]
    attempts: u32,
    /// Upper bound of the --find-max search.
    #[arg(long, default_value_t = 400_000.0)]
    max_rate: f64,
    /// Append every run as a JSON line to this file (for plots).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Append every measured operation of every run to this CSV file
    /// (system, offered rate, run number, intended start ms since the
    /// measurement began, latency ms): where in a run the tail comes from.
    #[arg(long)]
    timeline: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Client churn (framed protocol): each logical client sends this many
    /// operations, then a new client id takes its place (0: one id per
    /// position for the whole run). With a stutter config, each replica's
    /// session table size and executed requests are reported after each
    /// run, and checked against the acknowledged writes.
    #[arg(long, default_value_t = 0)]
    ops_per_client: u64,
}

fn resolve(addrs: &[String]) -> Result<Vec<SocketAddr>> {
    let mut out = Vec::new();
    for a in addrs {
        let mut it = a
            .to_socket_addrs()
            .with_context(|| format!("bad address {a}"))?;
        out.push(
            it.next()
                .with_context(|| format!("address {a} resolves to nothing"))?,
        );
    }
    Ok(out)
}

/// The client addresses of a stutter cluster, read by the replica's own
/// config parser (so bench accepts exactly the files the replicas do).
fn stutter_addrs(path: &std::path::Path) -> Result<Vec<SocketAddr>> {
    stutter_replica::config::ClusterConfig::load(path)?.client_socket_addrs()
}

struct System {
    name: &'static str,
    addrs: Vec<SocketAddr>,
    protocol: Protocol,
    connections: usize,
    window: usize,
    preloaded: bool,
}

fn meets_slo(r: &RunResult, slo: Duration) -> bool {
    r.wrong == 0
        && r.unfinished == 0
        && (r.io_errors as f64) <= 0.001 * r.ok as f64
        && r.achieved >= 0.95 * r.offered
        && r.p99_ms <= slo.as_secs_f64() * 1000.0
}

fn print_header() {
    println!(
        "{:<10} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>6} {:>6}",
        "system",
        "offered/s",
        "ok/s",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "p99.9 ms",
        "max ms",
        "errors",
        "wrong",
        "unfin"
    );
}

fn print_row(name: &str, r: &RunResult) {
    println!(
        "{:<10} {:>10.0} {:>10.0} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.1} {:>7} {:>6} {:>6}",
        name,
        r.offered,
        r.achieved,
        r.p50_ms,
        r.p90_ms,
        r.p99_ms,
        r.p999_ms,
        r.max_ms,
        r.io_errors,
        r.wrong,
        r.unfinished
    );
}

/// Each replica's status (`None` where it did not answer).
async fn replica_status(addrs: &[SocketAddr]) -> Vec<Option<stutter_replica::wire::StatusInfo>> {
    let mut out = Vec::new();
    for a in addrs {
        out.push(
            stutter_replica::client::status(&a.to_string(), Duration::from_secs(2))
                .await
                .ok(),
        );
    }
    out
}

/// Each replica's status once they all executed up to the same slot
/// (followers learn the last commits from the next heartbeat), or after 5 s.
async fn settled_status(addrs: &[SocketAddr]) -> Vec<Option<stutter_replica::wire::StatusInfo>> {
    let give_up = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let s = replica_status(addrs).await;
        let mut slots = s.iter().flatten().map(|s| s.last_executed);
        let first = slots.next();
        if slots.all(|x| Some(x) == first) || std::time::Instant::now() > give_up {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Prints each replica's session table size and the requests it executed
/// during the run. Every acknowledged write is a distinct `(client, seq)`
/// executed once: when every operation was answered (none unknown), each
/// replica that answered before and after must have executed exactly the
/// acknowledged writes as updates (reads, in the log or not, are not
/// counted) — more would be a duplicate execution, fewer a lost one.
fn report_sessions(
    before: &[Option<stutter_replica::wire::StatusInfo>],
    after: &[Option<stutter_replica::wire::StatusInfo>],
    r: &RunResult,
) -> Result<()> {
    println!(
        "stutter: {} client ids, {} writes acknowledged, {} session-expired, {} io errors, {} unfinished",
        r.clients, r.writes_acked, r.session_expired, r.io_errors, r.unfinished
    );
    // Warm-up included: a write that timed out in the warm-up may have
    // executed without being acknowledged.
    let every_answered =
        r.io_errors == 0 && r.unanswered == 0 && r.unfinished == 0 && r.session_expired == 0;
    let mut bad = Vec::new();
    for (b, a) in before.iter().zip(after) {
        let (Some(b), Some(a)) = (b, a) else { continue };
        let executed = a.applied_updates.saturating_sub(b.applied_updates);
        println!("replica {}: {} sessions, {executed} updates executed during the run, last executed {}, digest {:016x}", a.id, a.sessions, a.last_executed, a.digest);
        if every_answered && executed != r.writes_acked {
            bad.push(format!(
                "replica {} executed {executed} updates for {} acknowledged writes",
                a.id, r.writes_acked
            ));
        }
    }
    if !bad.is_empty() {
        bail!("duplicate or lost execution: {}", bad.join("; "));
    }
    Ok(())
}

struct Bench {
    args: Args,
}

impl Bench {
    fn spec(&self, sys: &System, rate: f64) -> RunSpec {
        RunSpec {
            addrs: sys.addrs.clone(),
            rate,
            duration: self.args.duration,
            warmup: self.args.warmup,
            connections: sys.connections,
            window: sys.window,
            protocol: sys.protocol,
            timeout: self.args.timeout,
            timeline: self.args.timeline.is_some(),
            ops_per_client: self.args.ops_per_client,
        }
    }

    fn generator(&self, salt: u64) -> Generator {
        let a = &self.args;
        Generator::new(
            a.seed.wrapping_mul(1_000_003).wrapping_add(salt),
            a.workload,
            a.distribution,
            a.keys,
            a.key_size,
            a.value_size,
        )
    }

    async fn ensure_preloaded(&self, sys: &mut System) -> Result<()> {
        if sys.preloaded || self.args.no_preload {
            sys.preloaded = true;
            return Ok(());
        }
        let t = std::time::Instant::now();
        let mut g = self.generator(0);
        preload::preload(&self.spec(sys, 0.0), &mut g)
            .await
            .with_context(|| format!("preloading {}", sys.name))?;
        eprintln!(
            "{}: preloaded {} keys in {:.1}s",
            sys.name,
            self.args.keys,
            t.elapsed().as_secs_f64()
        );
        sys.preloaded = true;
        Ok(())
    }

    async fn one(&self, sys: &mut System, rate: f64, salt: u64) -> Result<RunResult> {
        self.ensure_preloaded(sys).await?;
        let before = if sys.name == "stutter" {
            settled_status(&sys.addrs).await
        } else {
            Vec::new()
        };
        let r = open_loop::run(&self.spec(sys, rate), self.generator(salt), true);
        print_row(sys.name, &r);
        if sys.name == "stutter" {
            report_sessions(&before, &settled_status(&sys.addrs).await, &r)?;
        }
        if let Some(w) = &r.first_wrong {
            eprintln!("{}: WRONG ANSWER: {w}", sys.name);
        }
        if let Some(path) = &self.args.out {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?;
            let mut v = serde_json::to_value(&r)?;
            v["system"] = sys.name.into();
            v["workload"] = format!("{:?}", self.args.workload).into();
            v["protocol"] = format!("{:?}", sys.protocol).to_lowercase().into();
            v["connections"] = sys.connections.into();
            v["window"] = sys.window.into();
            writeln!(f, "{v}")?;
        }
        if let Some(path) = &self.args.timeline {
            use std::io::Write;
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?;
            let mut f = std::io::BufWriter::new(f);
            for (at, us) in &r.timeline {
                writeln!(
                    f,
                    "{},{},{},{},{:.3}",
                    sys.name,
                    r.offered,
                    salt,
                    at,
                    *us as f64 / 1000.0
                )?;
            }
            f.flush()?;
        }
        Ok(r)
    }

    /// Searches each system's highest rate meeting the SLO: doubles the
    /// rate while the SLO holds, then bisects (5 steps); a rate misses only
    /// if `--attempts` runs in a row miss. The systems' runs
    /// alternate (one run of each in turn), so that on a shared machine both
    /// searches see the same background load over time.
    async fn find_max(&self, systems: &mut [System]) -> Result<Vec<Option<RunResult>>> {
        let mut searches: Vec<Search> = systems
            .iter()
            .map(|_| Search::new(self.args.rate, self.args.attempts))
            .collect();
        loop {
            let mut progressed = false;
            for (sys, search) in systems.iter_mut().zip(searches.iter_mut()) {
                let Some(rate) = search.next_rate(self.args.max_rate) else {
                    continue;
                };
                let r = self.one(sys, rate, search.salt).await?;
                search.record(r, meets_slo_of(&self.args));
                progressed = true;
            }
            if !progressed {
                return Ok(searches.into_iter().map(|s| s.lo).collect());
            }
        }
    }
}

fn meets_slo_of(args: &Args) -> impl Fn(&RunResult) -> bool + '_ {
    move |r| meets_slo(r, args.slo_p99)
}

/// One system's search: doubling, then 5 bisection steps.
struct Search {
    lo: Option<RunResult>,
    hi: Option<f64>,
    rate: f64,
    bisections: u32,
    salt: u64,
    done: bool,
    /// Runs a rate gets before it counts as missing the SLO.
    attempts: u32,
    /// Misses in a row at `retry`.
    misses: u32,
    /// A rate that missed once and is tried again next.
    retry: Option<f64>,
}

impl Search {
    fn new(start: f64, attempts: u32) -> Search {
        Search {
            lo: None,
            hi: None,
            rate: start,
            bisections: 0,
            salt: 1,
            done: false,
            attempts: attempts.max(1),
            misses: 0,
            retry: None,
        }
    }

    /// The next rate to try, or `None` when the search is over.
    fn next_rate(&mut self, max_rate: f64) -> Option<f64> {
        if self.done {
            return None;
        }
        if let Some(r) = self.retry {
            return Some(r);
        }
        match self.hi {
            None if self.rate <= max_rate => Some(self.rate),
            None => {
                self.done = true;
                None
            }
            Some(h) => {
                let l = self.lo.as_ref().map_or(0.0, |r| r.offered);
                if self.bisections >= 5 || h - l < 0.03 * h {
                    self.done = true;
                    return None;
                }
                Some((l + h) / 2.0)
            }
        }
    }

    fn record(&mut self, r: RunResult, meets: impl Fn(&RunResult) -> bool) {
        self.salt += 1;
        let ok = meets(&r);
        let offered = r.offered;
        if ok {
            self.misses = 0;
            self.retry = None;
        } else {
            self.misses += 1;
            if self.misses < self.attempts {
                self.retry = Some(offered);
                return;
            }
            self.misses = 0;
            self.retry = None;
        }
        match self.hi {
            None => {
                if ok {
                    self.lo = Some(r);
                    self.rate *= 2.0;
                } else {
                    self.hi = Some(offered);
                }
            }
            Some(_) => {
                self.bisections += 1;
                if ok {
                    self.lo = Some(r);
                } else {
                    self.hi = Some(offered);
                }
            }
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let args = Args::parse();
    let mut systems = Vec::new();
    if let Some(c) = &args.config {
        systems.push(System {
            name: "stutter",
            addrs: stutter_addrs(c)?,
            protocol: args.protocol,
            connections: args.connections,
            window: args.window.max(1),
            preloaded: false,
        });
    }
    if !args.replicant.is_empty() {
        systems.push(System {
            name: "replicant",
            addrs: resolve(&args.replicant)?,
            protocol: Protocol::Text,
            connections: args.connections * args.window.max(1),
            window: 1,
            preloaded: false,
        });
    }
    for sys in &systems {
        eprintln!(
            "{}: {:?} protocol, {} connections × {} outstanding",
            sys.name, sys.protocol, sys.connections, sys.window
        );
    }
    if systems.is_empty() {
        bail!("nothing to measure: give --config (stutter) and/or --replicant");
    }
    let bench = Bench { args };
    print_header();
    let mut best = Vec::new();
    let mut failed = false;
    if bench.args.find_max {
        let results = bench.find_max(&mut systems).await?;
        for (sys, r) in systems.iter().zip(results) {
            match &r {
                Some(r) => println!(
                    "{}: max throughput at p99 ≤ {:?}: {:.0} ops/s (offered {:.0}, p99 {:.2} ms)",
                    sys.name, bench.args.slo_p99, r.achieved, r.offered, r.p99_ms
                ),
                None => println!(
                    "{}: even {:.0} ops/s misses the SLO",
                    sys.name, bench.args.rate
                ),
            }
            best.push((sys.name, r.map(|r| r.achieved)));
        }
    }
    for sys in systems.iter_mut() {
        if bench.args.find_max {
            continue;
        } else {
            let r = bench.one(sys, bench.args.rate, 1).await?;
            failed |= r.wrong > 0;
            best.push((sys.name, Some(r.achieved)));
        }
    }
    if let [(a, Some(x)), (b, Some(y))] = best.as_slice() {
        if *y > 0.0 {
            println!("ratio {a}/{b}: {:.2}", x / y);
        }
    }
    if failed {
        bail!("wrong answers: the measured system returned values the benchmark never wrote for that key");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_at(offered: f64) -> RunResult {
        RunResult {
            offered,
            achieved: offered,
            ..RunResult::default()
        }
    }

    /// Drives a search against a system that meets the SLO up to `capacity`
    /// except on the runs listed in `unlucky` (0-based run numbers).
    fn search(capacity: f64, attempts: u32, unlucky: &[usize]) -> (Option<f64>, usize) {
        let mut s = Search::new(1000.0, attempts);
        let mut runs = 0;
        while let Some(rate) = s.next_rate(1e9) {
            let ok = rate <= capacity && !unlucky.contains(&runs);
            runs += 1;
            s.record(run_at(rate), |_| ok);
            assert!(runs < 100, "the search does not end");
        }
        (s.lo.map(|r| r.offered), runs)
    }

    #[test]
    fn finds_the_capacity_within_the_bisection_precision() {
        let (found, runs) = search(5000.0, 1, &[]);
        let found = found.unwrap_or(0.0);
        // Doubling: 1k, 2k, 4k pass, 8k misses; bisection between 4k and 8k.
        assert!((4500.0..=5000.0).contains(&found), "found {found}");
        assert_eq!(runs, 4 + 5);
    }

    #[test]
    fn one_unlucky_run_is_retried_and_does_not_cap_the_search() {
        // Run 1 (2,000 ops/s) stalls once: with one attempt the search
        // bisects below 2,000; with two it retries and finds ~5,000.
        let (one, _) = search(5000.0, 1, &[1]);
        assert!(one.unwrap_or(0.0) < 2000.0, "found {one:?}");
        let (two, _) = search(5000.0, 2, &[1]);
        assert!(two.unwrap_or(0.0) >= 4500.0, "found {two:?}");
    }

    #[test]
    fn a_rate_missing_every_attempt_is_a_miss() {
        // Every run misses: nothing meets the SLO, and each rate tried was
        // run `attempts` times.
        let (found, runs) = search(0.0, 3, &[]);
        assert_eq!(found, None);
        assert_eq!(runs % 3, 0);
    }
}

//! A local cluster of real `replica` processes for the tests that need
//! one configured their own way (disk_full.rs, idle_clients.rs).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub struct LocalCluster {
    pub dir: PathBuf,
    pub config: PathBuf,
    pub addrs: Vec<String>,
    procs: Vec<Option<Child>>,
}

/// A port for a replica to listen on, below the kernel's ephemeral range
/// (32768-60999 here). A port found free by binding port 0 is an ephemeral
/// one, and until the replica binds it any connect() may take it as its
/// local port: the test's status probes, the replicas dialling their
/// peers, the other tests' connections. The replica then cannot bind and
/// exits. A replica of idle_clients.rs's cluster exited with status 1 in a
/// CI run on 2026-12-08, most likely so: its error line fell out of the
/// report, which now shows it. Ports come from a range that only this
/// counter hands out, each checked free; a process's start in it depends
/// on its pid, so that test binaries run one after another rarely reuse a
/// port still in TIME_WAIT.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let start = std::process::id().wrapping_mul(97) % SPAN;
    for _ in 0..SPAN {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (LOW + (start + n) % SPAN) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}

impl LocalCluster {
    /// Writes the config of three replicas in `dir` (short election
    /// timeouts, `extra` appended); starts nothing. Data directories are
    /// `dir/data-<id>`.
    pub fn configure(dir: &Path, extra: &str) -> LocalCluster {
        Self::configure_timeouts(dir, extra, 20, 150)
    }

    /// As [`configure`](Self::configure), with the heartbeat and election
    /// timeout given: a test that floods a debug-built leader with work
    /// (idle_clients.rs) keeps elections out of what it measures.
    pub fn configure_timeouts(
        dir: &Path,
        extra: &str,
        heartbeat_ms: u64,
        election_ms: u64,
    ) -> LocalCluster {
        let mut toml = String::new();
        let mut addrs = Vec::new();
        for id in 0..3 {
            let c = format!("127.0.0.1:{}", free_port());
            let p = format!("127.0.0.1:{}", free_port());
            toml +=
                &format!("[[replica]]\nid = {id}\npeer_addr = \"{p}\"\nclient_addr = \"{c}\"\n\n");
            addrs.push(c);
        }
        toml += &format!(
            "[protocol]\nheartbeat_ms = {heartbeat_ms}\nelection_timeout_ms = {election_ms}\nelection_jitter_ms = {election_ms}\n"
        );
        toml += extra;
        let config = dir.join("cluster.toml");
        std::fs::write(&config, toml).expect("write config");
        LocalCluster {
            dir: dir.to_path_buf(),
            config,
            addrs,
            procs: vec![None, None, None],
        }
    }

    pub fn data(&self, id: usize) -> PathBuf {
        self.dir.join(format!("data-{id}"))
    }

    pub fn start(&mut self, id: usize) {
        let log = std::fs::File::create(self.dir.join(format!("replica-{id}.log"))).expect("log");
        let child = Command::new(env!("CARGO_BIN_EXE_replica"))
            .arg("--config")
            .arg(&self.config)
            .args(["--id", &id.to_string()])
            .arg("--data-dir")
            .arg(self.data(id))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn replica");
        self.procs[id] = Some(child);
    }

    pub fn start_all(&mut self) {
        for id in 0..3 {
            self.start(id);
        }
    }

    /// Whether every started replica still runs.
    pub fn all_running(&mut self) -> bool {
        self.procs
            .iter_mut()
            .flatten()
            .all(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// The exit status and log tail of every started replica that has
    /// exited: what a failed `all_running` assertion prints.
    pub fn exited_report(&mut self) -> String {
        let mut out = String::new();
        for (id, c) in self.procs.iter_mut().enumerate() {
            let Some(c) = c else { continue };
            if let Ok(Some(status)) = c.try_wait() {
                let log = std::fs::read_to_string(self.dir.join(format!("replica-{id}.log")))
                    .unwrap_or_default();
                out += &format!("replica {id} exited ({status})");
                // The error main returned (anyhow prints it first, then
                // its backtrace, which would push it out of the tail) or a
                // panic's message.
                if let Some(at) = log
                    .lines()
                    .position(|l| l.starts_with("Error: ") || l.contains("panicked at"))
                {
                    out += "; its error:\n";
                    for l in log.lines().skip(at).take(8) {
                        out += l;
                        out += "\n";
                    }
                }
                let tail: Vec<&str> = log.lines().rev().take(30).collect();
                out += "; its log ends:\n";
                for l in tail.into_iter().rev() {
                    out += l;
                    out += "\n";
                }
            }
        }
        out
    }

    pub fn stop_all(&mut self) {
        for c in self.procs.iter_mut().filter_map(Option::take) {
            let mut c = c;
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        self.stop_all();
    }
}

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

fn free_port() -> u16 {
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
        let mut toml = String::new();
        let mut addrs = Vec::new();
        for id in 0..3 {
            let c = format!("127.0.0.1:{}", free_port());
            let p = format!("127.0.0.1:{}", free_port());
            toml +=
                &format!("[[replica]]\nid = {id}\npeer_addr = \"{p}\"\nclient_addr = \"{c}\"\n\n");
            addrs.push(c);
        }
        toml +=
            "[protocol]\nheartbeat_ms = 20\nelection_timeout_ms = 150\nelection_jitter_ms = 150\n";
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

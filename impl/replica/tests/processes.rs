//! Three real `replica` processes on loopback: serving, failover after
//! kill -9, recovery of every acknowledged write from the write-ahead logs,
//! and bad client input.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use stutter_core::{Op, ReplicaId, Reply, Role};
use stutter_replica::client::{self, Client};

struct Cluster {
    dir: tempfile::TempDir,
    config: PathBuf,
    clients: Vec<String>,
    procs: Vec<Option<Child>>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap_or(0)
}

impl Cluster {
    fn new() -> Cluster {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut toml = String::new();
        let mut clients = Vec::new();
        for id in 0..3 {
            let c = format!("127.0.0.1:{}", free_port());
            toml += &format!("[[replica]]\nid = {id}\npeer_addr = \"127.0.0.1:{}\"\nclient_addr = \"{c}\"\n\n", free_port());
            clients.push(c);
        }
        toml += "[protocol]\nheartbeat_ms = 20\nelection_timeout_ms = 150\nelection_jitter_ms = 150\ntrim_every = 64\n";
        let config = dir.path().join("cluster.toml");
        std::fs::write(&config, toml).expect("write config");
        let mut c = Cluster { dir, config, clients, procs: vec![None, None, None] };
        for id in 0..3 {
            c.start(id);
        }
        c
    }

    fn data(&self, id: usize) -> PathBuf {
        self.dir.path().join(format!("data-{id}"))
    }

    fn start(&mut self, id: usize) {
        let log = std::fs::File::create(self.dir.path().join(format!("replica-{id}.log"))).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_replica"))
            .args(["--config", path(&self.config), "--id", &id.to_string(), "--data-dir", path(&self.data(id))])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn replica");
        self.procs[id] = Some(child);
    }

    fn kill(&mut self, id: usize) {
        if let Some(mut c) = self.procs[id].take() {
            let _ = c.kill(); // SIGKILL
            let _ = c.wait();
        }
    }

    fn client(&self) -> Client {
        Client::new(self.clients.clone(), client::fresh_client_id())
            .with_timeouts(Duration::from_millis(500), Duration::from_secs(15))
    }

    /// The replica that reports itself leader, waiting up to `within`.
    fn leader(&self, within: Duration) -> Option<usize> {
        let rt = rt();
        let until = Instant::now() + within;
        while Instant::now() < until {
            for (i, a) in self.clients.iter().enumerate() {
                if self.procs[i].is_none() {
                    continue;
                }
                if let Ok(s) = rt.block_on(client::status(a, Duration::from_millis(200))) {
                    if s.role == Role::Leader {
                        return Some(i);
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for id in 0..3 {
            self.kill(id);
        }
    }
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
}

fn put(k: &str, v: &str) -> Op {
    Op::Put { key: k.to_owned().into(), value: v.to_owned().into() }
}

fn get(k: &str) -> Op {
    Op::Get { key: k.to_owned().into() }
}

async fn write_keys(c: &mut Client, prefix: &str, n: usize) -> Vec<String> {
    let mut acked = Vec::new();
    for i in 0..n {
        let k = format!("{prefix}{i}");
        if let Ok(Reply::Done) = c.call(put(&k, &format!("v-{k}"))).await {
            acked.push(k);
        }
    }
    acked
}

async fn assert_present(c: &mut Client, keys: &[String]) {
    for k in keys {
        let r = c.call(get(k)).await.expect("read");
        assert_eq!(r, Reply::Value(Some(format!("v-{k}").into())), "acknowledged write of {k} lost");
    }
}

#[test]
fn put_get_and_follower_crash() {
    let mut cl = Cluster::new();
    let rt = rt();
    let mut c = cl.client();
    let keys = rt.block_on(write_keys(&mut c, "a", 50));
    assert_eq!(keys.len(), 50);
    rt.block_on(assert_present(&mut c, &keys));
    let leader = cl.leader(Duration::from_secs(5)).expect("a leader");
    let follower = (leader + 1) % 3;
    cl.kill(follower);
    let more = rt.block_on(write_keys(&mut c, "b", 50));
    assert_eq!(more.len(), 50, "two of three replicas keep serving");
    rt.block_on(assert_present(&mut c, &keys));
    // The follower comes back and catches up.
    cl.start(follower);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let s = rt.block_on(client::status(&cl.clients[follower], Duration::from_millis(300)));
        let l = rt.block_on(client::status(&cl.clients[leader], Duration::from_millis(300)));
        if let (Ok(s), Ok(l)) = (s, l) {
            if s.last_executed == l.last_executed && s.digest == l.digest {
                break;
            }
        }
        assert!(Instant::now() < deadline, "restarted follower did not catch up");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn leader_crash_fails_over_and_loses_nothing() {
    let mut cl = Cluster::new();
    let rt = rt();
    let mut c = cl.client();
    let keys = rt.block_on(write_keys(&mut c, "k", 100));
    assert_eq!(keys.len(), 100);
    let old = cl.leader(Duration::from_secs(5)).expect("a leader");
    let killed_at = Instant::now();
    cl.kill(old);
    let new = cl.leader(Duration::from_secs(10)).expect("a new leader");
    assert_ne!(new, old);
    // Failover is over when a write is acknowledged again.
    let mut c2 = cl.client();
    let r = rt.block_on(c2.call(put("after", "v-after")));
    let failover = killed_at.elapsed();
    assert_eq!(r.expect("write after failover"), Reply::Done);
    println!("failover: new leader {new} serving {:.0} ms after kill -9 of leader {old}", failover.as_secs_f64() * 1000.0);
    assert!(failover < Duration::from_secs(5), "failover took {failover:?}");
    rt.block_on(assert_present(&mut c2, &keys));
}

#[test]
fn full_restart_recovers_every_acknowledged_write() {
    let mut cl = Cluster::new();
    let rt = rt();
    let mut c = cl.client();
    let keys = rt.block_on(write_keys(&mut c, "r", 300));
    assert_eq!(keys.len(), 300);
    for id in 0..3 {
        cl.kill(id);
    }
    for id in 0..3 {
        cl.start(id);
    }
    let mut c = cl.client();
    rt.block_on(assert_present(&mut c, &keys));
}

#[test]
fn garbage_on_the_client_port_gets_an_error_and_the_cluster_keeps_serving() {
    let cl = Cluster::new();
    let rt = rt();
    let mut c = cl.client();
    assert_eq!(rt.block_on(c.call(put("x", "v-x"))).expect("put"), Reply::Done);
    let leader = cl.leader(Duration::from_secs(5)).expect("leader");
    let addr = &cl.clients[leader];

    // Text garbage: an error line, and the same connection keeps working.
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let mut w = s.try_clone().expect("clone");
    let mut r = BufReader::new(s);
    let mut line = String::new();
    w.write_all(b"frobnicate the cluster\n").expect("write");
    r.read_line(&mut line).expect("reply");
    assert!(line.starts_with("error"), "got {line:?}");
    line.clear();
    w.write_all(b"put y v-y\nget y\n").expect("write");
    r.read_line(&mut line).expect("reply");
    assert_eq!(line, "ok\n");
    line.clear();
    r.read_line(&mut line).expect("reply");
    assert_eq!(line, "v-y\n");

    // A framed request with a garbage body: an error frame back.
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    s.write_all(&[0, 0, 0, 5, 0xde, 0xad, 0xbe, 0xef, 0x42]).expect("write");
    let mut hdr = [0u8; 4];
    std::io::Read::read_exact(&mut s, &mut hdr).expect("error frame");
    let mut body = vec![0u8; u32::from_be_bytes(hdr) as usize];
    std::io::Read::read_exact(&mut s, &mut body).expect("error body");
    let resp: stutter_replica::wire::ClientResponse = stutter_replica::wire::decode(&body).expect("decodes");
    assert!(matches!(resp, stutter_replica::wire::ClientResponse::Error(_)), "{resp:?}");

    // An oversized frame header, a connection dropped mid-frame, random bytes.
    for junk in [&[0x00, 0xff, 0xff, 0xff, 1][..], &[0, 0, 0, 100, 1, 2][..], &[0x17, 0x03, 0x01, 0x00, 0xff][..]] {
        if let Ok(mut s) = TcpStream::connect(addr) {
            let _ = s.write_all(junk);
        }
    }
    // Still serving, acknowledged data intact.
    let mut c = cl.client();
    assert_eq!(rt.block_on(c.call(get("x"))).expect("get"), Reply::Value(Some("v-x".into())));
    assert_eq!(rt.block_on(c.call(put("z", "v-z"))).expect("put"), Reply::Done);
}

#[test]
fn cas_and_redirects_through_the_text_protocol() {
    let cl = Cluster::new();
    let leader = cl.leader(Duration::from_secs(5)).expect("leader");
    let follower = (leader + 1) % 3;
    // The leader may report itself before its first heartbeat reached the
    // follower (which would answer `retry`): wait until the follower knows.
    let rt = rt();
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        match rt.block_on(client::status(&cl.clients[follower], Duration::from_millis(200))) {
            Ok(s) if s.leader == Some(leader as ReplicaId) => break,
            _ => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    let talk = |addr: &str, lines: &[&str]| -> Vec<String> {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5))).ok();
        let mut w = s.try_clone().expect("clone");
        let mut r = BufReader::new(s);
        lines
            .iter()
            .map(|l| {
                w.write_all(format!("{l}\n").as_bytes()).expect("write");
                let mut out = String::new();
                r.read_line(&mut out).expect("read");
                out.trim_end().to_string()
            })
            .collect()
    };
    let got = talk(&cl.clients[follower], &["get k"]);
    assert_eq!(got, vec![format!("leader is {}", cl.clients[leader])]);
    let got = talk(&cl.clients[leader], &["cas k - 1", "cas k - 2", "cas k 1 2", "get k", "del k", "get k"]);
    assert_eq!(got, vec!["ok", "fail 1", "ok", "2", "ok", ""]);
}

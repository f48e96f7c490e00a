//! Idle and slow client connections (src/node/idle.rs): thousands of idle
//! connections do not lock new clients out; an idle connection and a
//! half-sent request are closed after their timeouts, an active one is not.

// Test code: unwrap, expect and panic are how a test fails (the
// workspace lints deny them in the code under test).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use stutter_core::{Op, Reply, Role};
use stutter_replica::client::{self, Client};
use stutter_replica::wire::{self, ClientRequest};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn leader(rt: &tokio::runtime::Runtime, addrs: &[String]) -> String {
    let until = Instant::now() + Duration::from_secs(15);
    while Instant::now() < until {
        for a in addrs {
            if let Ok(s) = rt.block_on(client::status(a, Duration::from_millis(300))) {
                if s.role == Role::Leader {
                    return a.clone();
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("no leader");
}

/// Raises this process's open-file limit to its hard limit (10,000
/// sockets need more than the usual soft 1,024).
fn raise_nofile() -> u64 {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `l` is a valid, writable rlimit; getrlimit and setrlimit
    // touch nothing else.
    #[allow(unsafe_code)]
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut l);
        l.rlim_cur = l.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &l);
    }
    l.rlim_cur
}

#[test]
fn with_ten_thousand_idle_connections_open_a_new_clients_write_succeeds_within_a_second() {
    let limit = raise_nofile();
    assert!(
        limit > 10_500,
        "open-file limit {limit}: the test needs 10,500"
    );
    let dir = tempfile::tempdir().unwrap();
    // Calm timeouts: on a loaded CI machine the flood below starves the
    // debug-built replicas for tens of seconds, and elections then are
    // noise this test does not measure.
    let mut cluster = common::LocalCluster::configure_timeouts(dir.path(), "", 100, 1500);
    cluster.start_all();
    let rt = rt();
    let leader = leader(&rt, &cluster.addrs);
    // 10,000 connections that send nothing, all kept open on this side.
    let opening = Instant::now();
    let mut idle = Vec::with_capacity(10_000);
    for _ in 0..10_000 {
        match TcpStream::connect(&leader) {
            Ok(s) => idle.push(s),
            Err(e) => panic!("connect #{}: {e}", idle.len()),
        }
    }
    eprintln!("10,000 connections opened in {:?}", opening.elapsed());
    // They have been idle a while.
    std::thread::sleep(Duration::from_millis(1500));
    let started = Instant::now();
    let mut c = Client::new(vec![leader.clone()], client::fresh_client_id())
        .with_timeouts(Duration::from_millis(900), Duration::from_secs(1));
    let r = rt.block_on(c.call(Op::Put {
        key: "k".into(),
        value: "v".into(),
    }));
    let took = started.elapsed();
    assert!(matches!(r, Ok(Reply::Done)), "{r:?} after {took:?}");
    assert!(took < Duration::from_secs(1), "took {took:?}");
    drop(idle);
    assert!(cluster.all_running(), "{}", cluster.exited_report());
}

/// Whether the replica closed `s` within `within` (reads end or fail).
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 256];
    let until = Instant::now() + within;
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return false,
            Err(_) => return true,
        }
        if Instant::now() > until {
            return false;
        }
    }
}

#[test]
fn an_idle_connection_and_a_half_sent_request_are_closed_an_active_one_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = common::LocalCluster::configure(
        dir.path(),
        "[limits]\nclient_idle_timeout_s = 1\nclient_request_timeout_s = 1\n",
    );
    cluster.start_all();
    let rt = rt();
    let addr = leader(&rt, &cluster.addrs);
    let status = wire::encode(&ClientRequest::Status).unwrap();

    let mut silent = TcpStream::connect(&addr).unwrap();
    // Half a frame: the length's first two bytes, then nothing.
    let mut half = TcpStream::connect(&addr).unwrap();
    half.write_all(&status[..2]).unwrap();
    // A text line never finished, trickled a byte every 300 ms.
    let mut trickle = TcpStream::connect(&addr).unwrap();
    // Active: a status request every 300 ms.
    let mut active = TcpStream::connect(&addr).unwrap();
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(2500) {
        active.write_all(&status).unwrap();
        let _ = trickle.write_all(b"g");
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(
        closed_within(&mut silent, Duration::from_millis(500)),
        "idle connection still open"
    );
    assert!(
        closed_within(&mut half, Duration::from_millis(500)),
        "half-sent frame still open"
    );
    assert!(
        closed_within(&mut trickle, Duration::from_millis(500)),
        "trickled line still open"
    );
    // The active one still gets answers (its replies are waiting to be read).
    active.write_all(&status).unwrap();
    active
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let mut len = [0u8; 4];
    active
        .read_exact(&mut len)
        .expect("the active connection was closed");
}

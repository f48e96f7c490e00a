//! The storage alarm on real processes: three replicas whose data
//! directories are faultfs mounts (impl/faultfs) that fail every write
//! and sync with ENOSPC on command, all at once. Reads go on, writes get
//! the alarm's error, `status` shows it, and when space returns writes
//! resume without a restart; nothing acknowledged is lost. Then an EIO
//! that clears after a few attempts: the write waits for it and succeeds.

// Test code: unwrap, expect and panic are how a test fails (the
// workspace lints deny them in the code under test).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use stutter_core::{Op, Reply};
use stutter_faultfs::{Fail, FailMode, Store};
use stutter_replica::client::{self, Client, ClientError};

fn put(k: &str, v: &str) -> Op {
    Op::Put {
        key: k.to_owned().into(),
        value: v.to_owned().into(),
    }
}

fn get(k: &str) -> Op {
    Op::Get {
        key: k.to_owned().into(),
    }
}

fn ok(r: Result<Reply, ClientError>) -> Reply {
    r.unwrap_or_else(|e| panic!("{e}"))
}

fn set_fail(stores: &[Arc<Mutex<Store>>], fail: Option<Fail>) {
    for s in stores {
        s.lock().unwrap().set_fail(fail.clone());
    }
}

#[test]
fn with_every_disk_full_reads_go_on_writes_get_the_alarm_and_resume_when_space_returns() {
    assert!(
        Path::new("/dev/fuse").exists(),
        "needs /dev/fuse and fusermount3 (scripts/setup installs Debian's fuse3)"
    );
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = common::LocalCluster::configure(dir.path(), "");
    let addrs = cluster.addrs.clone();
    // Mounted before the replicas start, unmounted (the sessions dropped)
    // after they are gone.
    let mut stores = Vec::new();
    let mut sessions = Vec::new();
    for id in 0..3 {
        let mnt = cluster.data(id);
        std::fs::create_dir_all(&mnt).unwrap();
        let (store, session) =
            stutter_faultfs::mount_in_process(&dir.path().join(format!("store-{id}")), &mnt)
                .expect("mount faultfs");
        stores.push(store);
        sessions.push(session);
    }
    cluster.start_all();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = |deadline: u64| {
        Client::new(addrs.clone(), client::fresh_client_id())
            .with_timeouts(Duration::from_millis(500), Duration::from_secs(deadline))
    };
    let mut c = client(15);
    let mut acked = Vec::new();
    for i in 0..20 {
        let k = format!("k{i}");
        assert_eq!(ok(rt.block_on(c.call(put(&k, "before")))), Reply::Done);
        acked.push(k);
    }

    // Every disk full at once.
    set_fail(
        &stores,
        Some(Fail {
            mode: FailMode::Enospc,
            remaining: None,
        }),
    );
    // The first write finds the disk full: it was proposed and waits (its
    // outcome unknown to this client); the alarm is up once a log tried.
    let mut first = client(2);
    let r = rt.block_on(first.call(put("in-flight", "x")));
    assert!(
        r.is_err(),
        "a write acknowledged with every disk full: {r:?}"
    );
    // Then writes are refused at once, with the alarm's error.
    let mut w = client(5);
    let t = Instant::now();
    let r = rt.block_on(w.call(put("k0", "during")));
    assert!(
        matches!(r, Err(ClientError::Rejected(Reply::StorageFull))),
        "{r:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    // Reads are served.
    for k in &acked {
        assert_eq!(
            ok(rt.block_on(c.call(get(k)))),
            Reply::Value(Some("before".into()))
        );
    }
    // Status says so on every replica, and every replica still runs.
    for a in &addrs {
        let s = rt
            .block_on(client::status(a, Duration::from_secs(2)))
            .unwrap();
        let alarm = s.storage_alarm.unwrap_or_default();
        assert!(alarm.contains("No space left"), "{a}: {alarm:?}");
    }
    assert!(cluster.all_running(), "{}", cluster.exited_report());

    // Space returns: the alarm disarms itself (the held group is retried
    // every 500 ms) and writes resume.
    set_fail(&stores, None);
    let deadline = Instant::now() + Duration::from_secs(10);
    for a in &addrs {
        loop {
            let s = rt.block_on(client::status(a, Duration::from_secs(2)));
            if s.map(|s| s.storage_alarm.is_none()).unwrap_or(false) {
                break;
            }
            assert!(Instant::now() < deadline, "{a}: the alarm stayed on");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let mut after = client(15);
    assert_eq!(ok(rt.block_on(after.call(put("k0", "after")))), Reply::Done);

    // An EIO that clears after a few attempts: the write waits and succeeds.
    set_fail(
        &stores,
        Some(Fail {
            mode: FailMode::Eio,
            remaining: Some(2),
        }),
    );
    assert_eq!(
        ok(rt.block_on(after.call(put("k1", "after-eio")))),
        Reply::Done
    );

    // Nothing acknowledged was lost; the in-flight write may or may not
    // have taken effect.
    for k in &acked[2..] {
        assert_eq!(
            ok(rt.block_on(c.call(get(k)))),
            Reply::Value(Some("before".into()))
        );
    }
    assert_eq!(
        ok(rt.block_on(c.call(get("k0")))),
        Reply::Value(Some("after".into()))
    );
    assert_eq!(
        ok(rt.block_on(c.call(get("k1")))),
        Reply::Value(Some("after-eio".into()))
    );
    cluster.stop_all();
    drop(sessions);
}

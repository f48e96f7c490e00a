//! The drop rule, on the store directly (no kernel) and then through a
//! real FUSE mount with the `faultfs` command, as a nemesis uses it.

// Test code: unwrap, expect and panic are how a test fails (the
// workspace lints deny them in the code under test).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use stutter_faultfs::store::{Kind, Store, ROOT};
use stutter_faultfs::{Fail, FailMode};

fn file(s: &mut Store, dir: u64, name: &str) -> u64 {
    s.create(dir, name, Kind::File, 0o644).unwrap().ino
}

fn content(s: &Store, dir: u64, name: &str) -> Option<Vec<u8>> {
    let a = s.lookup(dir, name).ok()?;
    Some(s.read(a.ino, 0, a.size).unwrap())
}

fn store() -> (tempfile::TempDir, Store) {
    let d = tempfile::tempdir().unwrap();
    let s = Store::open(d.path()).unwrap();
    (d, s)
}

#[test]
fn synced_bytes_survive_a_drop_and_unsynced_ones_do_not() {
    let (_d, mut s) = store();
    let f = file(&mut s, ROOT, "log");
    s.fsyncdir(ROOT).unwrap();
    s.write(f, 0, b"synced").unwrap();
    s.fsync(f).unwrap();
    s.write(f, 6, b"+lost").unwrap();
    s.write(f, 0, b"S").unwrap();
    assert_eq!(content(&s, ROOT, "log").unwrap(), b"Synced+lost");
    let r = s.drop_unsynced(None).unwrap();
    assert!(r.lost_bytes > 0);
    assert_eq!(content(&s, ROOT, "log").unwrap(), b"synced");
    // Writing on after the drop works on what survived.
    let f = s.lookup(ROOT, "log").unwrap().ino;
    s.write(f, 6, b"!").unwrap();
    s.fsync(f).unwrap();
    s.drop_unsynced(None).unwrap();
    assert_eq!(content(&s, ROOT, "log").unwrap(), b"synced!");
}

#[test]
fn a_new_file_needs_its_directory_synced() {
    let (_d, mut s) = store();
    let f = file(&mut s, ROOT, "new");
    s.write(f, 0, b"data").unwrap();
    s.fsync(f).unwrap();
    s.drop_unsynced(None).unwrap();
    assert_eq!(content(&s, ROOT, "new"), None, "entry not synced: gone");

    let f = file(&mut s, ROOT, "new");
    s.write(f, 0, b"data").unwrap();
    s.fsync(f).unwrap();
    s.fsyncdir(ROOT).unwrap();
    s.drop_unsynced(None).unwrap();
    assert_eq!(content(&s, ROOT, "new").unwrap(), b"data");
}

#[test]
fn entries_of_a_subdirectory_follow_its_own_sync() {
    let (_d, mut s) = store();
    let sub = s.create(ROOT, "sub", Kind::Dir, 0o755).unwrap().ino;
    s.fsyncdir(ROOT).unwrap();
    let f = file(&mut s, sub, "x");
    s.fsync(f).unwrap();
    s.fsyncdir(ROOT).unwrap(); // the parent's sync does not cover sub's entries
    s.drop_unsynced(None).unwrap();
    let sub = s.lookup(ROOT, "sub").unwrap().ino;
    assert_eq!(s.readdir(sub).unwrap(), vec![]);
}

#[test]
fn a_rename_without_a_directory_sync_is_undone() {
    // The snapshot pattern: write a temporary file, sync it, rename it
    // over the old one; without the directory's sync the old one is back.
    let (_d, mut s) = store();
    let old = file(&mut s, ROOT, "snapshot");
    s.write(old, 0, b"old").unwrap();
    s.fsync(old).unwrap();
    s.fsyncdir(ROOT).unwrap();
    let tmp = file(&mut s, ROOT, "snapshot.tmp");
    s.write(tmp, 0, b"new").unwrap();
    s.fsync(tmp).unwrap();
    s.rename(ROOT, "snapshot.tmp", ROOT, "snapshot").unwrap();
    assert_eq!(content(&s, ROOT, "snapshot").unwrap(), b"new");
    s.drop_unsynced(None).unwrap();
    assert_eq!(content(&s, ROOT, "snapshot").unwrap(), b"old");
    assert_eq!(content(&s, ROOT, "snapshot.tmp"), None);

    let tmp = file(&mut s, ROOT, "snapshot.tmp");
    s.write(tmp, 0, b"new").unwrap();
    s.fsync(tmp).unwrap();
    s.rename(ROOT, "snapshot.tmp", ROOT, "snapshot").unwrap();
    s.fsyncdir(ROOT).unwrap();
    s.drop_unsynced(None).unwrap();
    assert_eq!(content(&s, ROOT, "snapshot").unwrap(), b"new");
}

#[test]
fn removals_and_truncations_not_synced_are_undone() {
    let (_d, mut s) = store();
    let f = file(&mut s, ROOT, "seg");
    s.write(f, 0, &[7u8; 10_000]).unwrap();
    s.fsync(f).unwrap();
    s.fsyncdir(ROOT).unwrap();
    s.setattr(f, None, Some(100)).unwrap();
    s.setattr(f, None, Some(9_000)).unwrap(); // extended again: zeros
    assert_eq!(s.read(f, 200, 1).unwrap(), vec![0]);
    s.remove(ROOT, "seg", false).unwrap();
    assert_eq!(content(&s, ROOT, "seg"), None);
    s.drop_unsynced(None).unwrap();
    assert_eq!(content(&s, ROOT, "seg").unwrap(), vec![7u8; 10_000]);

    // Synced, the truncation stays.
    let f = s.lookup(ROOT, "seg").unwrap().ino;
    s.setattr(f, None, Some(100)).unwrap();
    s.fsync(f).unwrap();
    s.drop_unsynced(None).unwrap();
    assert_eq!(content(&s, ROOT, "seg").unwrap(), vec![7u8; 100]);
}

#[test]
fn a_torn_drop_keeps_a_prefix_of_the_last_write_and_the_writes_before_it() {
    for seed in 0..20 {
        let (_d, mut s) = store();
        let f = file(&mut s, ROOT, "log");
        s.write(f, 0, b"head").unwrap();
        s.fsync(f).unwrap();
        s.fsyncdir(ROOT).unwrap();
        s.write(f, 4, b"-earlier").unwrap();
        s.write(f, 12, b"-LASTWRITE").unwrap();
        let r = s.drop_unsynced(Some(seed)).unwrap();
        let (_, off, keep, len) = r.torn.expect("torn");
        assert_eq!((off, len), (12, 10));
        assert!((1..10).contains(&keep), "{keep}");
        let got = content(&s, ROOT, "log").unwrap();
        let full = b"head-earlier-LASTWRITE";
        assert_eq!(got, &full[..12 + keep as usize], "seed {seed}");
    }
}

#[test]
fn enospc_fails_writes_until_switched_off_and_removals_still_work() {
    let (_d, mut s) = store();
    let f = file(&mut s, ROOT, "a");
    let g = file(&mut s, ROOT, "b");
    s.fsyncdir(ROOT).unwrap();
    s.write(f, 0, b"x").unwrap();
    s.set_fail(Some(Fail {
        mode: FailMode::Enospc,
        remaining: None,
    }));
    assert_eq!(s.write(f, 1, b"y"), Err(libc::ENOSPC));
    assert_eq!(s.fsync(f), Err(libc::ENOSPC));
    assert_eq!(
        s.create(ROOT, "c", Kind::File, 0o644).map(|_| ()),
        Err(libc::ENOSPC)
    );
    assert_eq!(s.remove(ROOT, "b", false), Ok(()));
    let _ = g;
    s.set_fail(None);
    // The failed sync lost nothing: what was written is still there to sync.
    s.fsync(f).unwrap();
    s.drop_unsynced(None).unwrap();
    assert_eq!(content(&s, ROOT, "a").unwrap(), b"x");
    assert_eq!(s.status().failed_ops, 3);
}

#[test]
fn an_eio_that_a_retry_clears() {
    let (_d, mut s) = store();
    let f = file(&mut s, ROOT, "a");
    s.set_fail(Some(Fail {
        mode: FailMode::Eio,
        remaining: Some(2),
    }));
    assert_eq!(s.write(f, 0, b"x"), Err(libc::EIO));
    assert_eq!(s.remove(ROOT, "a", false), Err(libc::EIO));
    assert_eq!(s.write(f, 0, b"x"), Ok(1));
    assert_eq!(s.status().fail, None);
}

#[test]
fn the_durable_tree_outlives_the_store() {
    let d = tempfile::tempdir().unwrap();
    {
        let mut s = Store::open(d.path()).unwrap();
        let f = file(&mut s, ROOT, "kept");
        s.write(f, 0, b"durable").unwrap();
        s.fsync(f).unwrap();
        s.fsyncdir(ROOT).unwrap();
        let g = file(&mut s, ROOT, "lost");
        s.write(g, 0, b"x").unwrap();
        s.fsync(g).unwrap();
    }
    let mut s = Store::open(d.path()).unwrap();
    assert_eq!(content(&s, ROOT, "kept").unwrap(), b"durable");
    assert_eq!(content(&s, ROOT, "lost"), None);
    // The unreachable file's bytes were removed; new inodes are fresh.
    assert_eq!(std::fs::read_dir(d.path().join("data")).unwrap().count(), 1);
    let h = file(&mut s, ROOT, "h");
    assert_eq!(s.read(h, 0, 10).unwrap(), b"");
}

// Through the kernel, with the command a nemesis calls.

fn faultfs(args: &[&str]) -> serde_json::Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_faultfs"))
        .args(args)
        .output()
        .expect("run faultfs");
    assert!(
        out.status.success(),
        "faultfs {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn sync_dir(p: &Path) {
    std::fs::File::open(p).unwrap().sync_all().unwrap();
}

/// A fresh mount (in a temporary directory, with a control socket of its
/// own, each fsync taking `sync_ms`) holding `wal` with "synced" durable:
/// the directory (removed when dropped), the mountpoint, the socket and
/// `wal`, open for more writes.
fn mounted_with_synced_wal(sync_ms: u64) -> (tempfile::TempDir, PathBuf, PathBuf, std::fs::File) {
    use std::io::Write;
    let d = tempfile::tempdir().unwrap();
    let (store, mnt) = (d.path().join("store"), d.path().join("mnt"));
    std::fs::create_dir_all(&mnt).unwrap();
    let sock = d.path().join("ctl.sock");
    let ms = sync_ms.to_string();
    faultfs(&[
        "mount",
        store.to_str().unwrap(),
        mnt.to_str().unwrap(),
        "--socket",
        sock.to_str().unwrap(),
        "--sync-latency-ms",
        &ms,
    ]);
    let mut f = std::fs::File::create(mnt.join("wal")).unwrap();
    sync_dir(&mnt);
    f.write_all(b"synced").unwrap();
    f.sync_data().unwrap();
    (d, mnt, sock, f)
}

#[test]
fn through_fuse_a_drop_loses_exactly_what_was_not_synced() {
    assert!(
        Path::new("/dev/fuse").exists(),
        "needs /dev/fuse and fusermount3 (scripts/setup installs Debian's fuse3)"
    );
    use std::io::Write;
    use std::os::unix::fs::FileExt;
    let d = tempfile::tempdir().unwrap();
    let (store, mnt) = (d.path().join("store"), d.path().join("mnt"));
    std::fs::create_dir_all(&mnt).unwrap();
    let sock = d.path().join("ctl.sock");
    let (m, s) = (mnt.to_str().unwrap(), sock.to_str().unwrap());
    faultfs(&["mount", store.to_str().unwrap(), m, "--socket", s]);

    let mut f = std::fs::File::create(mnt.join("wal")).unwrap();
    f.write_all(b"acknowledged").unwrap();
    f.sync_data().unwrap();
    sync_dir(&mnt);
    f.write_all_at(b"not yet", 12).unwrap();
    std::fs::write(mnt.join("unsynced-file"), b"x").unwrap();
    let st = faultfs(&["status", m, "--socket", s]);
    assert!(st["status"]["unsynced_bytes"].as_u64().unwrap() > 0, "{st}");
    drop(f);

    // ENOSPC on command, through the kernel.
    faultfs(&["fail", m, "enospc", "--socket", s]);
    let e = std::fs::write(mnt.join("other"), b"y").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
    faultfs(&["fail", m, "off", "--socket", s]);

    faultfs(&["drop", m, "--socket", s]);
    assert_eq!(std::fs::read(mnt.join("wal")).unwrap(), b"acknowledged");
    assert!(!mnt.join("unsynced-file").exists());

    faultfs(&["unmount", m, "--socket", s]);
    // Mounted again, the durable state is all there is.
    faultfs(&["mount", store.to_str().unwrap(), m, "--socket", s]);
    assert_eq!(std::fs::read(mnt.join("wal")).unwrap(), b"acknowledged");
    faultfs(&["unmount", m, "--socket", s]);
}

#[test]
fn a_drop_during_a_slow_sync_loses_what_was_being_synced() {
    use std::io::Write;
    // Long enough that the drop below comes first on a loaded machine.
    let latency = std::time::Duration::from_millis(1500);
    let (_d, mnt, sock, mut f) = mounted_with_synced_wal(latency.as_millis() as u64);
    let (m, s) = (mnt.to_str().unwrap(), sock.to_str().unwrap());

    // A writer whose sync is under way when the power goes.
    f.write_all(b"+in flight").unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let syncer = std::thread::spawn(move || {
        tx.send(()).unwrap();
        let t = std::time::Instant::now();
        // After the drop the sync makes the surviving state durable;
        // whether it reports success is not what this test is about.
        let _ = f.sync_data();
        t.elapsed()
    });
    rx.recv().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    // On the socket from this process: a child started now would inherit
    // the open file, and closing it on exec is a FUSE flush that waits
    // behind the sync (a nemesis's process holds no file of the mount).
    let dropped = stutter_faultfs::control::request(&sock, "drop").unwrap();
    // Counted in pages: the page the in-flight bytes are on.
    assert!(
        dropped["dropped"]["lost_bytes"].as_u64().unwrap() > 0,
        "{dropped}"
    );
    let took = syncer.join().unwrap();
    assert!(took >= latency, "sync took {took:?}");
    assert_eq!(std::fs::read(mnt.join("wal")).unwrap(), b"synced");
    faultfs(&["unmount", m, "--socket", s]);
}

#[test]
fn a_cut_fails_the_sync_under_way_and_every_change_until_power_returns() {
    use std::io::Write;
    let (_d, mnt, sock, mut f) = mounted_with_synced_wal(1500);
    let (m, s) = (mnt.to_str().unwrap(), sock.to_str().unwrap());

    // The program is still running when the power goes: its sync under
    // way must not report the lost bytes durable.
    f.write_all(b"+in flight").unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let syncer = std::thread::spawn(move || {
        tx.send(()).unwrap();
        let r = f.sync_data();
        (r, f)
    });
    rx.recv().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let cut = stutter_faultfs::control::request(&sock, "cut").unwrap();
    assert!(cut["dropped"]["lost_bytes"].as_u64().unwrap() > 0, "{cut}");
    let (synced, mut f) = syncer.join().unwrap();
    assert_eq!(
        synced.map_err(|e| e.raw_os_error()),
        Err(Some(libc::EIO)),
        "a sync that the cut fell into reports the loss"
    );
    // Until power returns, nothing the program does changes the disk.
    let w = f.write_all(b"+after the cut");
    assert_eq!(w.map_err(|e| e.raw_os_error()), Err(Some(libc::EIO)));
    assert_eq!(std::fs::read(mnt.join("wal")).unwrap(), b"synced");
    drop(f);
    faultfs(&["fail", m, "off", "--socket", s]);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(mnt.join("wal"))
        .unwrap();
    f.write_all(b"+restarted").unwrap();
    f.sync_data().unwrap();
    assert_eq!(std::fs::read(mnt.join("wal")).unwrap(), b"synced+restarted");
    drop(f);
    faultfs(&["unmount", m, "--socket", s]);
}

#[test]
fn a_cut_at_a_time_waits_for_it() {
    use std::io::Write;
    use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
    let (_d, mnt, sock, mut f) = mounted_with_synced_wal(0);
    let (m, s) = (mnt.to_str().unwrap(), sock.to_str().unwrap());
    f.write_all(b"+unsynced").unwrap();
    drop(f);

    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let t0 = Instant::now();
    let at = (now_ms + 400).to_string();
    faultfs(&["cut", m, "--at", &at, "--socket", s]);
    assert!(
        t0.elapsed() >= Duration::from_millis(390),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(std::fs::read(mnt.join("wal")).unwrap(), b"synced");

    // A time a minute and more away is refused, and cuts nothing.
    faultfs(&["fail", m, "off", "--socket", s]);
    let far = (now_ms + 3_600_000).to_string();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_faultfs"))
        .args(["cut", m, "--at", &far, "--socket", s])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("clocks"),
        "{out:?}"
    );
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(mnt.join("wal"))
        .unwrap();
    f.write_all(b"+after").unwrap();
    f.sync_data().unwrap();
    drop(f);
    assert_eq!(std::fs::read(mnt.join("wal")).unwrap(), b"synced+after");
    faultfs(&["unmount", m, "--socket", s]);
}

//! The replica's simulated disk under madsim (`platform::fs` with the
//! `madsim` feature, impl/replica/src/platform/madsim_fs.rs): what a crash keeps.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;

use stutter_replica::platform::fs;

fn dir(name: &str) -> &Path {
    let p = Path::new(name);
    fs::create_dir_all(p).unwrap();
    p
}

#[test]
fn a_crash_keeps_synced_bytes_and_loses_the_rest() {
    let d = dir("/disk-test/bytes");
    let f = fs::OpenOptions::new()
        .create(true)
        .write(true)
        .read(true)
        .open(d.join("a"))
        .unwrap();
    f.write_all_at(b"durable", 0).unwrap();
    f.sync_data().unwrap();
    fs::sync_dir(d).unwrap();
    f.write_all_at(b"DURABLE and more", 0).unwrap();
    assert_eq!(fs::read(d.join("a")).unwrap(), b"DURABLE and more");
    drop(f);
    fs::crash(d);
    assert_eq!(fs::read(d.join("a")).unwrap(), b"durable");
    fs::forget(d);
}

#[test]
fn a_name_is_durable_only_once_its_directory_is_synced() {
    let d = dir("/disk-test/names");
    let mut f = fs::File::create(d.join("new")).unwrap();
    f.write_all(b"x").unwrap();
    f.sync_all().unwrap();
    drop(f);
    fs::crash(d);
    assert!(
        fs::metadata(d.join("new")).is_err(),
        "a creation not synced into its directory survived"
    );

    let mut f = fs::File::create(d.join("tmp")).unwrap();
    f.write_all(b"snapshot").unwrap();
    f.sync_all().unwrap();
    fs::sync_dir(d).unwrap();
    fs::rename(d.join("tmp"), d.join("snap")).unwrap();
    fs::crash(d);
    assert!(
        fs::metadata(d.join("snap")).is_err(),
        "an unsynced rename survived"
    );
    assert_eq!(fs::read(d.join("tmp")).unwrap(), b"snapshot");

    fs::rename(d.join("tmp"), d.join("snap")).unwrap();
    fs::sync_dir(d).unwrap();
    fs::remove_file(d.join("snap")).unwrap();
    fs::crash(d);
    assert_eq!(
        fs::read(d.join("snap")).unwrap(),
        b"snapshot",
        "an unsynced removal held"
    );
    let names: Vec<_> = fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("snap")]);
    fs::forget(d);
}

#[test]
fn a_crash_of_one_directory_leaves_the_others_alone() {
    let a = dir("/disk-test/others/a");
    let b = dir("/disk-test/others/b");
    for d in [a, b] {
        let mut f = fs::File::create(d.join("f")).unwrap();
        f.write_all(b"unsynced").unwrap();
    }
    fs::crash(a);
    assert!(fs::read(a.join("f")).is_err());
    assert_eq!(fs::read(b.join("f")).unwrap(), b"unsynced");
    fs::forget(Path::new("/disk-test/others"));
}

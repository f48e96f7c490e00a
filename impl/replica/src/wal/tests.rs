//! Tests of the write-ahead log: recovery, torn and corrupt tails,
//! segments, snapshots, recycling, implausible records.

use stutter_core::{Snapshot, Value};

use super::format::parse_one;
use super::*;

fn accept(slot: u64, ballot: u64) -> Record {
    Record::Accept {
        slot: Slot(slot),
        ballot: Ballot(ballot),
        value: Value::Noop,
    }
}

fn big(slot: u64, ballot: u64, bytes: usize) -> Record {
    let req = stutter_core::Request {
        client: 1,
        seq: slot,
        op: stutter_core::Op::Put {
            key: "k".into(),
            value: vec![b'x'; bytes].into(),
        },
    };
    Record::Accept {
        slot: Slot(slot),
        ballot: Ballot(ballot),
        value: Value::Batch(Arc::new(vec![req])),
    }
}

fn segment_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str().map(str::to_owned))
        .filter(|n| parse_segment_name(n).is_some())
        .collect();
    v.sort();
    v
}

fn wait_for(mut f: impl FnMut() -> bool) {
    for _ in 0..500 {
        if f() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("condition not reached");
}

#[test]
fn records_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (mut w, s) = Wal::open(dir.path(), true).unwrap();
    assert_eq!(s, DurableState::default());
    w.append(vec![Record::Ballot(Ballot(257)), accept(1, 257)])
        .unwrap();
    w.append(vec![accept(2, 257)]).unwrap();
    w.sync().unwrap();
    drop(w);
    let (_, s) = Wal::open(dir.path(), true).unwrap();
    assert_eq!(s.ballot, Ballot(257));
    assert_eq!(
        s.accepted.keys().map(|k| k.0).collect::<Vec<_>>(),
        vec![1, 2]
    );
}

#[test]
fn torn_tail_is_ignored_and_the_log_stays_usable() {
    let dir = tempfile::tempdir().unwrap();
    let (mut w, _) = Wal::open(dir.path(), true).unwrap();
    w.append(vec![Record::Ballot(Ballot(1)), accept(1, 1)])
        .unwrap();
    w.sync().unwrap();
    // Written, not synced: the crash comes before the group commit's sync.
    w.append(vec![accept(2, 1)]).unwrap();
    w.flush_buf().unwrap();
    let path = dir.path().join(segment_name(w.cur.seq));
    let len = w.cur.off;
    drop(w);
    // Tear the last record in half, as a crash mid-write would.
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.write_all_at(&[0xee; 3], len - 3).unwrap();
    let (mut w, s) = Wal::open(dir.path(), true).unwrap();
    assert_eq!(s.accepted.len(), 1);
    w.append(vec![accept(3, 1)]).unwrap();
    w.sync().unwrap();
    drop(w);
    let (_, s) = Wal::open(dir.path(), true).unwrap();
    assert_eq!(
        s.accepted.keys().map(|k| k.0).collect::<Vec<_>>(),
        vec![1, 3]
    );
    assert_eq!(s.ballot, Ballot(1));
}

#[test]
fn a_corrupt_unsynced_tail_stops_replay_of_that_segment_there() {
    let dir = tempfile::tempdir().unwrap();
    let (mut w, _) = Wal::open(dir.path(), true).unwrap();
    w.append(vec![Record::Ballot(Ballot(1)), accept(1, 1)])
        .unwrap();
    w.sync().unwrap();
    w.append(vec![accept(2, 1)]).unwrap();
    w.flush_buf().unwrap();
    let path = dir.path().join(segment_name(w.cur.seq));
    let len = w.cur.off;
    drop(w);
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.write_all_at(&[0x55], len - 2).unwrap();
    let (_, s) = Wal::open(dir.path(), true).unwrap();
    assert_eq!(s.ballot, Ballot(1));
    assert_eq!(
        s.accepted.len(),
        1,
        "the corrupt record and everything after it is dropped"
    );
}

/// The turmoil layer's seeds 11 and 51 (`--damage 0.2`): a replica's only
/// record, its synced promise, had a byte flipped while it was down, and
/// recovery took it for a torn tail and voted again with ballot 0.
#[test]
fn a_synced_last_record_damaged_later_is_damage_not_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let (mut w, _) = Wal::open(dir.path(), true).unwrap();
    w.append(vec![Record::Ballot(Ballot(256))]).unwrap();
    w.sync().unwrap();
    let name = segment_name(w.cur.seq);
    let len = w.cur.off;
    drop(w);
    for at in 0..len {
        let d2 = tempfile::tempdir().unwrap();
        for f in [name.as_str(), marks::MARKS] {
            std::fs::copy(dir.path().join(f), d2.path().join(f)).unwrap();
        }
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(d2.path().join(&name))
            .unwrap();
        let mut b = [0u8];
        f.read_exact_at(&mut b, at).unwrap();
        f.write_all_at(&[b[0] ^ 0x04], at).unwrap();
        let err = Wal::open(d2.path(), true)
            .err()
            .unwrap_or_else(|| panic!("byte {at} flipped: opened"));
        let d = damage_of(&err);
        assert_eq!(d.offset, 0, "byte {at}");
        assert!(d.what.contains(&format!("synced up to byte {len}")), "{d}");
    }
    // Without its marks (a log from before them, or a damaged marks
    // file) the same damage is still cut as a torn tail: the old rule.
    std::fs::remove_file(dir.path().join(marks::MARKS)).unwrap();
    let f = OpenOptions::new()
        .write(true)
        .open(dir.path().join(&name))
        .unwrap();
    f.write_all_at(&[0xff], len - 1).unwrap();
    let (_, s) = Wal::open(dir.path(), true).unwrap();
    assert_eq!(s.ballot, Ballot::ZERO);
}

/// Marks survive restarts: the segments recovered are marked again, so a
/// record synced two lives ago and damaged now is still damage.
#[test]
fn marks_carry_over_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (mut w, _) = Wal::open(dir.path(), true).unwrap();
    w.append(vec![Record::Ballot(Ballot(3)), accept(1, 3)])
        .unwrap();
    w.sync().unwrap();
    let (name, len) = (segment_name(w.cur.seq), w.cur.off);
    drop(w);
    let (w, s) = Wal::open(dir.path(), true).unwrap();
    assert_eq!(s.accepted.len(), 1);
    drop(w);
    let (_, marks) = marks::read_marks(dir.path()).unwrap();
    assert_eq!(
        marks.get(&parse_segment_name(&name).unwrap()),
        Some(&len),
        "{marks:?}"
    );
    let f = OpenOptions::new()
        .write(true)
        .open(dir.path().join(&name))
        .unwrap();
    f.write_all_at(&[0x5a], len - 1).unwrap();
    let d = damage_of(
        &Wal::open(dir.path(), true)
            .err()
            .expect("damage must not open"),
    );
    assert!(d.file.ends_with(&name), "{d}");
}

/// Without fsync nothing is synced, so nothing is marked.
#[test]
fn no_marks_without_fsync() {
    let dir = tempfile::tempdir().unwrap();
    let (mut w, _) = Wal::open(dir.path(), false).unwrap();
    w.append(vec![Record::Ballot(Ballot(3))]).unwrap();
    w.sync().unwrap();
    drop(w);
    assert!(std::fs::metadata(dir.path().join(marks::MARKS)).is_err());
}

const SMALL: u64 = 1 << 20;

#[test]
fn full_segments_continue_in_preallocated_ones_that_start_with_the_ballot() {
    let dir = tempfile::tempdir().unwrap();
    let (mut w, _) = Wal::open_with(dir.path(), true, SMALL).unwrap();
    w.append(vec![Record::Ballot(Ballot(9))]).unwrap();
    let per = 64 << 10;
    let n = (3 * SMALL / per as u64) + 2;
    for slot in 1..=n {
        w.append(vec![big(slot, 9, per - 200)]).unwrap();
        w.sync().unwrap();
    }
    assert!(w.segments() >= 4, "{} segments", w.segments());
    drop(w);
    let files = segment_files(dir.path());
    assert!(files.len() >= 4);
    // Preallocated segments have their full size.
    let len = std::fs::metadata(dir.path().join(&files[1])).unwrap().len();
    assert_eq!(len, SMALL);
    let (_, s) = Wal::open_with(dir.path(), true, SMALL).unwrap();
    assert_eq!(s.ballot, Ballot(9));
    assert_eq!(s.accepted.len() as u64, n);
}

#[test]
fn a_record_larger_than_a_segment_gets_one_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let (mut w, _) = Wal::open_with(dir.path(), true, SMALL).unwrap();
    w.append(vec![Record::Ballot(Ballot(2)), accept(1, 2)])
        .unwrap();
    w.append(vec![big(2, 2, 3 * SMALL as usize)]).unwrap();
    w.append(vec![accept(3, 2)]).unwrap();
    w.sync().unwrap();
    drop(w);
    let (_, s) = Wal::open_with(dir.path(), true, SMALL).unwrap();
    assert_eq!(
        s.accepted.keys().map(|k| k.0).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
}

#[test]
fn durable_snapshot_retires_old_segments_and_recycled_ones_replay_nothing_stale() {
    let dir = tempfile::tempdir().unwrap();
    let (mut w, _) = Wal::open_with(dir.path(), true, SMALL).unwrap();
    w.append(vec![Record::Ballot(Ballot(3))]).unwrap();
    let per = 64 << 10;
    let n = (3 * SMALL / per as u64) + 2;
    for slot in 1..=n {
        w.append(vec![big(slot, 3, per - 200)]).unwrap();
        w.sync().unwrap();
    }
    let before = w.segments();
    // A snapshot covering all but the last few slots.
    let t = n - 3;
    let snap = Arc::new(Snapshot {
        last_executed: Slot(t),
        ..Default::default()
    });
    w.append(vec![Record::Snapshot {
        trimmed: Slot(t),
        snapshot: snap,
    }])
    .unwrap();
    w.sync().unwrap();
    wait_for(|| w.snapshot_durable.load(Ordering::Acquire) == t);
    // Retired once a later sync sees the durable snapshot.
    for slot in n + 1..=n + 40 {
        w.append(vec![big(slot, 3, per - 200)]).unwrap();
        w.sync().unwrap();
    }
    assert!(
        w.segments() < before + 1,
        "{} segments, {before} before",
        w.segments()
    );
    drop(w);
    assert!(
        segment_files(dir.path()).len() < before + 4,
        "retired segments are reused or removed"
    );
    let (_, s) = Wal::open_with(dir.path(), true, SMALL).unwrap();
    assert_eq!(s.ballot, Ballot(3));
    assert_eq!(s.trimmed, Slot(t));
    assert_eq!(s.snapshot.map(|s| s.last_executed), Some(Slot(t)));
    let keys: Vec<u64> = s.accepted.keys().map(|k| k.0).collect();
    assert_eq!(
        keys,
        (t + 1..=n + 40).collect::<Vec<_>>(),
        "every instance above the snapshot, none stale"
    );
}

#[test]
fn without_the_snapshot_file_the_segments_still_hold_everything_it_did_not_retire() {
    let dir = tempfile::tempdir().unwrap();
    let (mut w, _) = Wal::open(dir.path(), true).unwrap();
    w.append(vec![Record::Ballot(Ballot(3))]).unwrap();
    for slot in 1..=10 {
        w.append(vec![accept(slot, 3)]).unwrap();
    }
    let snap = Arc::new(Snapshot {
        last_executed: Slot(6),
        ..Default::default()
    });
    w.append(vec![Record::Snapshot {
        trimmed: Slot(6),
        snapshot: snap,
    }])
    .unwrap();
    w.append(vec![accept(11, 3)]).unwrap();
    w.sync().unwrap();
    wait_for(|| dir.path().join(SNAPSHOT).exists());
    drop(w);
    let (_, s) = Wal::open(dir.path(), true).unwrap();
    assert_eq!(s.trimmed, Slot(6));
    assert_eq!(s.snapshot.map(|s| s.last_executed), Some(Slot(6)));
    assert_eq!(
        s.accepted.keys().map(|k| k.0).collect::<Vec<_>>(),
        (7..=11).collect::<Vec<_>>()
    );
    std::fs::remove_file(dir.path().join(SNAPSHOT)).unwrap();
    let (_, s) = Wal::open(dir.path(), true).unwrap();
    assert_eq!(s.trimmed, Slot(0));
    assert_eq!(s.accepted.len(), 11);
}

#[test]
fn records_of_a_recycled_segment_are_stale_under_its_new_number() {
    let mut bytes = Vec::new();
    let body = bincode::serialize(&accept(1, 1)).unwrap();
    bytes.extend_from_slice(&(body.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&crc(5, &body).to_le_bytes());
    bytes.extend_from_slice(&body);
    assert!(parse_one(&bytes, 0, 5).is_some());
    assert!(
        parse_one(&bytes, 0, 9).is_none(),
        "written as segment 5, now named 9"
    );
    assert!(parse_one(&[0u8; 64], 0, 9).is_none(), "zero-filled");
}

#[test]
fn records_with_impossible_slots_or_ballots_end_replay_like_corruption() {
    let rec = |r: &Record| {
        let body = bincode::serialize(r).unwrap();
        let mut b = (body.len() as u32).to_le_bytes().to_vec();
        b.extend_from_slice(&crc(3, &body).to_le_bytes());
        b.extend_from_slice(&body);
        b
    };
    let snap = Arc::new(Snapshot::default());
    for bad in [
        Record::Ballot(Ballot(u64::MAX)),
        accept(u64::MAX, 1),
        accept(1, 1 << 62),
        Record::Snapshot {
            trimmed: Slot(u64::MAX),
            snapshot: snap.clone(),
        },
    ] {
        let seg = [rec(&accept(1, 1)), rec(&bad), rec(&accept(2, 1))].concat();
        let (records, valid) = decode_segment(&seg, 3);
        assert_eq!(records, vec![accept(1, 1)], "{bad:?}");
        assert_eq!(valid, rec(&accept(1, 1)).len());
    }
}

#[test]
fn a_single_file_log_of_an_early_version_is_refused_not_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let body = bincode::serialize(&Record::Ballot(Ballot(5))).unwrap();
    let mut bytes = (body.len() as u32).to_le_bytes().to_vec();
    bytes.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    bytes.extend_from_slice(&body);
    std::fs::write(dir.path().join(SINGLE_FILE_LOG), &bytes).unwrap();
    let err = Wal::open(dir.path(), true).err().expect("refused");
    assert!(err.to_string().contains("single-file"), "{err}");
    // Nothing was created beside it.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from(SINGLE_FILE_LOG)]);
}

// ----- torn tails against damage (recovery.rs, issue 16) -----

/// The bytes of records as segment `seq` holds them.
fn encoded(seq: u64, recs: &[Record]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in recs {
        let body = bincode::serialize(r).unwrap();
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc(seq, &body).to_le_bytes());
        out.extend_from_slice(&body);
    }
    out
}

fn damage_of(err: &std::io::Error) -> Damaged {
    Damaged::find(err)
        .cloned()
        .unwrap_or_else(|| panic!("not a damage error: {err}"))
}

#[test]
fn a_torn_tail_is_cut_off_and_the_prefix_kept() {
    let recs = [Record::Ballot(Ballot(4)), accept(1, 4), accept(2, 4)];
    let whole = encoded(7, &recs);
    let prefix = encoded(7, &recs[..2]).len();
    // The last record cut anywhere (even inside its header), then the
    // segment's unwritten part: zero fill, or stale records of a recycled
    // life (another sequence number).
    let stale = encoded(3, &[accept(9, 1), accept(10, 1)]);
    for cut in prefix..whole.len() {
        for rest in [vec![0u8; 300], stale.clone(), Vec::new()] {
            let bytes = [&whole[..cut], &rest[..]].concat();
            if bytes.starts_with(&whole) {
                // The fill restored the bytes cut off (trailing zeros).
                continue;
            }
            let scan =
                scan_segment(&bytes, 7, "seg", 0).unwrap_or_else(|d| panic!("cut at {cut}: {d}"));
            assert_eq!(scan.records, recs[..2].to_vec(), "cut at {cut}");
            assert_eq!(scan.valid, prefix);
        }
    }
    // A flipped byte in the last record, nothing valid after: torn as well.
    let mut bytes = whole.clone();
    *bytes.last_mut().unwrap() ^= 0x40;
    assert_eq!(
        scan_segment(&bytes, 7, "seg", 0).unwrap().records,
        recs[..2].to_vec()
    );
    // Unless the segment was known to be synced past it: then it is damage.
    let d = scan_segment(&bytes, 7, "seg", whole.len() as u64).unwrap_err();
    assert_eq!(d.offset, prefix as u64, "{d}");
    // Marks that end before the bad record leave it a torn tail.
    assert_eq!(
        scan_segment(&bytes, 7, "seg", prefix as u64)
            .unwrap()
            .records,
        recs[..2].to_vec()
    );
}

#[test]
fn a_flipped_byte_in_a_middle_record_is_damage_at_its_offset() {
    let recs = [
        Record::Ballot(Ballot(4)),
        accept(1, 4),
        accept(2, 4),
        accept(3, 4),
    ];
    let whole = encoded(7, &recs);
    let start = encoded(7, &recs[..2]).len();
    let end = encoded(7, &recs[..3]).len();
    // Every byte of the third record: header (length, CRC) and body.
    for at in start..end {
        let mut bytes = whole.clone();
        bytes[at] ^= 0x10;
        let d = scan_segment(&bytes, 7, "wal-7", 0).unwrap_err();
        assert_eq!(
            (d.file.as_str(), d.offset),
            ("wal-7", start as u64),
            "byte {at} flipped"
        );
        assert!(
            d.what
                .contains(&format!("valid record follows at byte {end}"))
                || at < start + 4,
            "{d}"
        );
    }
}

#[test]
fn a_damaged_record_in_the_middle_stops_the_log_from_opening() {
    let dir = tempfile::tempdir().unwrap();
    let (mut w, _) = Wal::open(dir.path(), true).unwrap();
    w.append(vec![
        Record::Ballot(Ballot(1)),
        accept(1, 1),
        accept(2, 1),
        accept(3, 1),
    ])
    .unwrap();
    w.sync().unwrap();
    let name = segment_name(w.cur.seq);
    drop(w);
    let second = encoded(1, &[Record::Ballot(Ballot(1)), accept(1, 1)]).len();
    let f = OpenOptions::new()
        .write(true)
        .open(dir.path().join(&name))
        .unwrap();
    f.write_all_at(&[0x55], second as u64 + HEADER as u64 + 2)
        .unwrap();
    let err = Wal::open(dir.path(), true)
        .err()
        .expect("damage must not open");
    let d = damage_of(&err);
    assert!(d.file.ends_with(&name), "{d}");
    assert_eq!(d.offset, second as u64);
    let text = err.to_string();
    assert!(
        text.contains(&name)
            && text.contains(&format!("byte {second}"))
            && text.contains("must not vote"),
        "{text}"
    );
}

#[test]
fn a_bad_record_in_an_older_segment_is_damage() {
    let dir = tempfile::tempdir().unwrap();
    let (mut w, _) = Wal::open_with(dir.path(), true, SMALL).unwrap();
    w.append(vec![Record::Ballot(Ballot(9))]).unwrap();
    let per = 64 << 10;
    let n = (2 * SMALL / per as u64) + 2;
    for slot in 1..=n {
        w.append(vec![big(slot, 9, per - 200)]).unwrap();
        w.sync().unwrap();
    }
    drop(w);
    let files = segment_files(dir.path());
    let oldest = dir.path().join(&files[0]);
    let bytes = std::fs::read(&oldest).unwrap();
    let scan = scan_segment(&bytes, parse_segment_name(&files[0]).unwrap(), "x", 0).unwrap();
    assert!(scan.records.len() >= 4, "{} records", scan.records.len());
    // Damage the second accept of the oldest segment.
    let at = encoded(1, &scan.records[..2]).len() as u64 + HEADER as u64 + 40;
    let f = OpenOptions::new().write(true).open(&oldest).unwrap();
    f.write_all_at(&[0xa5], at).unwrap();
    let err = Wal::open_with(dir.path(), true, SMALL)
        .err()
        .expect("damage must not open");
    let d = damage_of(&err);
    assert!(d.file.ends_with(&files[0]), "{d}");
    assert_eq!(d.offset, encoded(1, &scan.records[..2]).len() as u64);
}

#[test]
fn a_corrupt_snapshot_file_is_damage() {
    let dir = tempfile::tempdir().unwrap();
    let (mut w, _) = Wal::open(dir.path(), true).unwrap();
    w.append(vec![Record::Ballot(Ballot(3))]).unwrap();
    for slot in 1..=10 {
        w.append(vec![accept(slot, 3)]).unwrap();
    }
    let snap = Arc::new(Snapshot {
        last_executed: Slot(6),
        ..Default::default()
    });
    w.append(vec![Record::Snapshot {
        trimmed: Slot(6),
        snapshot: snap,
    }])
    .unwrap();
    w.sync().unwrap();
    wait_for(|| dir.path().join(SNAPSHOT).exists());
    drop(w);
    let path = dir.path().join(SNAPSHOT);
    let good = std::fs::read(&path).unwrap();
    for at in [0, 5, good.len() - 1] {
        let mut bad = good.clone();
        bad[at] ^= 0x08;
        std::fs::write(&path, &bad).unwrap();
        let err = Wal::open(dir.path(), true)
            .err()
            .expect("damage must not open");
        assert!(damage_of(&err).file.ends_with(SNAPSHOT), "{err}");
    }
    std::fs::write(&path, &good[..good.len() - 1]).unwrap();
    assert!(
        Wal::open(dir.path(), true).is_err(),
        "a truncated snapshot.bin"
    );
    std::fs::write(&path, &good).unwrap();
    let (_, s) = Wal::open(dir.path(), true).unwrap();
    assert_eq!(s.trimmed, Slot(6));
}

/// Whether the core recovers from `s` without breaking an invariant.
fn core_accepts(s: &DurableState) -> bool {
    let rng =
        Box::new(<rand_xoshiro::Xoshiro256PlusPlus as rand_core::SeedableRng>::seed_from_u64(7));
    stutter_core::Replica::recover(0, stutter_core::Config::default(), s.clone(), rng)
        .check_invariants()
        .is_ok()
}

#[test]
fn a_state_the_core_could_not_recover_is_damage() {
    let snap = |le: u64| {
        Arc::new(Snapshot {
            last_executed: Slot(le),
            ..Default::default()
        })
    };
    let mut s = DurableState::default();
    assert!(check_state(&s, "snap").is_ok());
    // Trimmed to 5, executed to 8: the core needs slot 8 in its log (what
    // seed 16 of the turmoil layer met: "last executed 97 beyond the last
    // index 96").
    s.apply(Record::Snapshot {
        trimmed: Slot(5),
        snapshot: snap(8),
    });
    let d = check_state(&s, "snap").unwrap_err();
    assert!(d.what.contains("last executed slot 8"), "{d}");
    assert!(!core_accepts(&s), "the check guards a real invariant");
    s.apply(accept(8, 1));
    assert!(check_state(&s, "snap").is_ok());
    assert!(core_accepts(&s));
    let mut s = DurableState::default();
    s.apply(Record::Snapshot {
        trimmed: Slot(5),
        snapshot: snap(5),
    });
    assert!(check_state(&s, "snap").is_ok());
    assert!(core_accepts(&s));
}

/// A snapshot that got ahead of the durable log (written on its own, a
/// power loss before the accepts of its batch were synced) trims the log
/// to it: the core then recovers; without it, the core's invariant fails.
#[test]
fn a_snapshot_ahead_of_the_log_trims_the_log_to_it() {
    let snap = |le: u64| {
        Arc::new(Snapshot {
            last_executed: Slot(le),
            ..Default::default()
        })
    };
    let mut s = DurableState::default();
    s.apply(Record::Ballot(Ballot(3)));
    for slot in 1..=6 {
        s.apply(accept(slot, 3));
    }
    s.apply(Record::Snapshot {
        trimmed: Slot(5),
        snapshot: snap(8),
    });
    assert!(!core_accepts(&s));
    assert_eq!(settle(&mut s), Some((Slot(5), Slot(8))));
    assert_eq!(s.trimmed, Slot(8));
    assert!(s.accepted.is_empty());
    assert_eq!(s.ballot, Ballot(3), "the promise is kept");
    assert!(check_state(&s, "snap").is_ok());
    assert!(core_accepts(&s));
    // Nothing to do when the log reaches the snapshot, or has none.
    assert_eq!(settle(&mut s), None);
    let mut t = DurableState::default();
    t.apply(Record::Snapshot {
        trimmed: Slot(5),
        snapshot: snap(8),
    });
    t.apply(accept(8, 1));
    t.apply(accept(9, 1));
    assert_eq!(settle(&mut t), None);
    assert_eq!(t.accepted.len(), 2);
    assert_eq!(settle(&mut DurableState::default()), None);
}

#[test]
fn a_bad_read_that_reads_back_well_is_no_damage() {
    let good = encoded(2, &[Record::Ballot(Ballot(1)), accept(1, 1), accept(2, 1)]);
    let mut bad = good.clone();
    bad[HEADER + 2] ^= 0xff;
    // The first read is bad, the next two agree.
    let mut reads = vec![good.clone(), good.clone(), bad.clone()];
    let got = read_stable(|| Ok(reads.pop().unwrap())).unwrap();
    assert_eq!(got, Reads::Stable(good.clone()));
    assert_eq!(scan_segment(&good, 2, "s", 0).unwrap().records.len(), 3);
    // The second read is bad: the third decides.
    let mut reads = vec![good.clone(), bad.clone(), good.clone()];
    assert_eq!(
        read_stable(|| Ok(reads.pop().unwrap())).unwrap(),
        Reads::Stable(good.clone())
    );
    // Three different contents: not judged at all.
    let mut worse = good.clone();
    worse[HEADER + 3] ^= 0xff;
    let mut reads = vec![worse, good.clone(), bad];
    assert_eq!(
        read_stable(|| Ok(reads.pop().unwrap())).unwrap(),
        Reads::Unstable
    );
}

#[test]
fn judging_arbitrary_bytes_never_panics() {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let whole = encoded(4, &[Record::Ballot(Ballot(1)), accept(1, 1), accept(2, 1)]);
    for i in 0..2000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let mut bytes = whole.clone();
        bytes.truncate((x % (whole.len() as u64 + 1)) as usize);
        if let Some(b) = bytes.get_mut((x >> 20) as usize % whole.len()) {
            *b ^= (x >> 40) as u8;
        }
        let _ = scan_segment(&bytes, 4, "s", 0);
        let _ = scan_snapshot(&bytes, "s");
        let _ = i;
    }
}

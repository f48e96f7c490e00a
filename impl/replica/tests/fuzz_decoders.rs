//! Fuzz targets for every decoder of untrusted bytes: the peer handshake,
//! peer frames, client frames and requests, the text protocol, write-ahead
//! log segments and records, `snapshot.bin`, the log's sync marks, and a
//! log directory as a whole.
//! See `fuzz/mod.rs` for the harness and how to run it longer.

// Test code: unwrap, expect and panic are how a test fails (the
// workspace lints deny them in the code under test).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod fuzz;

use fuzz::corpus::{self, bincode, wal_record};
use fuzz::fuzz;
use stutter_core::{DurableState, Message, Record};
use stutter_replica::peer_auth::{self, Challenge, ClusterKey, Hello, CHALLENGE_LEN, HELLO_LEN};
use stutter_replica::wire::{self, ClientRequest, ClientResponse};
use stutter_replica::{text, wal};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// The log's replay: decoded records applied as `Wal::open` applies them.
fn replay(records: Vec<Record>) {
    let mut s = DurableState::default();
    for r in records {
        s.apply(r);
    }
}

/// The harness has teeth: a decoder that allocated whatever a length
/// prefix says would be hit within a thousand mutants of one valid frame.
#[test]
fn the_mutations_reach_a_planted_length_bug() {
    let frame = corpus::client_stream(&corpus::requests()[..1]);
    let found = fuzz::mutants_reaching(&[frame], 1000, |input| {
        input
            .get(..4)
            .is_some_and(|l| u32::from_be_bytes([l[0], l[1], l[2], l[3]]) >= 1 << 24)
    });
    assert!(found > 0, "no mutant set a large length");
}

#[test]
fn peer_handshake() {
    let rt = rt();
    let key = ClusterKey::new(Some(b"fuzzing cluster secret"));
    let mut corpus = vec![corpus::dialer_bytes()];
    corpus.push(
        Challenge {
            nonce: [3; 32],
            tag: [4; 32],
        }
        .encode()
        .to_vec(),
    );
    fuzz("peer_handshake", &corpus, 3000, |input| {
        // The acceptor reading a dialer's bytes, and a dialer reading an
        // acceptor's: neither may panic, and no input authenticates.
        let stream = tokio::io::join(input, tokio::io::sink());
        let accepted = rt.block_on(async {
            let mut s = stream;
            peer_auth::accept(&mut s, &key, 0, 3).await
        });
        assert!(
            accepted.is_err(),
            "an input without the secret was accepted"
        );
        let dialed = rt.block_on(async {
            let mut s = tokio::io::join(input, tokio::io::sink());
            peer_auth::dial(&mut s, &key, 1, 0).await
        });
        assert!(
            dialed.is_err(),
            "an input without the secret was taken for the acceptor"
        );
        if let Ok(h) = <&[u8; HELLO_LEN]>::try_from(input.get(..HELLO_LEN).unwrap_or(&[])) {
            let _ = Hello::decode(h);
        }
        if let Ok(c) = <&[u8; CHALLENGE_LEN]>::try_from(input.get(..CHALLENGE_LEN).unwrap_or(&[])) {
            let _ = Challenge::decode(c);
        }
    });
}

/// Sealed frame streams, mutated as raw bytes: framing, lengths and tags.
#[test]
fn peer_frames() {
    let rt = rt();
    let msgs = corpus::messages();
    let corpus: Vec<Vec<u8>> = msgs.chunks(3).map(corpus::sealed_stream).collect();
    let (_, opener) = corpus::session();
    fuzz("peer_frames", &corpus, 3000, |input| {
        let mut o = opener.clone();
        rt.block_on(async {
            let mut r = input;
            let mut buf = Vec::new();
            while let Ok(Some(_)) = peer_auth::read_sealed(&mut r, &mut o, 1 << 20, &mut buf).await
            {
            }
        });
    });
}

/// Message bodies, mutated and then sealed properly: what the decoder sees
/// from a peer that passed the handshake.
#[test]
fn peer_messages() {
    let rt = rt();
    let corpus: Vec<Vec<u8>> = corpus::messages().iter().map(bincode).collect();
    let (sealer, opener) = corpus::session();
    fuzz("peer_messages", &corpus, 5000, |input| {
        let (mut s, mut o) = (sealer.clone(), opener.clone());
        let mut frame = Vec::new();
        s.seal_body(input, 1 << 20, &mut frame).expect("seal");
        rt.block_on(async {
            let mut r = &frame[..];
            let mut buf = Vec::new();
            let _ = peer_auth::read_sealed(&mut r, &mut o, 1 << 20, &mut buf).await;
        });
        let _ = wire::decode::<Message>(input);
    });
}

/// Client frame streams: lengths, truncations, garbage between frames.
#[test]
fn client_frames() {
    let rt = rt();
    let reqs = corpus::requests();
    let corpus: Vec<Vec<u8>> = reqs.chunks(2).map(corpus::client_stream).collect();
    fuzz("client_frames", &corpus, 5000, |input| {
        rt.block_on(async {
            let mut r = input;
            while let Ok(Some(body)) = wire::read_frame(&mut r, wire::MAX_CLIENT_FRAME).await {
                let _ = wire::decode::<ClientRequest>(&body);
            }
        });
    });
}

/// Request bodies as the replica decodes them, and reply bodies as the
/// client library and bench decode them.
#[test]
fn client_messages() {
    let mut corpus: Vec<Vec<u8>> = corpus::requests().iter().map(bincode).collect();
    corpus.extend(corpus::responses().iter().map(bincode));
    fuzz("client_messages", &corpus, 10000, |input| {
        let _ = wire::decode::<ClientRequest>(input);
        let _ = wire::decode::<ClientResponse>(input);
    });
}

#[test]
fn text_protocol() {
    let rt = rt();
    let corpus: Vec<Vec<u8>> = [
        &b"get k\n"[..],
        b"put key-1 value-1\r\ndel key-1\n",
        b"cas k - v\ncas k v w\nstatus\n",
        b"get \xff\xfe\n\n\nput a b c\n",
        b"frobnicate\nget k",
    ]
    .iter()
    .map(|b| b.to_vec())
    .collect();
    fuzz("text_protocol", &corpus, 5000, |input| {
        rt.block_on(async {
            let mut r = tokio::io::BufReader::new(input);
            let mut line = Vec::new();
            while let Ok(text::Line::Request) = text::read_line(&mut r, 64, &mut line).await {
                let _ = text::parse(&line);
            }
        });
    });
}

/// Whole segments mutated as raw bytes (mostly caught by the CRC).
#[test]
fn wal_segments() {
    let seg: Vec<u8> = corpus::records()
        .iter()
        .flat_map(|r| wal_record(5, &bincode(r)))
        .collect();
    let two: Vec<u8> = corpus::records()[..2]
        .iter()
        .flat_map(|r| wal_record(5, &bincode(r)))
        .collect();
    fuzz("wal_segments", &[seg, two], 5000, |input| {
        let (records, valid) = wal::decode_segment(input, 5);
        assert!(valid <= input.len());
        // Recovery's judgement agrees with the decoder where it accepts.
        if let Ok(scan) = wal::scan_segment(input, 5, "fuzz", 0) {
            assert_eq!((&scan.records, scan.valid), (&records, valid));
        }
        replay(records);
    });
}

/// Record bodies mutated and then framed with a correct length and CRC:
/// what replay sees from a log a buggy or older writer left.
#[test]
fn wal_records() {
    let corpus: Vec<Vec<u8>> = corpus::records().iter().map(bincode).collect();
    let next = wal_record(5, &bincode(&corpus::records()[1]));
    fuzz("wal_records", &corpus, 5000, |input| {
        let mut seg = wal_record(5, input);
        seg.extend_from_slice(&next);
        let (records, _) = wal::decode_segment(&seg, 5);
        replay(records);
    });
}

/// `snapshot.bin`: raw mutations, and mutated bodies with a correct CRC.
#[test]
fn snapshot_file() {
    let snap = bincode(&corpus::records()[3]);
    let corpus = vec![wal_record(0, &snap), snap];
    fuzz("snapshot_file", &corpus, 3000, |input| {
        for bytes in [input.to_vec(), wal_record(0, input)] {
            if let Some(rec) = wal::decode_snapshot_file(&bytes) {
                assert!(matches!(rec, Record::Snapshot { .. }));
                replay(vec![rec]);
            }
            if let Ok(rec) = wal::scan_snapshot(&bytes, "fuzz") {
                let mut s = DurableState::default();
                s.apply(rec);
                let _ = wal::check_state(&s, "fuzz");
            }
        }
    });
}

/// A data directory as `Wal::open` finds it: a mutated segment and
/// snapshot. Slower (files, threads): fewer inputs.
#[test]
fn wal_directory() {
    let seg: Vec<u8> = corpus::records()[..3]
        .iter()
        .flat_map(|r| wal_record(1, &bincode(r)))
        .collect();
    let snap = wal_record(0, &bincode(&corpus::records()[3]));
    let mut both = seg.clone();
    both.extend_from_slice(&snap);
    fuzz("wal_directory", &[both], 150, |input| {
        let dir = tempfile::tempdir().expect("tempdir");
        let split = input.len().min(seg.len());
        std::fs::write(dir.path().join("wal-0000000000000001.log"), &input[..split])
            .expect("write");
        std::fs::write(dir.path().join("snapshot.bin"), &input[split..]).expect("write");
        // Opening may fail only with an I/O error, never panic; what it
        // accepts, the core recovers from without breaking an invariant.
        if let Ok((_, durable)) = wal::Wal::open(dir.path(), false) {
            let rng = Box::new(
                <rand_xoshiro::Xoshiro256PlusPlus as rand_core::SeedableRng>::seed_from_u64(1),
            );
            let r =
                stutter_core::Replica::recover(0, stutter_core::Config::default(), durable, rng);
            if let Err(e) = r.check_invariants() {
                panic!("a state Wal::open accepted breaks the core's invariants: {e}");
            }
        }
    });
}

/// `synced.marks` beside a valid segment: whatever the marks file holds,
/// opening never panics, and what it recovers is a prefix of the segment's
/// records (marks can only make recovery refuse, never invent).
#[test]
fn sync_marks() {
    let recs = &corpus::records()[..3];
    let seg: Vec<u8> = recs
        .iter()
        .flat_map(|r| wal_record(1, &bincode(r)))
        .collect();
    let mut file = wal::encode_marks(4, &[(1, seg.len() as u64)]);
    file.extend(wal::encode_marks(3, &[(1, 10), (7, 99)]));
    fuzz("sync_marks", &[file], 300, |input| {
        let (_, marks) = wal::decode_marks(input);
        assert!(marks.len() <= 255);
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("wal-0000000000000001.log"), &seg).expect("write");
        std::fs::write(dir.path().join("synced.marks"), input).expect("write");
        match wal::Wal::open(dir.path(), false) {
            Ok((_, durable)) => {
                let mut all = DurableState::default();
                for r in recs {
                    all.apply(r.clone());
                }
                assert_eq!(durable, all, "a valid segment lost records to its marks");
            }
            // A mark past the segment's end calls its end damage.
            Err(e) => assert!(wal::Damaged::find(&e).is_some(), "not a damage error: {e}"),
        }
    });
}

//! Replays every transcript in `impl/core/testdata/*.txt` (see
//! `tests/transcript/mod.rs` for the commands). `STUTTER_REWRITE=1`
//! rewrites the expected outputs from what the core prints now.

// Test code: unwrap, expect and panic are how a test fails (the
// workspace lints deny them in the code under test).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod transcript;

use std::path::PathBuf;

#[test]
fn transcripts() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata");
    let rewrite = std::env::var_os("STUTTER_REWRITE").is_some_and(|v| v == "1");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no transcripts in {}", dir.display());
    let diffs: Vec<String> = files
        .iter()
        .flat_map(|f| transcript::run_file(f, rewrite))
        .collect();
    assert!(
        diffs.is_empty(),
        "{} case(s) differ (STUTTER_REWRITE=1 rewrites the files; review the diff):\n\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

/// The harness can fail: a transcript whose expected output differs from
/// what the core prints is reported, and a message printed by it reads
/// back as the same message.
#[test]
fn a_changed_output_is_reported_and_printed_messages_read_back() {
    use std::sync::Arc;
    use stutter_core::*;

    let dir = std::env::temp_dir().join(format!("stutter-transcript-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("t.txt");
    std::fs::write(
        &file,
        "cluster n=1\n----\n0: start at 0\n  timer election at 999\n",
    )
    .unwrap();
    let diffs = transcript::run_file(&file, false);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(diffs.len(), 1, "{diffs:?}");
    assert!(diffs[0].contains("timer election at 999"), "{}", diffs[0]);

    let batch = Value::Batch(Arc::new(vec![
        common::put(7, 1, "k", "v"),
        Request {
            client: REGISTERED_BASE + 8,
            seq: 2,
            op: Op::Cas {
                key: "k".into(),
                from: None,
                to: "w".into(),
            },
        },
        Request::register(5),
        common::get(9, 3, "k"),
    ]));
    let entry = Instance {
        slot: Slot(4),
        ballot: Ballot(257),
        value: batch.clone(),
        state: InstanceState::Committed,
    };
    let messages = vec![
        Message::Prepare {
            ballot: Ballot(257),
            last_executed: Slot(3),
        },
        Message::Promise {
            ballot: Ballot(257),
            ok: true,
            last_executed: Slot(3),
            entries: vec![entry.clone()],
            snapshot: None,
        },
        Message::Accept {
            ballot: Ballot(257),
            slot: Slot(4),
            value: batch,
            committed: None,
        },
        Message::Accept {
            ballot: Ballot(257),
            slot: Slot(5),
            value: Value::Noop,
            committed: Some(Slot(3)),
        },
        Message::Accepted {
            ballot: Ballot(257),
            slot: Slot(4),
            ok: false,
        },
        Message::Heartbeat {
            ballot: Ballot(257),
            last_executed: Slot(3),
            global_last_executed: Slot(2),
        },
        Message::HeartbeatReply {
            ballot: Ballot(257),
            ok: true,
            last_executed: Slot(3),
            leader_last_executed: Slot(4),
        },
        Message::CatchUp {
            ballot: Ballot(257),
            entries: vec![entry.clone()],
        },
        Message::TimeoutNow {
            ballot: Ballot(257),
            promised: None,
            entries: vec![],
        },
        Message::TimeoutNow {
            ballot: Ballot(257),
            promised: Some(Ballot(514)),
            entries: vec![entry],
        },
        Message::ReadProbe {
            ballot: Ballot(257),
            id: 6,
        },
        Message::ReadProbeAck {
            ballot: Ballot(257),
            id: 6,
        },
        Message::PreVote {
            ballot: Ballot(513),
        },
        Message::PreVoteReply {
            ballot: Ballot(513),
            ok: true,
        },
        Message::PreVoteReply {
            ballot: Ballot(257),
            ok: false,
        },
    ];
    for m in messages {
        let text = transcript::syntax::message(&m);
        assert_eq!(
            transcript::syntax::Parser::new(&text).message(),
            Ok(m.clone()),
            "{text}"
        );
        // As transcripts print it: registered ids written rK.
        let named = transcript::syntax::name_registered(&text);
        assert_eq!(
            transcript::syntax::Parser::new(&named).message(),
            Ok(m),
            "{named}"
        );
    }
    assert_eq!(
        transcript::syntax::name_registered("(9223372036854775816, 2) 9223372036854775807 257"),
        "(r8, 2) 9223372036854775807 257"
    );
}

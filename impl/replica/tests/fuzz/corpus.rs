//! Valid encodings to mutate: one of every message, request, response and
//! record kind, in the framings the decoders read.

use std::collections::BTreeMap;
use std::sync::Arc;

use stutter_core::{
    Ballot, Instance, InstanceState, Message, Op, Record, Reply, Request, Role, Session,
    SessionTable, Slot, Snapshot, Value,
};
use stutter_replica::peer_auth::{ClusterKey, FrameOpener, FrameSealer, Hello, NONCE_LEN};
use stutter_replica::wire::{self, ClientRequest, ClientResponse, GcStatus, StatusInfo};

fn req(client: u64, seq: u64, op: Op) -> Request {
    Request { client, seq, op }
}

pub fn ops() -> Vec<Op> {
    vec![
        Op::Get { key: "k".into() },
        Op::Put {
            key: "key-1".into(),
            value: "value-1".into(),
        },
        Op::Del { key: "k".into() },
        Op::Cas {
            key: "k".into(),
            from: None,
            to: "v".into(),
        },
        Op::Cas {
            key: "k".into(),
            from: Some("a".into()),
            to: "b".into(),
        },
    ]
}

fn batch() -> Value {
    let mut reqs: Vec<_> = ops()
        .into_iter()
        .enumerate()
        .map(|(i, op)| req(stutter_core::REGISTERED_BASE + 7, i as u64 + 1, op))
        .collect();
    reqs.push(req(8, 0, Op::Register));
    Value::Batch(Arc::new(reqs))
}

pub fn snapshot() -> Snapshot {
    let mut kv = BTreeMap::new();
    kv.insert("a".into(), "1".into());
    kv.insert("bb".into(), "22".into());
    // A bounded table that has evicted: its counter and the sessions of
    // the clients it still holds are decoded (and validated) too.
    let limit = 2;
    let mut sessions = SessionTable::default();
    for slot in [5, 6, 8, 10] {
        sessions.register(Slot(slot), limit);
    }
    let live: Vec<u64> = sessions.iter().map(|(c, _)| *c).collect();
    sessions.record(
        live[0],
        Session {
            seq: 3,
            reply: Reply::Done,
            slot: Slot(39),
        },
        limit,
    );
    sessions.record(
        live[1],
        Session {
            seq: 1,
            reply: Reply::Value(Some("x".into())),
            slot: Slot(40),
        },
        limit,
    );
    Snapshot {
        last_executed: Slot(40),
        kv,
        sessions,
        digest: 0xdead_beef,
    }
}

pub fn messages() -> Vec<Message> {
    let inst = |slot: u64, state| Instance {
        slot: Slot(slot),
        ballot: Ballot(257),
        value: batch(),
        state,
    };
    vec![
        Message::Prepare {
            ballot: Ballot(258),
            last_executed: Slot(4),
        },
        Message::Promise {
            ballot: Ballot(258),
            ok: true,
            last_executed: Slot(4),
            entries: vec![
                inst(5, InstanceState::InProgress),
                inst(6, InstanceState::Committed),
            ],
            snapshot: Some(Arc::new(snapshot())),
        },
        Message::Promise {
            ballot: Ballot(513),
            ok: false,
            last_executed: Slot(0),
            entries: vec![],
            snapshot: None,
        },
        Message::Accept {
            ballot: Ballot(258),
            slot: Slot(7),
            value: batch(),
            committed: None,
        },
        Message::Accept {
            ballot: Ballot(258),
            slot: Slot(8),
            value: Value::Noop,
            committed: Some(Slot(6)),
        },
        Message::Accepted {
            ballot: Ballot(258),
            slot: Slot(7),
            ok: true,
        },
        Message::Heartbeat {
            ballot: Ballot(258),
            last_executed: Slot(7),
            global_last_executed: Slot(5),
        },
        Message::HeartbeatReply {
            ballot: Ballot(258),
            ok: true,
            last_executed: Slot(7),
            leader_last_executed: Slot(7),
        },
        Message::CatchUp {
            ballot: Ballot(258),
            entries: vec![inst(3, InstanceState::Executed)],
        },
        Message::InstallSnapshot {
            ballot: Ballot(258),
            snapshot: Arc::new(snapshot()),
        },
        Message::ReadProbe {
            ballot: Ballot(258),
            id: 11,
        },
        Message::ReadProbeAck {
            ballot: Ballot(258),
            id: 11,
        },
    ]
}

pub fn requests() -> Vec<ClientRequest> {
    let mut v: Vec<ClientRequest> = ops()
        .into_iter()
        .enumerate()
        .map(|(i, op)| ClientRequest::Op {
            client: 42,
            seq: i as u64 + 1,
            op,
        })
        .collect();
    v.push(ClientRequest::Op {
        client: 43,
        seq: 0,
        op: Op::Register,
    });
    v.push(ClientRequest::Status);
    v.push(ClientRequest::Digest);
    v
}

pub fn responses() -> Vec<ClientResponse> {
    let status = StatusInfo {
        id: 1,
        role: Role::Leader,
        ballot: Ballot(257),
        leader: Some(1),
        last_executed: Slot(9),
        global_last_executed: Slot(8),
        last_index: Slot(10),
        digest: 77,
        gc: None,
        sessions: 2,
        applied_updates: 30,
        storage_alarm: None,
    };
    let full = StatusInfo {
        storage_alarm: Some("write-ahead log: No space left on device (os error 28)".into()),
        ..status.clone()
    };
    let collecting = StatusInfo {
        gc: Some(GcStatus {
            model: "go".into(),
            cores: 1.0,
            cycles: 12,
            pauses: 24,
            pause_ms: 1.5,
            max_pause_ms: 0.06,
            cpu_share: 0.31,
            assist_ms: 20.0,
            background_ms: 300.0,
            idle_ms: 100.0,
            burnt_ms: 310.0,
            stopped_ms: 2.1,
            heap_mib: 40.0,
            live_mib: 30.5,
            allocated_mib: 900.0,
        }),
        ..status.clone()
    };
    vec![
        ClientResponse::Status(full),
        ClientResponse::Reply {
            client: 1,
            seq: 4,
            reply: Reply::StorageFull,
        },
        ClientResponse::Reply {
            client: 1,
            seq: 2,
            reply: Reply::Value(Some("v".into())),
        },
        ClientResponse::Reply {
            client: 1,
            seq: 2,
            reply: Reply::Cas {
                ok: false,
                current: Some("c".into()),
            },
        },
        ClientResponse::Reply {
            client: 1,
            seq: 2,
            reply: Reply::Redirect { leader: Some(2) },
        },
        ClientResponse::Reply {
            client: 1,
            seq: 2,
            reply: Reply::SessionExpired,
        },
        ClientResponse::Reply {
            client: 43,
            seq: 0,
            reply: Reply::Registered { client: 1 << 63 },
        },
        ClientResponse::Reply {
            client: 1,
            seq: 2,
            reply: Reply::UnknownClient,
        },
        ClientResponse::Reply {
            client: 1,
            seq: 0,
            reply: Reply::Malformed,
        },
        ClientResponse::Redirect {
            client: 1,
            seq: 2,
            leader: Some(0),
            addr: Some("127.0.0.1:7201".into()),
        },
        ClientResponse::Status(status),
        ClientResponse::Status(collecting),
        ClientResponse::Digest {
            last_executed: Slot(9),
            digest: 5,
        },
        ClientResponse::Error("malformed request".into()),
        ClientResponse::Unknown { client: 1, seq: 2 },
    ]
}

pub fn records() -> Vec<Record> {
    vec![
        Record::Ballot(Ballot(258)),
        Record::Accept {
            slot: Slot(41),
            ballot: Ballot(258),
            value: batch(),
        },
        Record::Accept {
            slot: Slot(42),
            ballot: Ballot(258),
            value: Value::Noop,
        },
        Record::Snapshot {
            trimmed: Slot(40),
            snapshot: Arc::new(snapshot()),
        },
    ]
}

pub fn bincode<T: serde::Serialize>(v: &T) -> Vec<u8> {
    bincode::serialize(v).expect("encodes")
}

/// The CRC a write-ahead-log record carries in segment `seq` (0:
/// `snapshot.bin`): over the segment number and the body.
pub fn wal_crc(seq: u64, body: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    if seq > 0 {
        h.update(&seq.to_le_bytes());
    }
    h.update(body);
    h.finalize()
}

/// `[len u32 LE][crc u32 LE][body]`, as the log writes a record.
pub fn wal_record(seq: u64, body: &[u8]) -> Vec<u8> {
    let mut out = (body.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(&wal_crc(seq, body).to_le_bytes());
    out.extend_from_slice(body);
    out
}

/// The session both ends of a fixed handshake compute.
pub fn session() -> (FrameSealer, FrameOpener) {
    ClusterKey::new(Some(b"fuzzing cluster secret")).session_of(
        1,
        0,
        [1; NONCE_LEN],
        [2; NONCE_LEN],
    )
}

/// A stream of sealed frames carrying `msgs`.
pub fn sealed_stream(msgs: &[Message]) -> Vec<u8> {
    let (mut s, _) = session();
    let mut out = Vec::new();
    for m in msgs {
        s.seal_message(m, 1 << 20, &mut out).expect("seals");
    }
    out
}

/// What a dialer sends the acceptor: its hello and a (wrong) response.
pub fn dialer_bytes() -> Vec<u8> {
    let mut b = Hello {
        from: 1,
        to: 0,
        nonce: [9; NONCE_LEN],
    }
    .encode()
    .to_vec();
    b.extend_from_slice(&[0x5a; 32]);
    b
}

/// Client frames, as `wire::encode` writes them.
pub fn client_stream(reqs: &[ClientRequest]) -> Vec<u8> {
    reqs.iter()
        .flat_map(|r| wire::encode(r).expect("encodes"))
        .collect()
}

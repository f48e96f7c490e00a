//! The control socket: a Unix socket beside the mount through which the
//! `faultfs` command (or any program: one request line, one JSON reply
//! line) drops unsynced data, switches failures on and off, reads the
//! status and unmounts.
//!
//! Requests: `status`, `drop`, `drop torn SEED`, `cut`, `cut torn SEED`,
//! `fail enospc|eio [N]` (N: only the next N operations fail), `fail off`.
//! `cut` is a power cut of a disk still in use: the drop and, in the same
//! step, EIO for every operation that changes the file system (a sync
//! under way included) until `fail off` restores power. Replies:
//! `{"ok":true,...}` or `{"ok":false,"error":"..."}`.

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::store::{Fail, FailMode, Store};

/// The control socket of the mount at `mountpoint` unless one is named:
/// `/run/faultfs/<hash of the absolute mount path>.sock` (a Unix socket
/// path is limited to 108 bytes; the mount path may be longer).
pub fn default_socket(mountpoint: &Path) -> io::Result<PathBuf> {
    let abs = std::path::absolute(mountpoint)?;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325; // FNV-1a
    for b in abs.as_os_str().as_encoded_bytes() {
        h = (h ^ *b as u64).wrapping_mul(0x100_0000_01b3);
    }
    Ok(PathBuf::from(format!("/run/faultfs/{h:016x}.sock")))
}

/// What the server does for one request line.
pub fn execute(store: &Mutex<Store>, line: &str) -> Value {
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut s = store.lock().unwrap_or_else(|p| p.into_inner());
    let r: Result<Value, String> = match words.as_slice() {
        ["status"] => Ok(json!({ "status": s.status() })),
        ["drop"] => s
            .drop_unsynced(None)
            .map(|r| json!({ "dropped": r }))
            .map_err(|e| e.to_string()),
        ["drop", "torn", seed] => match seed.parse::<u64>() {
            Ok(seed) => s
                .drop_unsynced(Some(seed))
                .map(|r| json!({ "dropped": r }))
                .map_err(|e| e.to_string()),
            Err(_) => Err(format!("bad seed {seed:?}")),
        },
        ["cut"] => cut(&mut s, None),
        ["cut", "torn", seed] => match seed.parse::<u64>() {
            Ok(seed) => cut(&mut s, Some(seed)),
            Err(_) => Err(format!("bad seed {seed:?}")),
        },
        ["fail", "off"] => {
            s.set_fail(None);
            Ok(json!({}))
        }
        ["fail", mode, rest @ ..] => {
            let mode = match *mode {
                "enospc" => Some(FailMode::Enospc),
                "eio" => Some(FailMode::Eio),
                _ => None,
            };
            let remaining = match rest {
                [] => Ok(None),
                [n] => n
                    .parse::<u64>()
                    .map(Some)
                    .map_err(|_| format!("bad count {n:?}")),
                _ => Err("usage: fail enospc|eio [N] | fail off".to_string()),
            };
            match (mode, remaining) {
                (Some(mode), Ok(remaining)) => {
                    s.set_fail(Some(Fail { mode, remaining }));
                    Ok(json!({}))
                }
                (None, _) => Err("usage: fail enospc|eio [N] | fail off".to_string()),
                (_, Err(e)) => Err(e),
            }
        }
        _ => Err(format!("unknown request {line:?}")),
    };
    match r {
        Ok(mut v) => {
            v["ok"] = json!(true);
            v
        }
        Err(e) => json!({ "ok": false, "error": e }),
    }
}

/// A power cut while the program may still run: what it had not synced is
/// lost and, in the same locked step, the disk stops answering (EIO), so
/// that nothing it writes or syncs between the cut and its death (a
/// nemesis's `kill -9` comes after) survives or is reported durable. A
/// sync waiting out its latency when the cut falls fails too.
fn cut(s: &mut Store, torn: Option<u64>) -> Result<Value, String> {
    let r = s.drop_unsynced(torn).map_err(|e| e.to_string())?;
    s.set_fail(Some(Fail {
        mode: FailMode::Eio,
        remaining: None,
    }));
    Ok(json!({ "dropped": r }))
}

/// Serves the control socket on a thread of its own.
pub fn spawn_server(listener: UnixListener, store: Arc<Mutex<Store>>) {
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let _ = serve_one(conn, &store);
        }
    });
}

fn serve_one(conn: UnixStream, store: &Mutex<Store>) -> io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut w = conn.try_clone()?;
    for line in BufReader::new(conn).lines() {
        let reply = execute(store, &line?);
        writeln!(w, "{reply}")?;
    }
    Ok(())
}

/// Sends one request and returns the reply.
pub fn request(socket: &Path, line: &str) -> io::Result<Value> {
    let mut c = UnixStream::connect(socket)?;
    c.set_read_timeout(Some(Duration::from_secs(60)))?;
    writeln!(c, "{line}")?;
    c.shutdown(std::net::Shutdown::Write)?;
    let mut reply = String::new();
    BufReader::new(c).read_line(&mut reply)?;
    serde_json::from_str(&reply).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

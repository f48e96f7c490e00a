//! `faultfs`: mount a directory through a file system that loses unsynced
//! data on command, and command it. Made for nemeses: every command but
//! `serve` returns when done, prints one JSON line and exits 0 on success.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use stutter_faultfs::control;

/// A FUSE file system for power-loss and full-disk tests.
///
/// Writes are kept in memory until the program syncs them: fsync or
/// fdatasync of a file makes its bytes and size durable, fsync of a
/// directory its entries (creations, renames, removals). `drop` is a power
/// cut: everything not synced is lost, as if the machine had restarted.
/// `fail` makes writes, syncs, creations and renames fail with ENOSPC or
/// EIO (removals still work under ENOSPC), for the next N operations or
/// until `fail off`.
///
/// The durable state lives in BACKING (`data/<inode>` and
/// `manifest.json`, written with fsync), so it outlives the faultfs
/// process. Typical use by a nemesis: `faultfs mount store dir`, run the
/// program on `dir`, `faultfs cut dir` (the drop, and EIO from then on),
/// `kill -9` it, `faultfs fail dir off`, restart it. `drop` after the kill
/// instead leaves a window: a sync the kill waits for completes first.
///
/// Needs /dev/fuse and fusermount3 (Debian package fuse3), and root (or
/// user_allow_other in /etc/fuse.conf).
#[derive(Parser)]
#[command(name = "faultfs")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Mounts BACKING at MOUNTPOINT in a background process; returns once
    /// the mount answers. The mountpoint must be an empty directory.
    Mount {
        backing: PathBuf,
        mountpoint: PathBuf,
        /// Control socket (default: /run/faultfs/<hash of MOUNTPOINT>.sock).
        #[arg(long)]
        socket: Option<PathBuf>,
        /// Where the background process writes its errors.
        #[arg(long, default_value = "/dev/null")]
        log: PathBuf,
        /// Milliseconds each fsync takes before it makes anything durable;
        /// a power cut during that time loses what was being synced.
        #[arg(long, default_value_t = 0)]
        sync_latency_ms: u64,
    },
    /// Mounts BACKING at MOUNTPOINT and serves it in the foreground until
    /// it is unmounted.
    Serve {
        backing: PathBuf,
        mountpoint: PathBuf,
        #[arg(long)]
        socket: Option<PathBuf>,
        /// As for `mount`.
        #[arg(long, default_value_t = 0)]
        sync_latency_ms: u64,
    },
    /// Power cut: drops every write, creation, rename and removal not yet
    /// synced. Kill the programs using the mount first: their open files
    /// may no longer exist.
    Drop {
        mountpoint: PathBuf,
        /// Also tear the last write if not synced: its file keeps its
        /// earlier unsynced writes and a prefix of the last one, cut at a
        /// byte chosen by SEED.
        #[arg(long, value_name = "SEED")]
        torn: Option<u64>,
        #[arg(long)]
        socket: Option<PathBuf>,
    },
    /// Power cut of a disk still in use: `drop`, and in the same step
    /// every operation that changes the mount fails with EIO (a sync
    /// under way included) until `faultfs fail MOUNT off`. Kill the
    /// programs using the mount after it, restore power before they
    /// restart: nothing they do between the cut and their death survives.
    Cut {
        mountpoint: PathBuf,
        /// As for `drop`.
        #[arg(long, value_name = "SEED")]
        torn: Option<u64>,
        /// Waits until this wall-clock time (milliseconds since the Unix
        /// epoch) before cutting: a cut of several hosts asked over SSH,
        /// one command each, then falls at one instant on every host whose
        /// clock agrees, not wherever each command happens to arrive.
        #[arg(long, value_name = "UNIX_MS")]
        at: Option<u64>,
        #[arg(long)]
        socket: Option<PathBuf>,
    },
    /// Makes writes and syncs fail with MODE (enospc, eio), or stops it
    /// (off).
    Fail {
        mountpoint: PathBuf,
        /// enospc | eio | off
        mode: String,
        /// Only the next N operations that would change the disk fail
        /// (an error a retry clears); default: until `fail off`.
        #[arg(long)]
        ops: Option<u64>,
        #[arg(long)]
        socket: Option<PathBuf>,
    },
    /// Files, unsynced bytes, directories with unsynced entries, the
    /// failure switched on, drops so far, failed operations.
    Status {
        mountpoint: PathBuf,
        #[arg(long)]
        socket: Option<PathBuf>,
    },
    /// Unmounts (lazily if busy) and waits for the background process.
    Unmount {
        mountpoint: PathBuf,
        #[arg(long)]
        socket: Option<PathBuf>,
    },
}

fn socket_for(mountpoint: &Path, socket: Option<PathBuf>) -> std::io::Result<PathBuf> {
    match socket {
        Some(s) => Ok(s),
        None => control::default_socket(mountpoint),
    }
}

/// Sleeps until the wall clock reads `at` (ms since the Unix epoch); at
/// once if that time has passed. More than a minute ahead is refused: the
/// clocks of the host that chose the time and of this one disagree.
fn sleep_until_unix_ms(at: u64) -> Result<(), String> {
    let target = std::time::UNIX_EPOCH + std::time::Duration::from_millis(at);
    if let Ok(wait) = target.duration_since(std::time::SystemTime::now()) {
        if wait > std::time::Duration::from_secs(60) {
            return Err(format!(
                "--at {at} is {} s away (more than a minute): do the clocks agree?",
                wait.as_secs()
            ));
        }
        std::thread::sleep(wait);
    }
    Ok(())
}

fn ask(socket: &Path, line: &str) -> Result<(), String> {
    let v = control::request(socket, line).map_err(|e| format!("{}: {e}", socket.display()))?;
    println!("{v}");
    if v["ok"] == true {
        Ok(())
    } else {
        Err(v["error"].as_str().unwrap_or("failed").to_string())
    }
}

fn mounted(mountpoint: &Path) -> bool {
    let Ok(abs) = std::fs::canonicalize(mountpoint) else {
        return false;
    };
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let abs = abs.to_string_lossy();
    mounts
        .lines()
        .any(|l| l.split(' ').nth(1) == Some(&*abs) && l.starts_with("faultfs "))
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.cmd {
        Cmd::Serve {
            backing,
            mountpoint,
            socket,
            sync_latency_ms,
        } => {
            let socket = socket_for(&mountpoint, socket).map_err(|e| e.to_string())?;
            let latency = Duration::from_millis(sync_latency_ms);
            stutter_faultfs::serve(&backing, &mountpoint, &socket, latency)
                .map_err(|e| format!("faultfs on {}: {e}", mountpoint.display()))
        }
        Cmd::Mount {
            backing,
            mountpoint,
            socket,
            log,
            sync_latency_ms,
        } => {
            let socket = socket_for(&mountpoint, socket).map_err(|e| e.to_string())?;
            let exe = std::env::current_exe().map_err(|e| e.to_string())?;
            let log = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
            let err = log.try_clone().map_err(|e| e.to_string())?;
            let mut child = Command::new(exe)
                .arg("serve")
                .arg(&backing)
                .arg(&mountpoint)
                .arg("--socket")
                .arg(&socket)
                .arg("--sync-latency-ms")
                .arg(sync_latency_ms.to_string())
                .stdin(Stdio::null())
                .stdout(log)
                .stderr(err)
                .spawn()
                .map_err(|e| e.to_string())?;
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(format!("faultfs serve exited: {status}"));
                }
                if mounted(&mountpoint) && control::request(&socket, "status").is_ok() {
                    println!(
                        "{}",
                        serde_json::json!({"ok": true, "pid": child.id(), "socket": socket})
                    );
                    return Ok(());
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    return Err("faultfs serve did not come up within 20 s".into());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Cmd::Drop {
            mountpoint,
            torn,
            socket,
        } => {
            let socket = socket_for(&mountpoint, socket).map_err(|e| e.to_string())?;
            match torn {
                Some(seed) => ask(&socket, &format!("drop torn {seed}")),
                None => ask(&socket, "drop"),
            }
        }
        Cmd::Cut {
            mountpoint,
            torn,
            at,
            socket,
        } => {
            let socket = socket_for(&mountpoint, socket).map_err(|e| e.to_string())?;
            if let Some(at) = at {
                sleep_until_unix_ms(at)?;
            }
            match torn {
                Some(seed) => ask(&socket, &format!("cut torn {seed}")),
                None => ask(&socket, "cut"),
            }
        }
        Cmd::Fail {
            mountpoint,
            mode,
            ops,
            socket,
        } => {
            let socket = socket_for(&mountpoint, socket).map_err(|e| e.to_string())?;
            match (mode.as_str(), ops) {
                ("off", _) => ask(&socket, "fail off"),
                (m, Some(n)) => ask(&socket, &format!("fail {m} {n}")),
                (m, None) => ask(&socket, &format!("fail {m}")),
            }
        }
        Cmd::Status { mountpoint, socket } => {
            let socket = socket_for(&mountpoint, socket).map_err(|e| e.to_string())?;
            ask(&socket, "status")
        }
        Cmd::Unmount { mountpoint, socket } => {
            let socket = socket_for(&mountpoint, socket).map_err(|e| e.to_string())?;
            for args in [&["-u"][..], &["-u", "-z"][..]] {
                if mounted(&mountpoint) {
                    // -z when busy: detached now, finished by the kernel
                    // when the last file closes.
                    let _ = Command::new("fusermount3")
                        .args(args)
                        .arg(&mountpoint)
                        .stderr(Stdio::null())
                        .status();
                }
            }
            // The background process ends with its mount.
            let deadline = Instant::now() + Duration::from_secs(5);
            while socket.exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if mounted(&mountpoint) {
                return Err(format!("{} is still mounted", mountpoint.display()));
            }
            println!("{}", serde_json::json!({"ok": true}));
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("faultfs: {e}");
            ExitCode::FAILURE
        }
    }
}

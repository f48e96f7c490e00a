//! `kv --config FILE get K | put K V | del K | cas K FROM TO | status`

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::{Parser, Subcommand};
use stutter_core::{Op, Reply};
use stutter_replica::client::{self, Client};
use stutter_replica::config::ClusterConfig;

#[derive(Parser, Debug)]
#[command(about = "Command-line client of a stutter cluster")]
struct Args {
    #[arg(long)]
    config: PathBuf,
    /// Give up after this many seconds (the outcome of a write is then unknown).
    #[arg(long, default_value_t = 10.0)]
    timeout: f64,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Print the value (exit 1 if absent).
    Get {
        key: String,
    },
    Put {
        key: String,
        value: String,
    },
    Del {
        key: String,
    },
    /// Compare-and-set; FROM `-` means absent. Exit 1 if the value differed.
    Cas {
        key: String,
        from: String,
        to: String,
    },
    /// One JSON line per replica.
    Status,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let args = Args::parse();
    let cfg = ClusterConfig::load(&args.config)?;
    let deadline = Duration::from_secs_f64(args.timeout);
    if let Cmd::Status = args.cmd {
        let mut any = false;
        for r in &cfg.replica {
            match client::status(&r.client_addr, Duration::from_secs(1)).await {
                Ok(s) => {
                    any = true;
                    let mut v = serde_json::to_value(&s)?;
                    v["role"] = format!("{:?}", s.role).to_lowercase().into();
                    v["reachable"] = true.into();
                    println!("{v}");
                }
                Err(e) => println!(
                    "{}",
                    serde_json::json!({"id": r.id, "reachable": false, "error": e.to_string()})
                ),
            }
        }
        if !any {
            bail!("no replica reachable");
        }
        return Ok(());
    }
    let mut c = Client::new(cfg.client_addrs(), client::fresh_client_id())
        .with_timeouts(Duration::from_secs(1), deadline);
    let b = |s: &str| bytes::Bytes::copy_from_slice(s.as_bytes());
    let op = match &args.cmd {
        Cmd::Get { key } => Op::Get { key: b(key) },
        Cmd::Put { key, value } => Op::Put {
            key: b(key),
            value: b(value),
        },
        Cmd::Del { key } => Op::Del { key: b(key) },
        Cmd::Cas { key, from, to } => Op::Cas {
            key: b(key),
            from: (from != "-").then(|| b(from)),
            to: b(to),
        },
        Cmd::Status => unreachable!("handled above"),
    };
    match c.call(op).await {
        Ok(Reply::Value(Some(v))) => println!("{}", String::from_utf8_lossy(&v)),
        Ok(Reply::Value(None)) => {
            eprintln!("not found");
            std::process::exit(1);
        }
        Ok(Reply::Done) => println!("ok"),
        Ok(Reply::Cas { ok: true, .. }) => println!("ok"),
        Ok(Reply::Cas { ok: false, current }) => {
            println!(
                "fail {}",
                current.map_or("-".to_string(), |c| String::from_utf8_lossy(&c)
                    .into_owned())
            );
            std::process::exit(1);
        }
        Ok(other) => bail!("unexpected reply {other:?}"),
        Err(e) => bail!("{e}"),
    }
    Ok(())
}

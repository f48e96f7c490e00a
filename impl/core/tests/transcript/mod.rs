//! Transcript tests: a file of commands over the in-memory test cluster
//! (`tests/common`), each followed by the outputs it produced, in the
//! manner of etcd raft's `testdata/*.txt` (its `datadriven` files). A run
//! replays every command and compares what it prints now with what the
//! file says; `STUTTER_REWRITE=1` writes the new outputs into the file
//! instead (review the diff before committing it).
//!
//! ```text
//! # A comment.
//! fire 0 election
//! ----
//! 0: timer election at 1000
//!   persist 1: Ballot 256
//!   ...
//! ```
//!
//! A case is a command line, a `----` line, and the expected output up to
//! the next blank line. Commands (times in µs; `ms` and `s` suffixes work):
//!
//! | command | what it does |
//! |---|---|
//! | `cluster n=3 [seed=S] [config=value…] [bug=name]` | a new cluster of started replicas (the test config, overridden) |
//! | `time T` | sets the clock to T (never backwards), firing nothing |
//! | `tick [ID] DT` | advances the clock by DT, firing the due timers in deadline order (only ID's, if given) |
//! | `fire ID election\|heartbeat\|gc` | the timer input, now, whatever its deadline |
//! | `send A->B MESSAGE` | B handles MESSAGE from A now (written as outputs print it) |
//! | `deliver [A->B\|all] [N]` | delivers the queued messages of a link (or all queued now), oldest first, at most N |
//! | `drop [A->B\|all]` | loses the queued messages of a link (or all) |
//! | `cut A->B\|A-B`, `heal` | from now on the link (one way, or both) loses what is sent on it (still printed as an output); `heal` restores every link |
//! | `dup A->B` | delivers the oldest message of a link and keeps it queued |
//! | `sync ID\|all [token=N]` | the disk reports the newest persist durable (or token N) |
//! | `crash ID`, `restart ID` | loses unsynced records and memory; recovers from the synced records |
//! | `request ID C/S OP` | replica ID receives client C's request number S (`put k v`, `get k`, `del k`, `cas k from\|- to`, or `register` with S = 0 and C a nonce); `rK` is the K-th id the log assigns |
//! | `gc-due ID [HEADROOM]`, `gc-done ID` | the driver's collector reports a collection due (bytes of headroom, default 1 MiB), or over |
//! | `storage-alarm ID on\|off` | the driver's log cannot write (a full disk), or can again |
//! | `run DT [elections]` | fair schedule for DT (sync, deliver, fire timers); prints the collections started and the replies only, and with `elections` the election steps traced (pre-votes, elections, step-downs, hand-offs) |
//! | `load ID puts=N [client=NONCE] [every=DT]` | a client registers through ID, then N puts of distinct keys to ID, each followed by `run DT` |
//! | `status [ID…]` | role, ballot, indexes, tokens, queues and ignored inputs |
//! | `log ID`, `kv ID`, `net` | a replica's log, its key-value state, the queued messages |
//!
//! Every input a replica handles prints as a header line (`1->0 Accept …`,
//! `0: timer election at T`, `0: persisted 3`, `0: request 7/1 put k v`)
//! with its outputs indented below, and `ignored: reason` when the replica
//! counted it as ignored. A safety violation the cluster detects prints as
//! `VIOLATION: …`.

pub mod syntax;

use std::fmt::Write as _;
use std::path::Path;

use stutter_core::*;

use crate::common::{test_config, Cluster, StepRecord};

/// One case of a transcript file, or the text between cases.
enum Chunk {
    Text(String),
    Case { command: String, expected: String },
}

fn parse_file(text: &str) -> Result<Vec<Chunk>, String> {
    let mut chunks = Vec::new();
    let mut lines = text.lines().enumerate().peekable();
    while let Some((n, line)) = lines.next() {
        if line.trim().is_empty() || line.starts_with('#') {
            chunks.push(Chunk::Text(line.to_owned()));
            continue;
        }
        match lines.next() {
            Some((_, "----")) => {}
            _ => {
                return Err(format!(
                    "line {}: command '{line}' is not followed by ----",
                    n + 1
                ))
            }
        }
        let mut expected = String::new();
        while let Some((_, l)) = lines.peek() {
            if l.trim().is_empty() {
                break;
            }
            expected.push_str(l);
            expected.push('\n');
            lines.next();
        }
        chunks.push(Chunk::Case {
            command: line.to_owned(),
            expected,
        });
    }
    Ok(chunks)
}

/// Replays one transcript file. Returns the differences found (or, when
/// rewriting, writes the file and returns none).
pub fn run_file(path: &Path, rewrite: bool) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let chunks = match parse_file(&text) {
        Ok(c) => c,
        Err(e) => return vec![format!("{}: {e}", path.display())],
    };
    let mut interp = Interp::default();
    let mut diffs = Vec::new();
    let mut rewritten = String::new();
    for chunk in chunks {
        match chunk {
            Chunk::Text(t) => {
                rewritten.push_str(&t);
                rewritten.push('\n');
            }
            Chunk::Case { command, expected } => {
                let actual = interp.command(&command);
                if actual != expected {
                    diffs.push(format!(
                        "{}: {command}\n--- expected\n{expected}--- actual\n{actual}",
                        path.display()
                    ));
                }
                let _ = write!(rewritten, "{command}\n----\n{actual}");
            }
        }
    }
    if rewrite {
        std::fs::write(path, rewritten).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return Vec::new();
    }
    diffs
}

/// A duration: bare µs, or with a `us`, `ms` or `s` suffix.
fn duration(s: &str) -> Result<Time, String> {
    let (num, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1_000)
    } else if let Some(n) = s.strip_suffix("us") {
        (n, 1)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1_000_000)
    } else {
        (s, 1)
    };
    num.parse::<Time>()
        .map(|n| n * scale)
        .map_err(|_| format!("'{s}' is not a duration"))
}

fn number<T: std::str::FromStr>(s: &str) -> Result<T, String> {
    s.parse().map_err(|_| format!("'{s}' is not a number"))
}

/// `A->B`.
fn link(s: &str) -> Result<(ReplicaId, ReplicaId), String> {
    let (a, b) = s
        .split_once("->")
        .ok_or_else(|| format!("expected A->B, got '{s}'"))?;
    Ok((number(a)?, number(b)?))
}

fn bug(name: &str) -> Result<Bug, String> {
    Ok(match name {
        "skip-merge" => Bug::SkipMerge,
        "accept-lower-ballot" => Bug::AcceptLowerBallot,
        "reply-before-persist" => Bug::ReplyBeforePersist,
        "commit-without-majority" => Bug::CommitWithoutMajority,
        "follower-commit-any-ballot" => Bug::FollowerCommitAnyBallot,
        "local-reads" => Bug::LocalReads,
        "skip-noop-fill" => Bug::SkipNoopFill,
        other => return Err(format!("unknown bug '{other}'")),
    })
}

#[derive(Default)]
pub struct Interp {
    cluster: Option<Cluster>,
    violations_shown: usize,
}

impl Interp {
    /// Runs one command line; returns what it printed (never empty).
    pub fn command(&mut self, line: &str) -> String {
        let mut out = match self.dispatch(line) {
            Ok(s) => s,
            Err(e) => format!("error: {e}\n"),
        };
        if let Some(c) = self.cluster.as_mut() {
            for s in std::mem::take(&mut c.steps) {
                print_step(&mut out, &s);
            }
            for v in &c.violations[self.violations_shown..] {
                let _ = writeln!(out, "VIOLATION: {v}");
            }
            self.violations_shown = c.violations.len();
        }
        if out.is_empty() {
            out.push_str("ok\n");
        }
        syntax::name_registered(&out)
    }

    fn cluster(&mut self) -> Result<&mut Cluster, String> {
        self.cluster
            .as_mut()
            .ok_or_else(|| "no cluster yet: start with 'cluster n=3'".to_owned())
    }

    fn replica(&mut self, s: &str) -> Result<ReplicaId, String> {
        let id: ReplicaId = number(s)?;
        let n = self.cluster()?.nodes.len();
        if id as usize >= n {
            return Err(format!("no replica {id} in a cluster of {n}"));
        }
        Ok(id)
    }

    fn dispatch(&mut self, line: &str) -> Result<String, String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let args = &words[1..];
        let mut out = String::new();
        match words[0] {
            "cluster" => self.new_cluster(args)?,
            "time" => {
                let t = duration(args.first().ok_or("time T")?)?;
                let c = self.cluster()?;
                if t < c.now {
                    return Err(format!("time {t} is before now ({})", c.now));
                }
                c.now = t;
            }
            "tick" => {
                let (only, dt) = match args {
                    [dt] => (None, duration(dt)?),
                    [id, dt] => (Some(self.replica(id)?), duration(dt)?),
                    _ => return Err("tick [ID] DT".to_owned()),
                };
                self.cluster()?.advance_only(only, dt);
            }
            "fire" => {
                let [id, t] = args else {
                    return Err("fire ID election|heartbeat".to_owned());
                };
                let id = self.replica(id)?;
                let timer = match *t {
                    "election" => Timer::Election,
                    "heartbeat" => Timer::Heartbeat,
                    "gc" => Timer::Gc,
                    other => return Err(format!("unknown timer '{other}'")),
                };
                self.cluster()?.input(id, Input::Timer(timer));
            }
            "send" => {
                let (from, to) = link(args.first().ok_or("send A->B MESSAGE")?)?;
                let to = self.replica(&to.to_string())?;
                let rest = line.split_once(args[0]).map_or("", |(_, r)| r);
                let msg = syntax::Parser::new(rest).message()?;
                self.cluster()?.input(to, Input::Message { from, msg });
            }
            "deliver" | "dup" => self.deliver(words[0] == "dup", args)?,
            "drop" => {
                let c = self.cluster()?;
                match args {
                    ["all"] | [] => c.net.clear(),
                    [l] => {
                        let (a, b) = link(l)?;
                        c.net.retain(|m| (m.from, m.to) != (a, b));
                    }
                    _ => return Err("drop [A->B|all]".to_owned()),
                }
            }
            "cut" => {
                let [l] = args else {
                    return Err("cut A->B|A-B".to_owned());
                };
                let (a, b, both) = match l.split_once('-') {
                    Some((a, b)) if !b.starts_with('>') => (number(a)?, number(b)?, true),
                    _ => {
                        let (a, b) = link(l)?;
                        (a, b, false)
                    }
                };
                let c = self.cluster()?;
                c.cut.insert((a, b));
                if both {
                    c.cut.insert((b, a));
                }
            }
            "heal" => self.cluster()?.cut.clear(),
            "sync" => self.sync(args)?,
            "gc-due" => {
                let (id, headroom) = match args {
                    [id] => (self.replica(id)?, 1 << 20),
                    [id, h] => (self.replica(id)?, number(h)?),
                    _ => return Err("gc-due ID [HEADROOM]".to_owned()),
                };
                self.cluster()?.input(id, Input::GcDue { headroom });
            }
            "storage-alarm" => {
                let (id, full) = match args {
                    [id, on] if *on == "on" => (self.replica(id)?, true),
                    [id, off] if *off == "off" => (self.replica(id)?, false),
                    _ => return Err("storage-alarm ID on|off".to_owned()),
                };
                self.cluster()?.input(id, Input::StorageAlarm { full });
            }
            "gc-done" => {
                let id = self.replica(args.first().ok_or("gc-done ID")?)?;
                self.cluster()?.input(id, Input::GcDone);
            }
            "crash" => {
                let id = self.replica(args.first().ok_or("crash ID")?)?;
                self.cluster()?.crash(id);
            }
            "restart" => {
                let id = self.replica(args.first().ok_or("restart ID")?)?;
                self.cluster()?.restart(id);
            }
            "request" => {
                let id = self.replica(args.first().ok_or("request ID C/S OP")?)?;
                let rest = line.split_once(args[0]).map_or("", |(_, r)| r);
                let mut p = syntax::Parser::new(rest);
                let req = p.request()?;
                if !p.at_end() {
                    return Err("trailing words after the request".to_owned());
                }
                self.cluster()?.input(id, Input::Request(req));
            }
            "run" => {
                let (dt, elections) = match args {
                    [dt] => (duration(dt)?, false),
                    [dt, "elections"] => (duration(dt)?, true),
                    _ => return Err("run DT [elections]".to_owned()),
                };
                let from = self.cluster()?.trace.len();
                out = self.run_quietly(|c| c.run_fair(dt))?;
                if elections {
                    out.push_str(&self.election_steps(from)?);
                }
            }
            "load" => out = self.load(args)?,
            "status" => out = self.status(args)?,
            "log" => out = self.log(args)?,
            "kv" => out = self.kv(args)?,
            "net" => {
                for m in &self.cluster()?.net {
                    let _ = writeln!(out, "{}->{} {}", m.from, m.to, syntax::message(&m.msg));
                }
            }
            other => return Err(format!("unknown command '{other}'")),
        }
        Ok(out)
    }

    fn new_cluster(&mut self, args: &[&str]) -> Result<(), String> {
        let mut n = 3;
        let mut seed = 0;
        let mut sets = Vec::new();
        for a in args {
            let (k, v) = a
                .split_once('=')
                .ok_or_else(|| format!("expected key=value, got '{a}'"))?;
            match k {
                "n" => n = number(v)?,
                "seed" => seed = number(v)?,
                _ => sets.push((k, v)),
            }
        }
        let mut cfg = test_config(n);
        for (k, v) in sets {
            match k {
                "heartbeat_interval" => cfg.heartbeat_interval = duration(v)?,
                "election_timeout" => cfg.election_timeout = duration(v)?,
                "election_jitter" => cfg.election_jitter = duration(v)?,
                "trim_grace" => cfg.trim_grace = duration(v)?,
                "window" => cfg.window = number(v)?,
                "max_batch" => cfg.max_batch = number(v)?,
                "max_pending" => cfg.max_pending = number(v)?,
                "trim_every" => cfg.trim_every = number(v)?,
                "trim_bytes" => cfg.trim_bytes = number(v)?,
                "catchup_max" => cfg.catchup_max = number(v)?,
                "bug" => cfg.injected_bug = Some(bug(v)?),
                "gc_coordination" => cfg.gc_coordination = v == "true",
                "gc_grant_timeout" => cfg.gc_grant_timeout = duration(v)?,
                "gc_wait_max" => cfg.gc_wait_max = duration(v)?,
                "gc_transfer_wait" => cfg.gc_transfer_wait = duration(v)?,
                "gc_handoff_grace" => cfg.gc_handoff_grace = duration(v)?,
                "gc_grant_after_grace" => cfg.gc_grant_after_grace = v == "true",
                "gc_handoff_promise" => cfg.gc_handoff_promise = v == "true",
                "gc_handoff_eager" => cfg.gc_handoff_eager = v == "true",
                "commit_on_accept" => cfg.commit_on_accept = v == "true",
                "pre_vote" => cfg.pre_vote = v == "true",
                other => return Err(format!("unknown config '{other}'")),
            }
        }
        self.cluster = Some(Cluster::recorded(cfg, seed));
        self.violations_shown = 0;
        Ok(())
    }

    fn deliver(&mut self, dup: bool, args: &[&str]) -> Result<(), String> {
        let (which, max) = match args {
            [] => ("all", usize::MAX),
            [w] => (*w, usize::MAX),
            [w, n] => (*w, number(n)?),
            _ => return Err("deliver [A->B|all] [N]".to_owned()),
        };
        let filter = if which == "all" {
            None
        } else {
            Some(link(which)?)
        };
        let c = self.cluster()?;
        // Only what is queued now: the answers these deliveries produce
        // wait for the next command.
        let mut ids: Vec<usize> = (0..c.net.len())
            .filter(|i| filter.is_none_or(|l| (c.net[*i].from, c.net[*i].to) == l))
            .take(if dup { 1 } else { max })
            .collect();
        if ids.is_empty() {
            return Err("no message queued there".to_owned());
        }
        // Delivering one removes it: the later indexes shift down by one.
        for k in 0..ids.len() {
            let i = ids[k];
            c.deliver(i, dup);
            if !dup {
                for later in ids.iter_mut().skip(k + 1) {
                    *later -= 1;
                }
            }
        }
        Ok(())
    }

    fn sync(&mut self, args: &[&str]) -> Result<(), String> {
        let c = self.cluster()?;
        match args {
            ["all"] => c.sync_all(),
            [id] => {
                let id: ReplicaId = number(id)?;
                c.sync(id)
            }
            [id, t] => {
                let id: ReplicaId = number(id)?;
                let token: u64 = number(t.strip_prefix("token=").ok_or("sync ID token=N")?)?;
                let node = c.nodes.get_mut(id as usize).ok_or("no such replica")?;
                let (done, kept): (Vec<_>, Vec<_>) =
                    node.unsynced.drain(..).partition(|(t, _)| *t <= token);
                node.unsynced = kept;
                node.synced.extend(done.into_iter().flat_map(|(_, r)| r));
                c.input(id, Input::Persisted { token });
            }
            _ => return Err("sync ID|all [token=N]".to_owned()),
        }
        Ok(())
    }

    /// Runs `f` without printing its steps; prints the client replies.
    /// The election steps traced since trace event `from`, one per line
    /// with their time: what `run DT elections` prints after the replies.
    fn election_steps(&mut self, from: usize) -> Result<String, String> {
        let mut out = String::new();
        for ev in &self.cluster()?.trace[from..] {
            let shown = matches!(
                ev.action,
                Action::StartPreVote { .. }
                    | Action::HandlePreVote { .. }
                    | Action::HandlePreVoteReply { .. }
                    | Action::StartElection { .. }
                    | Action::HandlePrepare { .. }
                    | Action::BecomeLeader { .. }
                    | Action::StepDown { .. }
                    | Action::TransferLeadership { .. }
                    | Action::TransferWithPromise { .. }
                    | Action::HandleTimeoutNow { .. }
            );
            if shown {
                let action = match &ev.action {
                    Action::BecomeLeader {
                        ballot,
                        merged_from,
                        ..
                    } => {
                        format!("BecomeLeader {{ ballot: {ballot}, merged_from: {merged_from:?} }}")
                    }
                    a => format!("{a:?}"),
                };
                let _ = writeln!(out, "{} at {}: {action}", ev.replica, ev.time);
            }
        }
        Ok(out)
    }

    fn run_quietly(&mut self, f: impl FnOnce(&mut Cluster)) -> Result<String, String> {
        let c = self.cluster()?;
        let (replies, collections) = (c.replies.len(), c.collections.len());
        c.record = false;
        f(c);
        c.record = true;
        let collected: Vec<ReplicaId> = c.collections[collections..].to_vec();
        // Consecutive replies of one replica with the same answer share a
        // line: `0: reply r0/1 … r0/40 done (40 replies)`.
        let mut runs: Vec<(ReplicaId, String, String, String, usize)> = Vec::new();
        for (id, client, seq, reply) in &c.replies[replies..] {
            let (req, text) = (format!("{client}/{seq}"), syntax::reply(reply));
            match runs.last_mut() {
                Some(r) if r.0 == *id && r.3 == text => {
                    r.2 = req;
                    r.4 += 1;
                }
                _ => runs.push((*id, req.clone(), req, text, 1)),
            }
        }
        let mut out = String::new();
        for id in collected {
            let _ = writeln!(out, "{id}: collect");
        }
        for (id, first, last, text, n) in runs {
            let _ = match n {
                1 => writeln!(out, "{id}: reply {first} {text}"),
                _ => writeln!(out, "{id}: reply {first} … {last} {text} ({n} replies)"),
            };
        }
        Ok(out)
    }

    /// `load ID puts=N [client=NONCE] [every=DT]`: one client registers
    /// through replica ID under NONCE (default 100), then sends N puts
    /// (keys k1…kN, seqs 1…N) to it, one every DT, the cluster running
    /// fairly in between. Prints the replies.
    fn load(&mut self, args: &[&str]) -> Result<String, String> {
        let id = self.replica(
            args.first()
                .ok_or("load ID puts=N [client=NONCE] [every=DT]")?,
        )?;
        let (mut puts, mut nonce, mut every) = (0u64, 100u64, 50);
        for a in &args[1..] {
            match a.split_once('=') {
                Some(("puts", v)) => puts = number(v)?,
                Some(("client", v)) => nonce = number(v)?,
                Some(("every", v)) => every = duration(v)?,
                _ => return Err(format!("unknown load option '{a}'")),
            }
        }
        let mut client = None;
        let out = self.run_quietly(|c| {
            client = c.register(id, nonce);
            for i in 1..=puts {
                let Some(client) = client else { break };
                c.input(
                    id,
                    Input::Request(crate::common::put(client, i, &format!("k{i}"), "v")),
                );
                c.run_fair(every);
            }
        })?;
        if client.is_none() {
            return Err(format!("{out}the client did not get registered"));
        }
        Ok(out)
    }

    fn status(&mut self, args: &[&str]) -> Result<String, String> {
        let c = self.cluster()?;
        let ids: Vec<ReplicaId> = if args.is_empty() {
            (0..c.nodes.len() as ReplicaId).collect()
        } else {
            args.iter().map(|a| number(a)).collect::<Result<_, _>>()?
        };
        let mut out = String::new();
        for id in ids {
            let node = c
                .nodes
                .get(id as usize)
                .ok_or_else(|| format!("no replica {id}"))?;
            let r = &node.replica;
            if !node.up {
                let _ = writeln!(out, "{id}: down");
                continue;
            }
            let (issued, durable) = r.tokens();
            let leader = r.leader().map_or("none".to_owned(), |l| l.to_string());
            let _ = write!(
                out,
                "{id}: {:?} ballot={} leader={leader} last_index={} last_executed={} global_last_executed={} \
                 trimmed={} persisted={durable}/{issued} pending={} reads={}",
                r.role(),
                r.ballot(),
                r.last_index(),
                r.last_executed(),
                r.global_last_executed(),
                r.trimmed(),
                r.pending_len(),
                r.pending_reads(),
            );
            // GC coordination, when there is any to show.
            if r.gc_due() {
                out.push_str(" gc=due");
            }
            if r.gc_collecting() {
                out.push_str(" gc=collecting");
            }
            let granted = r.gc_granted();
            if !granted.is_empty() {
                let _ = write!(out, " gc-counted={granted:?}");
            }
            for (why, n) in r.ignored().iter() {
                let _ = write!(out, " {}={n}", why.name());
            }
            out.push('\n');
        }
        Ok(out)
    }

    fn log(&mut self, args: &[&str]) -> Result<String, String> {
        let id = self.replica(args.first().ok_or("log ID")?)?;
        let r = &self.cluster()?.nodes[id as usize].replica;
        let mut out = format!("trimmed={}\n", r.trimmed());
        for inst in r.instances_from(Slot::ZERO) {
            let _ = writeln!(out, "{}", syntax::instance(inst));
        }
        Ok(out)
    }

    fn kv(&mut self, args: &[&str]) -> Result<String, String> {
        let id = self.replica(args.first().ok_or("kv ID")?)?;
        let sm = self.cluster()?.nodes[id as usize].replica.state_machine();
        let mut out = format!("last_executed={}\n", sm.last_executed);
        for (k, v) in &sm.kv {
            let _ = writeln!(
                out,
                "{}={}",
                String::from_utf8_lossy(k),
                String::from_utf8_lossy(v)
            );
        }
        for (client, s) in sm.sessions.iter() {
            let _ = writeln!(
                out,
                "session {client}: seq={} {}",
                s.seq,
                syntax::reply(&s.reply)
            );
        }
        Ok(out)
    }
}

fn print_step(out: &mut String, s: &StepRecord) {
    let _ = writeln!(out, "{}", syntax::input(s.id, s.time, &s.input));
    for o in &s.outputs {
        let _ = writeln!(out, "  {}", syntax::output(s.id, o));
    }
    for why in &s.ignored {
        let _ = writeln!(out, "  ignored: {}", why.name());
    }
}

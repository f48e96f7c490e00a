//! How transcripts write the core's values: one syntax, printed for the
//! outputs and parsed for the messages a transcript sends by hand, so that
//! a line of output can be pasted into a `send` command.
//!
//! ```text
//! request   r0/1 put k v   r0/1 get k   r0/1 del k   r0/1 cas k - v   (- = absent)
//!           5/0 register   7/1 get k
//! value     noop   [r0/1 put k v, r1/1 get k]
//! instance  2@257 inprogress [r0/1 put k v]     (slot@ballot state value)
//! message   Accept ballot=257 slot=2 value=noop
//! ```
//!
//! A client id the log assigns, 2^63 + k (`REGISTERED_BASE`), is written
//! `rk` wherever it appears, trace events included ([`name_registered`]):
//! `r0` is the first client registered. Ids below 2^63 are written as
//! numbers: the nonces of `register` requests, and readers that did not
//! register.

use std::sync::Arc;

use bytes::Bytes;
use stutter_core::*;

fn text(b: &Bytes) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub fn op(o: &Op) -> String {
    match o {
        Op::Get { key } => format!("get {}", text(key)),
        Op::Put { key, value } => format!("put {} {}", text(key), text(value)),
        Op::Del { key } => format!("del {}", text(key)),
        Op::Cas { key, from, to } => {
            format!(
                "cas {} {} {}",
                text(key),
                from.as_ref().map_or("-".to_owned(), text),
                text(to)
            )
        }
        Op::Register => "register".to_owned(),
    }
}

/// `client/seq op`.
pub fn request(r: &Request) -> String {
    format!("{}/{} {}", r.client, r.seq, op(&r.op))
}

/// `text` with every decimal number at or above `REGISTERED_BASE` (only
/// client ids are that large: ballots, slots and times never are)
/// written `rk`.
pub fn name_registered(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut digits = String::new();
    let flush = |digits: &mut String, out: &mut String| {
        match digits.parse::<u64>() {
            Ok(n) if n >= REGISTERED_BASE && digits.len() >= 19 => {
                out.push_str(&format!("r{}", n - REGISTERED_BASE))
            }
            _ => out.push_str(digits),
        }
        digits.clear();
    };
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
        } else {
            flush(&mut digits, &mut out);
            out.push(c);
        }
    }
    flush(&mut digits, &mut out);
    out
}

/// A client id: `rk` (the k-th id the log assigns) or a number.
pub fn client_id(w: &str) -> Result<u64, String> {
    match w.strip_prefix('r') {
        Some(k) => k
            .parse::<u64>()
            .ok()
            .and_then(|k| REGISTERED_BASE.checked_add(k))
            .ok_or_else(|| format!("'{w}' is not a client id (rK or a number)")),
        None => w
            .parse()
            .map_err(|_| format!("'{w}' is not a client id (rK or a number)")),
    }
}

pub fn value(v: &Value) -> String {
    match v {
        Value::Noop => "noop".to_owned(),
        Value::Batch(b) => format!("[{}]", b.iter().map(request).collect::<Vec<_>>().join(", ")),
    }
}

fn state(s: InstanceState) -> &'static str {
    match s {
        InstanceState::InProgress => "inprogress",
        InstanceState::Committed => "committed",
        InstanceState::Executed => "executed",
    }
}

pub fn instance(i: &Instance) -> String {
    format!(
        "{}@{} {} {}",
        i.slot,
        i.ballot,
        state(i.state),
        value(&i.value)
    )
}

fn instances(v: &[Instance]) -> String {
    format!(
        "[{}]",
        v.iter().map(instance).collect::<Vec<_>>().join(", ")
    )
}

pub fn snapshot(s: &Snapshot) -> String {
    format!(
        "(last_executed={} keys={} sessions={} digest={:016x})",
        s.last_executed,
        s.kv.len(),
        s.sessions.len(),
        s.digest
    )
}

pub fn message(m: &Message) -> String {
    match m {
        Message::Prepare { ballot, last_executed } => {
            format!("Prepare ballot={ballot} last_executed={last_executed}")
        }
        Message::Promise { ballot, ok, last_executed, entries, snapshot: s } => format!(
            "Promise ballot={ballot} ok={ok} last_executed={last_executed} entries={} snapshot={}",
            instances(entries),
            s.as_deref().map_or("none".to_owned(), snapshot)
        ),
        Message::Accept { ballot, slot, value: v, committed: None } => {
            format!("Accept ballot={ballot} slot={slot} value={}", value(v))
        }
        Message::Accept { ballot, slot, value: v, committed: Some(c) } => {
            format!("Accept ballot={ballot} slot={slot} value={} committed={c}", value(v))
        }
        Message::Accepted { ballot, slot, ok } => format!("Accepted ballot={ballot} slot={slot} ok={ok}"),
        Message::Heartbeat { ballot, last_executed, global_last_executed } => format!(
            "Heartbeat ballot={ballot} last_executed={last_executed} global_last_executed={global_last_executed}"
        ),
        Message::HeartbeatReply { ballot, ok, last_executed, leader_last_executed } => format!(
            "HeartbeatReply ballot={ballot} ok={ok} last_executed={last_executed} \
             leader_last_executed={leader_last_executed}"
        ),
        Message::CatchUp { ballot, entries } => format!("CatchUp ballot={ballot} entries={}", instances(entries)),
        Message::InstallSnapshot { ballot, snapshot: s } => {
            format!("InstallSnapshot ballot={ballot} snapshot={}", snapshot(s))
        }
        Message::ReadProbe { ballot, id } => format!("ReadProbe ballot={ballot} id={id}"),
        Message::ReadProbeAck { ballot, id } => format!("ReadProbeAck ballot={ballot} id={id}"),
        Message::GcRequest { ballot } => format!("GcRequest ballot={ballot}"),
        Message::GcGrant { ballot } => format!("GcGrant ballot={ballot}"),
        Message::GcDone { ballot } => format!("GcDone ballot={ballot}"),
        Message::TimeoutNow { ballot, promised: None, .. } => format!("TimeoutNow ballot={ballot}"),
        Message::TimeoutNow { ballot, promised: Some(p), entries } => {
            format!("TimeoutNow ballot={ballot} promised={p} entries={}", instances(entries))
        }
        Message::PreVote { ballot } => format!("PreVote ballot={ballot}"),
        Message::PreVoteReply { ballot, ok } => format!("PreVoteReply ballot={ballot} ok={ok}"),
    }
}

pub fn record(r: &Record) -> String {
    match r {
        Record::Ballot(b) => format!("Ballot {b}"),
        Record::Accept {
            slot,
            ballot,
            value: v,
        } => format!("Accept slot={slot} ballot={ballot} value={}", value(v)),
        Record::Snapshot {
            trimmed,
            snapshot: s,
        } => format!("Snapshot trimmed={trimmed} {}", snapshot(s)),
    }
}

pub fn reply(r: &Reply) -> String {
    match r {
        Reply::Value(Some(v)) => format!("value {}", text(v)),
        Reply::Value(None) => "value none".to_owned(),
        Reply::Done => "done".to_owned(),
        Reply::Cas { ok, current } => {
            format!(
                "cas ok={ok} current={}",
                current.as_ref().map_or("none".to_owned(), text)
            )
        }
        Reply::Redirect { leader: Some(l) } => format!("redirect leader={l}"),
        Reply::Redirect { leader: None } => "redirect leader=none".to_owned(),
        Reply::Busy => "busy".to_owned(),
        Reply::Stale => "stale".to_owned(),
        Reply::SessionExpired => "session-expired".to_owned(),
        Reply::Registered { client } => format!("registered client={client}"),
        Reply::UnknownClient => "unknown-client".to_owned(),
        Reply::Malformed => "malformed".to_owned(),
        Reply::StorageFull => "storage-full".to_owned(),
    }
}

pub fn timer(t: Timer) -> &'static str {
    match t {
        Timer::Election => "election",
        Timer::Heartbeat => "heartbeat",
        Timer::Gc => "gc",
    }
}

/// One output of replica `id`.
pub fn output(id: ReplicaId, o: &Output) -> String {
    match o {
        Output::Send { to, msg } => format!("{id}->{to} {}", message(msg)),
        Output::SetTimer { timer: t, at } => format!("timer {} at {at}", timer(*t)),
        Output::Persist { token, records } => {
            format!(
                "persist {token}: {}",
                records.iter().map(record).collect::<Vec<_>>().join("; ")
            )
        }
        Output::Reply {
            client,
            seq,
            reply: r,
        } => format!("reply {client}/{seq} {}", reply(r)),
        Output::Collect { granted } => format!("collect granted={granted}"),
        Output::Trace(ev) => format!("trace {:?}", ev.action),
    }
}

/// The input a step handled, as the header of its outputs.
pub fn input(id: ReplicaId, time: Time, i: &Input) -> String {
    match i {
        Input::Start => format!("{id}: start at {time}"),
        Input::Message { from, msg } => format!("{from}->{id} {}", message(msg)),
        Input::Request(r) => format!("{id}: request {}", request(r)),
        Input::Timer(t) => format!("{id}: timer {} at {time}", timer(*t)),
        Input::Persisted { token } => format!("{id}: persisted {token}"),
        Input::GcDue { headroom } => format!("{id}: gc-due headroom={headroom}"),
        Input::GcDone => format!("{id}: gc-done"),
        Input::StorageAlarm { full } => format!("{id}: storage-alarm full={full}"),
    }
}

/// A cursor over one line of transcript syntax.
pub struct Parser<'a> {
    s: &'a str,
    pos: usize,
}

const DELIMITERS: &[char] = &[',', '[', ']', '='];

impl<'a> Parser<'a> {
    pub fn new(s: &'a str) -> Parser<'a> {
        Parser { s, pos: 0 }
    }

    fn rest(&self) -> &'a str {
        &self.s[self.pos..]
    }

    fn skip_space(&mut self) {
        let r = self.rest();
        self.pos += r.len() - r.trim_start().len();
    }

    pub fn at_end(&mut self) -> bool {
        self.skip_space();
        self.rest().is_empty()
    }

    fn eat(&mut self, c: char) -> bool {
        self.skip_space();
        if self.rest().starts_with(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char) -> Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(format!("expected '{c}' at '{}'", self.rest()))
        }
    }

    /// The next run of characters up to a space or a delimiter.
    pub fn word(&mut self) -> Result<&'a str, String> {
        self.skip_space();
        let r = self.rest();
        let len = r
            .find(|c: char| c.is_whitespace() || DELIMITERS.contains(&c))
            .unwrap_or(r.len());
        if len == 0 {
            return Err(format!("expected a word at '{r}'"));
        }
        self.pos += len;
        Ok(&r[..len])
    }

    fn number(&mut self) -> Result<u64, String> {
        let w = self.word()?;
        w.parse().map_err(|_| format!("'{w}' is not a number"))
    }

    /// `N@M`, `N/M`: two numbers around a separator.
    fn pair(&mut self, sep: char) -> Result<(u64, u64), String> {
        let w = self.word()?;
        let (a, b) = w
            .split_once(sep)
            .ok_or_else(|| format!("expected N{sep}M, got '{w}'"))?;
        let n = |x: &str| {
            x.parse::<u64>()
                .map_err(|_| format!("'{x}' is not a number in '{w}'"))
        };
        Ok((n(a)?, n(b)?))
    }

    fn bytes(&mut self) -> Result<Bytes, String> {
        Ok(Bytes::from(self.word()?.to_owned()))
    }

    pub fn request(&mut self) -> Result<Request, String> {
        let w = self.word()?;
        let (client, seq) = w
            .split_once('/')
            .ok_or_else(|| format!("expected CLIENT/SEQ, got '{w}'"))?;
        let client = client_id(client)?;
        let seq = seq
            .parse::<u64>()
            .map_err(|_| format!("'{seq}' is not a number in '{w}'"))?;
        let op = match self.word()? {
            "get" => Op::Get { key: self.bytes()? },
            "put" => Op::Put {
                key: self.bytes()?,
                value: self.bytes()?,
            },
            "del" => Op::Del { key: self.bytes()? },
            "cas" => {
                let key = self.bytes()?;
                let from = match self.word()? {
                    "-" => None,
                    w => Some(Bytes::from(w.to_owned())),
                };
                Op::Cas {
                    key,
                    from,
                    to: self.bytes()?,
                }
            }
            "register" => Op::Register,
            other => {
                return Err(format!(
                    "unknown operation '{other}' (get, put, del, cas, register)"
                ))
            }
        };
        Ok(Request { client, seq, op })
    }

    /// `[item, item]`, each parsed by `item`.
    fn list<T>(
        &mut self,
        mut item: impl FnMut(&mut Self) -> Result<T, String>,
    ) -> Result<Vec<T>, String> {
        self.expect('[')?;
        let mut v = Vec::new();
        if self.eat(']') {
            return Ok(v);
        }
        loop {
            v.push(item(self)?);
            if self.eat(']') {
                return Ok(v);
            }
            self.expect(',')?;
        }
    }

    fn value(&mut self) -> Result<Value, String> {
        self.skip_space();
        if self.rest().starts_with('[') {
            Ok(Value::Batch(Arc::new(self.list(|p| p.request())?)))
        } else {
            match self.word()? {
                "noop" => Ok(Value::Noop),
                w => Err(format!("expected a value (noop or [requests]), got '{w}'")),
            }
        }
    }

    fn instance(&mut self) -> Result<Instance, String> {
        let (slot, ballot) = self.pair('@')?;
        let state = match self.word()? {
            "inprogress" => InstanceState::InProgress,
            "committed" => InstanceState::Committed,
            "executed" => InstanceState::Executed,
            w => return Err(format!("unknown instance state '{w}'")),
        };
        Ok(Instance {
            slot: Slot(slot),
            ballot: Ballot(ballot),
            value: self.value()?,
            state,
        })
    }

    /// A message as [`message`] prints it; every field must be given.
    pub fn message(&mut self) -> Result<Message, String> {
        let kind = self.word()?;
        let mut fields = Fields::default();
        while !self.at_end() {
            let key = self.word()?;
            self.expect('=')?;
            match key {
                "ok" => fields.ok = Some(self.word()? == "true"),
                "value" => fields.value = Some(self.value()?),
                "entries" => fields.entries = Some(self.list(|p| p.instance())?),
                "snapshot" => match self.word()? {
                    "none" => fields.no_snapshot = true,
                    w => {
                        return Err(format!(
                            "snapshots cannot be written by hand (got '{w}'); use none"
                        ))
                    }
                },
                _ => {
                    let n = self.number()?;
                    fields.numbers.push((key.to_owned(), n));
                }
            }
        }
        fields.build(kind)
    }
}

#[derive(Default)]
struct Fields {
    numbers: Vec<(String, u64)>,
    ok: Option<bool>,
    value: Option<Value>,
    entries: Option<Vec<Instance>>,
    no_snapshot: bool,
}

impl Fields {
    fn num(&self, key: &str) -> Result<u64, String> {
        self.numbers
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, n)| *n)
            .ok_or_else(|| format!("missing {key}="))
    }

    fn slot(&self, key: &str) -> Result<Slot, String> {
        self.num(key).map(Slot)
    }

    fn build(self, kind: &str) -> Result<Message, String> {
        let ballot = Ballot(self.num("ballot")?);
        let ok = || self.ok.ok_or("missing ok=");
        Ok(match kind {
            "Prepare" => Message::Prepare {
                ballot,
                last_executed: self.slot("last_executed")?,
            },
            "Promise" => {
                if !self.no_snapshot {
                    return Err("missing snapshot=none".to_owned());
                }
                Message::Promise {
                    ballot,
                    ok: ok()?,
                    last_executed: self.slot("last_executed")?,
                    entries: self.entries.clone().ok_or("missing entries=")?,
                    snapshot: None,
                }
            }
            "Accept" => Message::Accept {
                ballot,
                slot: self.slot("slot")?,
                value: self.value.clone().ok_or("missing value=")?,
                committed: self.num("committed").ok().map(Slot),
            },
            "Accepted" => Message::Accepted {
                ballot,
                slot: self.slot("slot")?,
                ok: ok()?,
            },
            "Heartbeat" => Message::Heartbeat {
                ballot,
                last_executed: self.slot("last_executed")?,
                global_last_executed: self.slot("global_last_executed")?,
            },
            "HeartbeatReply" => Message::HeartbeatReply {
                ballot,
                ok: ok()?,
                last_executed: self.slot("last_executed")?,
                leader_last_executed: self.slot("leader_last_executed")?,
            },
            "CatchUp" => Message::CatchUp {
                ballot,
                entries: self.entries.clone().ok_or("missing entries=")?,
            },
            "ReadProbe" => Message::ReadProbe {
                ballot,
                id: self.num("id")?,
            },
            "ReadProbeAck" => Message::ReadProbeAck {
                ballot,
                id: self.num("id")?,
            },
            "GcRequest" => Message::GcRequest { ballot },
            "GcGrant" => Message::GcGrant { ballot },
            "GcDone" => Message::GcDone { ballot },
            "TimeoutNow" => Message::TimeoutNow {
                ballot,
                promised: self.num("promised").ok().map(Ballot),
                entries: self.entries.clone().unwrap_or_default(),
            },
            "PreVote" => Message::PreVote { ballot },
            "PreVoteReply" => Message::PreVoteReply { ballot, ok: ok()? },
            other => return Err(format!("unknown or unwritable message '{other}'")),
        })
    }
}

//! The client history, Jepsen-style: every operation has an invocation and,
//! unless it is still pending at the end (`info`), a completion. Values are
//! positive integers, unique per write; 0 means absent.

use std::io::Write;

use serde::Serialize;
use stutter_core::{ClientId, Seq, Time, REGISTERED_BASE};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum F {
    Read,
    Write,
    Cas,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Pending,
    /// Read: the value (0 = absent). Write: the value written. Cas: whether it applied.
    Ok {
        value: u64,
        cas_ok: bool,
    },
    Fail(String),
    /// Completed without knowing whether it took effect (Jepsen's `info`
    /// at its completion): the session expired.
    Unknown(String),
}

#[derive(Clone, Debug)]
pub struct HistOp {
    pub client: ClientId,
    pub seq: Seq,
    pub f: F,
    pub key: u64,
    /// Write: the value. Cas: `to`.
    pub value: u64,
    /// Cas: expected value (0 = absent).
    pub from: u64,
    /// When the open-loop schedule meant it to start (≤ `invoke`: later
    /// when the client's previous operation was still in flight).
    pub intended: Time,
    pub invoke: Time,
    pub complete: Option<Time>,
    pub outcome: Outcome,
}

impl HistOp {
    pub fn is_ok(&self) -> bool {
        matches!(self.outcome, Outcome::Ok { .. })
    }
}

/// One line of the campaign history format (`jepsen/internal/hist`), so
/// that the campaigns' Porcupine checker can check simulated histories.
#[derive(Serialize)]
struct Line<'a> {
    index: usize,
    #[serde(rename = "type")]
    ty: &'a str,
    f: F,
    process: u64,
    time: u64,
    key: String,
    value: u64,
    #[serde(skip_serializing_if = "is_zero")]
    from: u64,
    #[serde(skip_serializing_if = "is_zero")]
    to: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn events(ops: &[HistOp]) -> Vec<(Time, usize, bool)> {
    let mut ev: Vec<(Time, usize, bool)> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        ev.push((op.invoke, i, false));
        if let Some(c) = op.complete {
            ev.push((c, i, true));
        }
    }
    ev.sort();
    ev
}

/// An operation's Jepsen process: its client id, a registered id
/// `2^63 + k` as `k`. Readers of the exported histories take a process for
/// a signed 64-bit integer (the campaigns' checker, `jepsen/internal/hist`,
/// a Go `int`), which registered ids overflow. Every operation's client
/// is an assigned id (clients register), so no two share a process.
pub fn process(client: ClientId) -> u64 {
    client.checked_sub(REGISTERED_BASE).unwrap_or(client)
}

/// Writes the history as ndjson in the campaigns' format (times in ns).
pub fn write_ndjson(w: &mut dyn Write, ops: &[HistOp]) -> std::io::Result<()> {
    for (index, (t, i, done)) in events(ops).into_iter().enumerate() {
        let op = &ops[i];
        let (ty, value, to) = match (&op.outcome, done) {
            (_, false) => (
                "invoke",
                if op.f == F::Cas { 0 } else { op.value },
                if op.f == F::Cas { op.value } else { 0 },
            ),
            (Outcome::Ok { cas_ok: false, .. }, true) if op.f == F::Cas => ("fail", 0, op.value),
            (Outcome::Ok { value, .. }, true) => (
                "ok",
                if op.f == F::Cas { 0 } else { *value },
                if op.f == F::Cas { op.value } else { 0 },
            ),
            (Outcome::Fail(_), true) => ("fail", op.value, 0),
            (Outcome::Pending | Outcome::Unknown(_), true) => ("info", op.value, 0),
        };
        let line = Line {
            index,
            ty,
            f: op.f,
            process: process(op.client),
            time: t * 1_000,
            key: format!("k{}", op.key),
            value,
            from: if op.f == F::Cas { op.from } else { 0 },
            to,
        };
        serde_json::to_writer(&mut *w, &line)?;
        writeln!(w)?;
    }
    // Pending operations end as :info at the end of the history.
    let end = ops.iter().filter_map(|o| o.complete).max().unwrap_or(0);
    for op in ops.iter().filter(|o| o.complete.is_none()) {
        let line = Line {
            index: 0,
            ty: "info",
            f: op.f,
            process: process(op.client),
            time: end * 1_000,
            key: format!("k{}", op.key),
            value: op.value,
            from: op.from,
            to: 0,
        };
        serde_json::to_writer(&mut *w, &line)?;
        writeln!(w)?;
    }
    Ok(())
}

fn edn(v: u64) -> String {
    if v == 0 {
        "nil".into()
    } else {
        v.to_string()
    }
}

/// Writes the history in Jepsen's EDN with `jepsen.independent` tuples.
pub fn write_edn(w: &mut dyn Write, ops: &[HistOp]) -> std::io::Result<()> {
    let mut index = 0;
    for (t, i, done) in events(ops) {
        let op = &ops[i];
        let ty = match (&op.outcome, done) {
            (_, false) => ":invoke",
            (Outcome::Ok { cas_ok: false, .. }, true) if op.f == F::Cas => ":fail",
            (Outcome::Ok { .. }, true) => ":ok",
            (Outcome::Fail(_), true) => ":fail",
            (Outcome::Pending | Outcome::Unknown(_), true) => ":info",
        };
        let value = match (op.f, &op.outcome, done) {
            (F::Read, Outcome::Ok { value, .. }, true) => edn(*value),
            (F::Read, _, _) => "nil".into(),
            (F::Write, _, _) => edn(op.value),
            (F::Cas, _, _) => format!("[{} {}]", edn(op.from), edn(op.value)),
        };
        let f = match op.f {
            F::Read => ":read",
            F::Write => ":write",
            F::Cas => ":cas",
        };
        writeln!(
            w,
            "{{:type {ty}, :f {f}, :value [{} {value}], :process {}, :time {}, :index {index}}}",
            op.key,
            process(op.client),
            t * 1_000
        )?;
        index += 1;
    }
    for op in ops.iter().filter(|o| o.complete.is_none()) {
        let f = match op.f {
            F::Read => ":read",
            F::Write => ":write",
            F::Cas => ":cas",
        };
        writeln!(
            w,
            "{{:type :info, :f {f}, :value [{} nil], :process {}, :index {index}}}",
            op.key,
            process(op.client)
        )?;
        index += 1;
    }
    Ok(())
}

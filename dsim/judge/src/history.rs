//! The history the clients observe: each operation with its invocation and
//! completion in simulated time and what came back.

use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Writes a value no other operation writes.
    Put(u64),
    Get,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Acknowledged: a put took effect; a get returned this value (`None`:
    /// absent).
    Ok(Option<u64>),
    /// A definite rejection: the operation did not and will not take effect.
    Failed,
    /// No answer (timeout): it may or may not take effect, at any time after
    /// its invocation.
    Unknown,
}

#[derive(Clone, Debug)]
pub struct Op {
    /// Client host index; `usize::MAX` for the final reader.
    pub client: usize,
    pub key: u64,
    pub kind: Kind,
    pub invoke: Duration,
    pub complete: Duration,
    pub outcome: Outcome,
}

impl Op {
    pub fn acknowledged(&self) -> bool {
        matches!(self.outcome, Outcome::Ok(_))
    }
}

#[derive(Debug, Default)]
pub struct History {
    pub ops: Vec<Op>,
}

/// What the final phase saw of each replica: `(last_executed, digest)`, or
/// `None` if it did not answer.
#[derive(Debug, Default)]
pub struct Finals {
    pub status: Vec<Option<(u64, u64)>>,
    /// All replicas that run (not refused) answered with the same
    /// `last_executed` after healing.
    pub converged: bool,
    /// Replicas that refused to start on damaged acceptor state (the
    /// write-ahead log's damage error): an allowed outcome, left down.
    pub refused: Vec<usize>,
    /// Each replica's role, leader, ballot and log positions as last seen
    /// (for the diagnosis of a failed run).
    pub detail: Vec<String>,
}

//! stutter's MultiPaxos protocol core: a pure, deterministic state machine.
//!
//! Drivers call [`Replica::handle`] with the current time and one
//! [`Input`]; the replica appends [`Output`]s (sends, timers, persistence
//! requests, client replies, trace events). The core has no I/O, no clock,
//! no threads and no OS randomness: the simulator and the real node run the
//! very same code. The protocol is specified in `docs/protocol.md`.

pub mod config;
pub mod durable;
pub mod io;
pub mod log;
pub mod message;
pub mod quorum;
pub mod replica;
pub mod sessions;
pub mod state_machine;
pub mod trace;
pub mod types;

#[cfg(feature = "injected-bugs")]
pub use config::Bug;
pub use config::Config;
pub use durable::DurableState;
pub use io::{Input, Output, Record, Timer};
pub use message::Message;
pub use quorum::{Quorum, VoteSet};
pub use replica::{Ignored, IgnoredCounts, Replica};
pub use sessions::{Session, SessionTable};
pub use state_machine::{Outcome, Snapshot};
pub use trace::{Action, SlotSummary, StateSummary, TraceEvent};
pub use types::*;

//! The real stutter replica (a tokio driver of `stutter-core`), its wire
//! protocols, write-ahead log and client library.

// Under the `madsim` feature every `tokio::` path of this crate names
// madsim-tokio: with `--cfg madsim` its clock, timers, tasks and sockets
// are madsim's simulated ones (sync and io stay tokio's), so the node's code
// is the same text under simulation as in a real process.
#[cfg(feature = "madsim")]
extern crate madsim_tokio as tokio;

pub mod alloc_count;
pub mod client;
pub mod config;
pub mod node;
pub mod node_bug;
pub mod peer_auth;
pub mod peer_frame;
pub mod platform;
pub mod text;
pub mod thread_cpu;
pub mod wal;
pub mod wire;

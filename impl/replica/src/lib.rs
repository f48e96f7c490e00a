//! The real stutter replica (a tokio driver of `stutter-core`), its wire
//! protocols, write-ahead log and client library.

pub mod alloc_count;
pub mod client;
pub mod config;
pub mod node;
pub mod peer_auth;
pub mod text;
pub mod thread_cpu;
pub mod wal;
pub mod wire;

//! What both node-level simulation layers (dsim/turmoil, dsim/madsim;
//! docs/simulator-layers.md) judge a run by, from outside the nodes: the
//! clients' history ([`history`]), its linearizability, lost
//! acknowledged writes and the replicas' digests ([`check`]), and where
//! each replica's own trace goes for validation against the spec
//! ([`node_traces`]). One crate, so that the two layers cannot judge
//! alike-named things differently.

pub mod check;
pub mod history;
pub mod node_traces;

//! How trace events name a slot's value: `None` for a no-op, else the
//! `(client, seq)` of each request of the batch.

pub type Ids = stutter_core::trace::ValueIds;

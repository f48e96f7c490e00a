//! How trace events name a slot's value: `None` for a no-op, else the
//! `(client, seq)` of each request of the batch.

use stutter_core::{ClientId, Seq};

pub type Ids = Option<Vec<(ClientId, Seq)>>;

//! The replica's status as the client protocols report it.

use stutter_core::Replica;

use crate::wire::{GcStatus, StatusInfo};

pub fn status(r: &Replica, gc: Option<GcStatus>) -> StatusInfo {
    StatusInfo {
        id: r.id(),
        role: r.role(),
        ballot: r.ballot(),
        leader: r.leader(),
        last_executed: r.last_executed(),
        global_last_executed: r.global_last_executed(),
        last_index: r.last_index(),
        digest: r.executed_digest(),
        gc,
        sessions: r.state_machine().sessions.len() as u64,
        applied_updates: r.applied_updates(),
    }
}

//! Applying the fault schedule: pauses, crashes, partitions. (The schedule
//! itself is drawn in `scenario.rs`.)

use stutter_core::{ReplicaId, Role, Time};

use crate::scenario::{Fault, MS};
use crate::world::{Ev, World};

#[derive(Default, Debug, Clone, serde::Serialize)]
pub struct FaultCounts {
    pub pauses: u64,
    pub pause_ms_total: u64,
    pub crashes: u64,
    pub partitions: u64,
    pub dropped_messages: u64,
    pub duplicated_messages: u64,
    /// Faults aimed at a window that fired (`windows.rs`).
    pub windows: u64,
}

impl Fault {
    /// How long the fault lasts once it fires.
    pub fn length(&self) -> Time {
        match self {
            Fault::Pause { duration, .. }
            | Fault::Isolate { duration, .. }
            | Fault::CutLink { duration, .. }
            | Fault::PauseLeader { duration, .. }
            | Fault::IsolateLeader { duration, .. }
            | Fault::PauseCandidate { duration }
            | Fault::CutLeader { duration }
            | Fault::CutFromLeader { duration } => *duration,
            Fault::Crash { down_for, .. } | Fault::CrashInBallotPersist { down_for } => *down_for,
            Fault::CrashLeader {
                after, down_for, ..
            } => after + down_for,
            Fault::SlowLeaderLink { extra, duration } => extra + duration,
        }
    }

    /// Whether the fault is aimed at a window: armed at its time, it fires
    /// when the window opens (at the latest by the end of the fault window).
    pub fn is_armed(&self) -> bool {
        !matches!(
            self,
            Fault::Pause { .. }
                | Fault::Crash { .. }
                | Fault::Isolate { .. }
                | Fault::CutLink { .. }
                | Fault::CutFromLeader { .. }
        )
    }

    /// When the fault is over at the latest, if due at `at`.
    pub fn healed_by(&self, at: Time, fault_end: Time) -> Time {
        let fires_by = if self.is_armed() {
            at.max(fault_end)
        } else {
            at
        };
        fires_by + self.length()
    }
}

impl World {
    pub(crate) fn fault(&mut self, f: Fault) {
        match f {
            Fault::Pause { replica, duration } => {
                if self.stop(replica, duration, false) {
                    self.faults.pauses += 1;
                    self.faults.pause_ms_total += duration / MS;
                }
            }
            Fault::Crash { replica, down_for } => {
                if self.nodes[replica as usize].replica.is_none() {
                    return;
                }
                self.forget_frees(replica);
                self.nodes[replica as usize].crash();
                self.faults.crashes += 1;
                // Connections of the dead process break: in-flight messages are lost.
                self.net.break_connections(replica);
                let durable = self.nodes[replica as usize].disk.durable();
                self.checker.crashed(replica, durable.ballot);
                self.at(self.now + down_for, Ev::Restart { r: replica });
            }
            Fault::Isolate {
                replica,
                one_way,
                duration,
            } => {
                let mut links = Vec::new();
                for other in 0..self.s.n as ReplicaId {
                    if other != replica {
                        links.push((replica, other));
                        if !one_way {
                            links.push((other, replica));
                        }
                    }
                }
                self.cut(links, duration);
            }
            Fault::CutLink { a, b, duration } => self.cut(vec![(a, b), (b, a)], duration),
            Fault::CutFromLeader { duration } => {
                let leader = self
                    .nodes
                    .iter()
                    .filter_map(|n| n.replica.as_ref())
                    .filter(|r| r.role() == Role::Leader)
                    .max_by_key(|r| r.ballot())
                    .map(|r| r.id());
                let Some(leader) = leader else { return };
                if let Some(follower) = (0..self.s.n as ReplicaId).find(|r| *r != leader) {
                    self.cut(vec![(leader, follower), (follower, leader)], duration);
                }
            }
            armed => self.arm(armed),
        }
    }

    pub(crate) fn cut(&mut self, links: Vec<(ReplicaId, ReplicaId)>, duration: Time) {
        self.net.cut(&links);
        self.faults.partitions += 1;
        self.at(self.now + duration, Ev::Uncut { links });
    }
}

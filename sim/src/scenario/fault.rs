//! The faults a scenario's schedule holds: drawn from its rates
//! (`plan.rs`), aimed at windows (`swarm.rs`), or written out by a test.

use serde::{Deserialize, Serialize};
use stutter_core::{ReplicaId, Time};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Fault {
    /// Stop-the-world pause of a replica.
    Pause { replica: ReplicaId, duration: Time },
    /// Crash (losing unsynced writes), restart after `down_for`.
    Crash { replica: ReplicaId, down_for: Time },
    /// Cut both directions between `a` and the others, or only `a`'s
    /// outgoing links when `one_way`.
    Isolate {
        replica: ReplicaId,
        one_way: bool,
        duration: Time,
    },
    /// Cut the link between two replicas only (non-transitive partition).
    CutLink {
        a: ReplicaId,
        b: ReplicaId,
        duration: Time,
    },

    // Faults aimed at a window (as FoundationDB's buggify and TigerBeetle's
    // swarm aim theirs): armed at their time, each fires when the world
    // sees its window open (`sim/src/windows.rs`) and is dropped unfired at
    // the end of the fault window. "The leader" is the replica leading at
    // the highest ballot when the fault fires; if none leads, the fault
    // waits for the next one elected.
    /// Stop the leader (`nth` = 0), or the `nth` replica elected after the
    /// fault was armed right after its election, for `duration`.
    PauseLeader { nth: u8, duration: Time },
    /// Crash the leader (`nth` = 0), or the `nth` replica elected after the
    /// fault was armed, `after` its election; restart after `down_for`.
    CrashLeader {
        nth: u8,
        after: Time,
        down_for: Time,
    },
    /// Stop the next replica to start an election right after that step
    /// (its prepares wait for its ballot to be durable, so they wait for
    /// the end of the pause), for `duration`.
    PauseCandidate { duration: Time },
    /// Isolate the leader (`nth` = 0), or the `nth` replica elected after
    /// the fault was armed right after its election, for `duration`: its
    /// outgoing links only when `one_way` (it still hears the others and
    /// takes client requests it cannot commit).
    IsolateLeader {
        nth: u8,
        one_way: bool,
        duration: Time,
    },
    /// Cut the link between the leader and one of its followers, both
    /// ways, for `duration`: the other follower elects a new leader while
    /// the old one still leads on its side of the cut.
    CutLeader { duration: Time },
    /// Delay everything the leader sends one follower by `extra` (in
    /// order) for `duration`: accepts of a leader deposed meanwhile arrive
    /// late.
    SlowLeaderLink { extra: Time, duration: Time },
    /// Crash the next replica to adopt a higher ballot (a follower answering
    /// a prepare, or hearing from a new leader) inside that persist window:
    /// after its ballot record went to disk, before it is durable; restart
    /// after `down_for`.
    CrashInBallotPersist { down_for: Time },
    /// A bridge partition: cut both directions between the leader of the
    /// moment and its lowest-numbered follower, which still reaches the
    /// others (nothing if no replica leads).
    CutFromLeader { duration: Time },
}

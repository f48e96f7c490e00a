//! Why an input changed nothing. Every ignored input is counted under one
//! of these reasons ([`Replica::ignored`](super::Replica::ignored)), so that
//! a driver or a test can tell a message that was dropped on purpose from
//! one that was lost. Counters, not trace events: the trace is what the
//! TLA+ spec validates, and an ignored input is no step of the spec.

/// The reasons, in the order of their counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Ignored {
    /// A message from an id outside `0..n`, or claiming to be our own.
    UnknownSender,
    /// A timer fired before the deadline last set for it (re-armed since).
    TimerNotDue,
    /// The election timer of a leader (armed before it was elected).
    ElectionTimerAtLeader,
    /// The heartbeat timer of a replica that is no longer leader.
    HeartbeatTimerNotLeader,
    /// `Persisted` with a token already reported durable.
    AlreadyDurable,
    /// A `CatchUp` or `InstallSnapshot` of a deposed leader.
    StaleBallot,
    /// An `Accept` for slot 0, or too far beyond our last executed slot for
    /// the log to hold (a faulty peer).
    SlotOutOfRange,
    /// A request at our own ballot while we lead or campaign (no peer can
    /// hold a ballot we own).
    OwnBallotFromPeer,
    /// An acceptance of a request of an earlier ballot of ours.
    AnswerToOldBallot,
    /// An acceptance for a role we no longer hold (a promise after we were
    /// elected, an `Accepted` after we stepped down).
    AnswerForRoleNotHeld,
    /// An answer from a replica the leader keeps no progress for.
    UnknownPeer,
    /// A read probe below our ballot: not acknowledged, so that a deposed
    /// leader cannot confirm its leadership.
    ProbeBelowBallot,
    /// An acknowledgment of a probe that is no longer in flight.
    AckOfOtherProbe,
    /// An `InstallSnapshot` not ahead of our own state.
    SnapshotNotNewer,
    /// `GcDue` while a collection is due or running already.
    GcAlreadyDue,
    /// `GcDone` without a collection running.
    GcNotCollecting,
    /// A follower's `GcDone` for a grant the leader does not hold.
    GcNotGranted,
    /// `TimeoutNow` while collecting: a collecting replica does not
    /// campaign (the spec's `HandleTimeoutNow` needs it not paused). A
    /// leader can pick it when it took a `GcDone` of the replica's earlier
    /// collection, overtaken by its next request, for the end of the new
    /// grant (seed 1722 with `sim swarm --fast-handoff`).
    TimeoutNowWhileCollecting,
    /// A pre-vote grant while not campaigning for it (the round ended: the
    /// replica heard a leader, raised its ballot, or already won).
    PreVoteNotCampaigning,
}

impl Ignored {
    pub const ALL: [Ignored; 19] = [
        Ignored::UnknownSender,
        Ignored::TimerNotDue,
        Ignored::ElectionTimerAtLeader,
        Ignored::HeartbeatTimerNotLeader,
        Ignored::AlreadyDurable,
        Ignored::StaleBallot,
        Ignored::SlotOutOfRange,
        Ignored::OwnBallotFromPeer,
        Ignored::AnswerToOldBallot,
        Ignored::AnswerForRoleNotHeld,
        Ignored::UnknownPeer,
        Ignored::ProbeBelowBallot,
        Ignored::AckOfOtherProbe,
        Ignored::SnapshotNotNewer,
        Ignored::GcAlreadyDue,
        Ignored::GcNotCollecting,
        Ignored::GcNotGranted,
        Ignored::TimeoutNowWhileCollecting,
        Ignored::PreVoteNotCampaigning,
    ];

    /// The reason as status pages and transcripts print it.
    pub fn name(self) -> &'static str {
        match self {
            Ignored::UnknownSender => "unknown-sender",
            Ignored::TimerNotDue => "timer-not-due",
            Ignored::ElectionTimerAtLeader => "election-timer-at-leader",
            Ignored::HeartbeatTimerNotLeader => "heartbeat-timer-not-leader",
            Ignored::AlreadyDurable => "already-durable",
            Ignored::StaleBallot => "stale-ballot",
            Ignored::SlotOutOfRange => "slot-out-of-range",
            Ignored::OwnBallotFromPeer => "own-ballot-from-peer",
            Ignored::AnswerToOldBallot => "answer-to-old-ballot",
            Ignored::AnswerForRoleNotHeld => "answer-for-role-not-held",
            Ignored::UnknownPeer => "unknown-peer",
            Ignored::ProbeBelowBallot => "probe-below-ballot",
            Ignored::AckOfOtherProbe => "ack-of-other-probe",
            Ignored::SnapshotNotNewer => "snapshot-not-newer",
            Ignored::GcAlreadyDue => "gc-already-due",
            Ignored::GcNotCollecting => "gc-not-collecting",
            Ignored::GcNotGranted => "gc-not-granted",
            Ignored::PreVoteNotCampaigning => "pre-vote-not-campaigning",
            Ignored::TimeoutNowWhileCollecting => "timeout-now-while-collecting",
        }
    }
}

/// One counter per [`Ignored`] reason.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IgnoredCounts([u64; Ignored::ALL.len()]);

impl IgnoredCounts {
    pub(super) fn record(&mut self, why: Ignored) {
        self.0[why as usize] += 1;
    }

    pub fn get(&self, why: Ignored) -> u64 {
        self.0[why as usize]
    }

    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// The reasons counted at least once, with their counts.
    pub fn iter(&self) -> impl Iterator<Item = (Ignored, u64)> + '_ {
        Ignored::ALL
            .iter()
            .map(|r| (*r, self.get(*r)))
            .filter(|(_, n)| *n > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_has_its_own_counter_and_name() {
        for (i, r) in Ignored::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i, "ALL lists the reasons in declaration order");
        }
        let mut names: Vec<&str> = Ignored::ALL.iter().map(|r| r.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Ignored::ALL.len());
        let mut c = IgnoredCounts::default();
        c.record(Ignored::StaleBallot);
        c.record(Ignored::StaleBallot);
        assert_eq!(
            c.iter().collect::<Vec<_>>(),
            vec![(Ignored::StaleBallot, 2)]
        );
        assert_eq!(c.total(), 2);
    }
}

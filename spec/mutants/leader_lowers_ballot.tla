---- MODULE leader_lowers_ballot ----
(* Mutant: a replica becomes leader of its old ballot after promising a higher one (Replicant race): its ballot goes down *)
\* MODEL: ci_small
\* EXPECT: BallotMonotonic
\* OVERRIDE: LeaderGuard <- MutLeaderGuard
EXTENDS MultiPaxos
MutLeaderGuard(r, b) == TRUE
====

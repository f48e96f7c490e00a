---- MODULE follower_commits_other_ballot ----
(* Mutant: a follower commits on heartbeat an instance whose ballot differs from the heartbeat ballot *)
\* MODEL: ci_small
\* EXPECT: CommittedIsChosen
\* OVERRIDE: FollowerCommitOK <- MutFollowerCommitOK
EXTENDS MultiPaxos
MutFollowerCommitOK(inst, b) == TRUE
====

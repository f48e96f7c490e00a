---- MODULE no_heartbeat_commit ----
(* Liveness mutant: followers never commit on a heartbeat (safe, but they never execute) *)
\* MODEL: liveness_stable
\* EXPECT: EventuallyAllExecuted
\* OVERRIDE: FollowerCommitOK <- MutFollowerCommitOK
EXTENDS Liveness
MutFollowerCommitOK(inst, b) == FALSE
====

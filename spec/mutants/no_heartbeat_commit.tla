---- MODULE no_heartbeat_commit ----
(* Liveness mutant: followers never commit on a heartbeat (safe, but they never execute) *)
EXTENDS Liveness
MutFollowerCommitOK(inst, b) == FALSE
====

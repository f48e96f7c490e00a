---- MODULE leader_lowers_ballot ----
(* Mutant: a replica becomes leader of its old ballot after promising a higher one (Replicant race): its ballot goes down *)
EXTENDS MultiPaxos
MutLeaderGuard(r, b) == TRUE
====

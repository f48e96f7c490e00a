---- MODULE restart_forgets_promise ----
(* Mutant: a restarted acceptor forgets its promised ballot (keeps its log) *)
EXTENDS MultiPaxos
MutRestartBallot(r) == 0
====

---- MODULE restart_forgets_promise ----
(* Mutant: a restarted acceptor forgets its promised ballot (keeps its log) *)
\* MODEL: ci_crash
\* EXPECT: DurableBallotMonotonic
\* OVERRIDE: RestartBallot <- MutRestartBallot
EXTENDS MultiPaxos
MutRestartBallot(r) == 0
====

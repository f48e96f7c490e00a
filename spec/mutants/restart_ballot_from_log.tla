---- MODULE restart_ballot_from_log ----
(* Mutant: a restarted replica recovers its ballot from the highest ballot in its durable log instead of its durable promise *)
\* MODEL: ci_crash
\* EXPECT: DurableBallotMonotonic
\* OVERRIDE: RestartBallot <- MutRestartBallot
EXTENDS MultiPaxos
MutRestartBallot(r) == LET D == Durable(r) IN Max({0} \cup {D.log[s].bal : s \in DOMAIN D.log})
====

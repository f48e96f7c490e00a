---- MODULE reply_before_durable ----
(* Mutant: promises and acceptances leave before the write they depend on is durable *)
\* MODEL: ci_crash
\* EXPECT: AcceptedBelowPromise
\* OVERRIDE: HoldUntilDurable <- MutHoldUntilDurable
EXTENDS MultiPaxos
MutHoldUntilDurable == FALSE
====

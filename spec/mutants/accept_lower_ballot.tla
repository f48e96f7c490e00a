---- MODULE accept_lower_ballot ----
(* Mutant: an acceptor accepts an Accept of a ballot lower than its promise *)
\* MODEL: ci_small
\* EXPECT: CommittedSurvivesElection
\* OVERRIDE: AcceptOK <- MutAcceptOK
EXTENDS MultiPaxos
MutAcceptOK(r, b) == TRUE
====

---- MODULE accept_lower_ballot ----
(* Mutant: an acceptor accepts an Accept of a ballot lower than its promise *)
EXTENDS MultiPaxos
MutAcceptOK(r, b) == TRUE
====

---- MODULE commit_without_majority ----
(* Mutant: the leader commits a slot on its own vote, without a majority *)
EXTENDS MultiPaxos
MutCommitQuorum(S) == TRUE
====

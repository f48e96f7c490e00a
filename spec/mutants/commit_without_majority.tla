---- MODULE commit_without_majority ----
(* Mutant: the leader commits a slot on its own vote, without a majority *)
\* MODEL: ci_small
\* EXPECT: CommittedIsChosen
\* OVERRIDE: CommitQuorum <- MutCommitQuorum
EXTENDS MultiPaxos
MutCommitQuorum(S) == TRUE
====

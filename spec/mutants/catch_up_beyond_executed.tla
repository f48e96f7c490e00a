---- MODULE catch_up_beyond_executed ----
(* Mutant: a leader's catch-up carries instances up to the end of its log, not only up to its last executed: the follower stores instances the leader merely accepted (not yet chosen) as committed *)
\* MODEL: large_five
\* EXPECT: CommittedIsChosen
\* OVERRIDE: CatchUpTop <- MutCatchUpTop
EXTENDS MultiPaxos
MutCatchUpTop(r) == LastIndex(r)
====

---- MODULE gc_leader_collects ----
(* Mutant: a leader due for a collection collects under its own grant without handing off leadership *)
\* MODEL: ci_gc
\* EXPECT: GcCollectorNotLeader
\* OVERRIDE: LeaderCollectsInPlace <- MutLeaderCollectsInPlace
EXTENDS MultiPaxos
MutLeaderCollectsInPlace == TRUE
====

---- MODULE gc_budget_exceeded ----
(* Mutant: the leader grants while n - majority + 1 replicas may collect: one grant beyond the budget *)
\* MODEL: ci_gc
\* EXPECT: GcLeaderWithinBudget
\* OVERRIDE: GcBudget <- MutGcBudget
EXTENDS MultiPaxos
MutGcBudget == Cardinality(Replicas) - MajoritySize + 1
====

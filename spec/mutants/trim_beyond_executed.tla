---- MODULE trim_beyond_executed ----
(* Mutant: a replica trims beyond the global (and its own) last executed: instances not yet executed anywhere *)
\* MODEL: large_trim
\* EXPECT: TrimmedExecuted
\* OVERRIDE: TrimLimit <- MutTrimLimit
EXTENDS MultiPaxos
MutTrimLimit(r) == LastIndex(r)
====

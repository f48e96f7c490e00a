---- MODULE trim_beyond_executed ----
(* Mutant: a replica trims beyond the global (and its own) last executed: instances not yet executed anywhere *)
EXTENDS MultiPaxos
MutTrimLimit(r) == LastIndex(r)
====

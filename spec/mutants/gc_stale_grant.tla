---- MODULE gc_stale_grant ----
(* Mutant: a replica collects under a grant of a ballot it has left (as the core does with a grant held through an old leader's grace): a later leader it promised does not count it *)
\* MODEL: ci_gc
\* EXPECT: GcCollectorsCounted
\* OVERRIDE: GrantCurrent <- MutGrantCurrent
EXTENDS MultiPaxos
MutGrantCurrent(r) == TRUE
====

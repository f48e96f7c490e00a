---- MODULE no_merge ----
(* Mutant: the new leader ignores the promised logs (keeps its own instance or fills a no-op) *)
\* MODEL: ci_small
\* EXPECT: CommittedSurvivesElection
\* OVERRIDE: MergeEntry <- MutMergeEntry
EXTENDS MultiPaxos
MutMergeEntry(own, E, b) == IF own # Empty THEN [own EXCEPT !.bal = b] ELSE [bal |-> b, val |-> Noop, com |-> FALSE]
====

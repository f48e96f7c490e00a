---- MODULE noop_fill_committed ----
(* Mutant: a new leader fills a gap below its merged top with a no-op already marked committed *)
\* MODEL: ci_gap
\* EXPECT: CommittedIsChosen
\* OVERRIDE: MergeEntry <- MutMergeEntry
EXTENDS MultiPaxos
MutMergeEntry(own, E, b) ==
    IF \E e \in E : e.com
    THEN [bal |-> b, val |-> (CHOOSE e \in E : e.com).val, com |-> TRUE]
    ELSE IF E # {}
    THEN LET e == CHOOSE e \in E : \A f \in E : f.bal <= e.bal
         IN  [bal |-> b, val |-> e.val, com |-> FALSE]
    ELSE [bal |-> b, val |-> Noop, com |-> TRUE]
====

---- MODULE merge_marks_committed ----
(* Mutant: a new leader takes a value it finds in a promise for chosen and marks it committed *)
\* MODEL: ci_small
\* EXPECT: CommittedIsChosen
\* OVERRIDE: MergeEntry <- MutMergeEntry
EXTENDS MultiPaxos
MutMergeEntry(own, E, b) ==
    IF E # {}
    THEN LET e == CHOOSE e \in E : \A f \in E : f.bal <= e.bal
         IN  [bal |-> b, val |-> e.val, com |-> TRUE]
    ELSE [bal |-> b, val |-> Noop, com |-> FALSE]
====

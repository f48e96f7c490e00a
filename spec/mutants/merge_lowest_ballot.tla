---- MODULE merge_lowest_ballot ----
(* Mutant: the merge takes, of the uncommitted instances promised for a slot, the one of the LOWEST ballot *)
\* MODEL: ci_three_ballots
\* EXPECT: CommittedSurvivesElection
\* OVERRIDE: MergeEntry <- MutMergeEntry
EXTENDS MultiPaxos
MutMergeEntry(own, E, b) ==
    IF \E e \in E : e.com
    THEN [bal |-> b, val |-> (CHOOSE e \in E : e.com).val, com |-> TRUE]
    ELSE IF E # {}
    THEN LET e == CHOOSE e \in E : \A f \in E : e.bal <= f.bal
         IN  [bal |-> b, val |-> e.val, com |-> FALSE]
    ELSE [bal |-> b, val |-> Noop, com |-> FALSE]
====

---- MODULE handoff_promise_not_adopted ----
(* Mutant: a leader handing off sends its promise of the target's ballot without adopting that ballot: it keeps leading at its own, and commits there what the new leader's merge never saw *)
\* MODEL: ci_gc_handoff
\* EXPECT: CommittedSurvivesElection
\* OVERRIDE: HandOffAdopts <- MutHandOffAdopts
EXTENDS MultiPaxos
MutHandOffAdopts == FALSE
====

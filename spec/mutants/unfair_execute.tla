---- MODULE unfair_execute ----
(* Liveness mutant: the fair spec without weak fairness on Execute (a replica may hold committed slots unexecuted forever) *)
\* MODEL: liveness_stable
\* EXPECT: EventuallyAllExecuted
\* OVERRIDE: ExecuteFairness <- MutExecuteFairness
EXTENDS Liveness
MutExecuteFairness == TRUE
====

---- MODULE execute_uncommitted ----
(* Mutant: a replica executes the instance of its next slot as soon as it holds one, committed or not *)
\* MODEL: ci_small
\* EXPECT: ExecutedIsChosen
\* OVERRIDE: ExecuteOK <- MutExecuteOK
EXTENDS MultiPaxos
MutExecuteOK(inst) == TRUE
====

---- MODULE install_trims_before_snapshot ----
(* Mutant: installing a snapshot writes the log trimmed to it, but not the snapshot: a crash after that write restarts with the log cut above what its snapshot executed (found only with asynchronous persistence and catch-up: large_persist_catchup, large_five) *)
\* MODEL: large_persist_catchup
\* EXPECT: TrimmedExecuted
\* OVERRIDE: InstallDur <- MutInstallDur
EXTENDS MultiPaxos
MutInstallDur(r) == [DurNext(r) EXCEPT !.snap = LastView(r).snap]
====

---- MODULE install_keeps_sessions ----
(* Mutant: a replica that installs a snapshot keeps its own, older session table (the simulator's injected bug stale-sessions-on-install) *)
\* MODEL: large_trim
\* EXPECT: ExecutedPrefixesAgree
\* OVERRIDE: InstalledSessions <- MutInstalledSessions
EXTENDS MultiPaxos
MutInstalledSessions(r, sn) == sessions[r]
====

---- MODULE install_forgets_sessions ----
(* Mutant: a replica that installs a snapshot starts with an empty session table: its state differs from the snapshot it installed, and a retried command executed before the snapshot would execute again *)
\* MODEL: large_trim
\* EXPECT: ExecutedPrefixesAgree
\* OVERRIDE: InstalledSessions <- MutInstalledSessions
EXTENDS MultiPaxos
MutInstalledSessions(r, sn) == NoSessions
====

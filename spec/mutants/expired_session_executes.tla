---- MODULE expired_session_executes ----
(* Mutant: a request of a client whose session was evicted is applied as a new client's (no expiry): a delayed original of a request executed before the eviction executes again *)
\* MODEL: ci_sessions
\* EXPECT: AtMostOnce
\* OVERRIDE: ExpiredApplies <- MutExpiredApplies
EXTENDS MultiPaxos
MutExpiredApplies(ss, c) == Assigned(ss, c)
====

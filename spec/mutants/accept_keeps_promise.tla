---- MODULE accept_keeps_promise ----
(* Mutant: an acceptor accepts a higher ballot than its promise without raising the promise *)
\* MODEL: ci_small
\* EXPECT: AcceptedBelowPromise
\* OVERRIDE: PromiseAfterAccept <- MutPromiseAfterAccept
EXTENDS MultiPaxos
MutPromiseAfterAccept(r, b) == ballot[r]
====

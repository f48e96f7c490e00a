---- MODULE unfair_execute ----
(* Liveness mutant: the fair spec without weak fairness on Execute (a replica may hold committed slots unexecuted forever) *)
EXTENDS Liveness
UnfairSpec ==
    Init /\ [][LNext]_vars
    /\ ElectionFairness /\ ReplicationFairness /\ HeartbeatFairness
    /\ CatchUpFairness /\ TrimFairness /\ PersistFairness
====

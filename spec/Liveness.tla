------------------------------ MODULE Liveness ------------------------------
(***************************************************************************)
(* Liveness of stutter's MultiPaxos under fairness                        *)
(* (docs/spec-sessions-liveness.md,                                       *)
(* "Liveness").  MultiPaxos.tla is left untouched: this module restricts  *)
(* its Next, adds fairness on the progress actions by name, and states    *)
(* the temporal properties.  It refers to the variables only through      *)
(* `vars`, `Init`, `Next` and the few variables its properties read       *)
(* (role, ballot, log, lastExecuted, exec, chosen, owner, msgs).          *)
(*                                                                         *)
(* ASSUMPTIONS.  Consensus cannot be live in an asynchronous system with  *)
(* faults (FLP), and Paxos in particular can duel forever.  What is       *)
(* proved here is liveness once the system behaves, which the fair spec  *)
(* LSpec states explicitly:                                               *)
(*                                                                         *)
(*  A1 No faults: the liveness models set MaxCrashes = 0 and ModelDrop =  *)
(*     FALSE (checked by the ASSUME below).  Messages are never lost,     *)
(*     though they may still be delayed, reordered and duplicated.        *)
(*  A2 Elections stop: only the replicas in Electors may start an         *)
(*     election (LNext).  Electors = {r1} is the classic stable-leader    *)
(*     assumption (the other replicas' election timers never fire);       *)
(*     Electors = Replicas lets every replica compete, and elections     *)
(*     still stop because ballots are finite (1..MaxBallot): this is     *)
(*     "eventually a stable leader", with the last ballot's owner as that *)
(*     leader.  Neither is a claim about real timers.  CI checks          *)
(*     Electors = {r1} (models/liveness_stable.cfg); with competing       *)
(*     Electors a lagging follower needs catch-up (ModelCatchUp) after a  *)
(*     leader change, and that model is too large for CI                  *)
(*     (docs/spec-sessions-liveness.md).                                  *)
(*  A3 Fairness: a replica that can make progress eventually does.  Weak  *)
(*     fairness, per replica, on every step that delivers or reacts to a *)
(*     message (HandlePrepare, HandleAccept, HandleHeartbeat; with       *)
(*     ModelCatchUp HandleCatchUp and InstallSnapshot; with ModelTrim     *)
(*     HandleHeartbeatReply), on the leader's steps (BecomeLeader,       *)
(*     HandleAccepted, SendHeartbeat, SendCatchUp), on Persist (with      *)
(*     ModelPersist),                                                     *)
(*     on Execute, and on StartElection of the Electors (an election      *)
(*     timer fires while there is no leader).  Fairness on "some message  *)
(*     of this kind" is enough, rather than per message, because a        *)
(*     delivery counts only if it changes the state (<<A>>_vars) and     *)
(*     such changes cannot repeat forever: TLC checks that.  WF suffices  *)
(*     (no SF needed): every one of these actions, once enabled, stays    *)
(*     enabled until taken or until a higher ballot makes it moot.        *)
(*     Propose, StepDown, Trim and the faults get no fairness: clients    *)
(*     need not send anything, and nothing below depends on stepping     *)
(*     down or trimming.                                                  *)
(***************************************************************************)
EXTENDS MultiPaxos

CONSTANT Electors   \* replicas that may start elections (A2)

ASSUME /\ Electors \subseteq Replicas /\ Electors # {}
       /\ MaxCrashes = 0 /\ ModelDrop = FALSE            \* A1
       /\ ~GcCoordination   \* coordination is not part of the liveness models
       /\ ~PreVote          \* nor is pre-vote (the election timer is StartElection)

\* A2: a step may take a fresh ballot only for an Elector.  Stated on the
\* ballot owners so that it holds for any action of Next.
ElectionsByElectors ==
    \A b \in Ballots : owner'[b] # owner[b] => owner'[b] \in Electors

LNext == Next /\ ElectionsByElectors

\* A3, split by action so that mutants can drop one part.  Parts that
\* belong to a feature the model leaves out quantify over the empty set
\* (no work for TLC).
On(flag) == IF flag THEN Replicas ELSE {}

\* Each fair action leaves the coordination and pre-vote state (constant
\* here) as it is: the protocol's actions do not name them, and TLC's
\* ENABLED needs every variable determined.
ElectionFairness ==
    /\ \A r \in Electors : WF_vars(StartElection(r) /\ UNCHANGED <<gc, pv>>)
    /\ \A r \in Replicas :
         /\ WF_vars(\E m \in msgs : HandlePrepare(r, m) /\ UNCHANGED <<gc, pv>>)
         /\ WF_vars(BecomeLeader(r) /\ UNCHANGED <<gc, pv>>)
ReplicationFairness ==
    \A r \in Replicas :
       /\ WF_vars(\E m \in msgs : HandleAccept(r, m) /\ UNCHANGED <<gc, pv>>)
       /\ WF_vars(HandleAccepted(r) /\ UNCHANGED <<gc, pv>>)
ExecuteFairness == \A r \in Replicas : WF_vars(Execute(r) /\ UNCHANGED <<gc, pv>>)
HeartbeatFairness ==
    \A r \in Replicas :
       /\ WF_vars(SendHeartbeat(r) /\ UNCHANGED <<gc, pv>>)
       /\ WF_vars(\E m \in msgs : HandleHeartbeat(r, m) /\ UNCHANGED <<gc, pv>>)
CatchUpFairness ==
    \A r \in On(ModelCatchUp) :
       /\ WF_vars(SendCatchUp(r) /\ UNCHANGED <<gc, pv>>)
       /\ WF_vars(\E m \in msgs : HandleCatchUp(r, m) /\ UNCHANGED <<gc, pv>>)
       /\ WF_vars(\E m \in msgs : InstallSnapshot(r, m) /\ UNCHANGED <<gc, pv>>)
TrimFairness == \A r \in On(ModelTrim) : WF_vars(\E m \in msgs : HandleHeartbeatReply(r, m) /\ UNCHANGED <<gc, pv>>)
PersistFairness == \A r \in On(ModelPersist) : WF_vars(Persist(r) /\ UNCHANGED <<gc, pv>>)

Fairness ==
    /\ ElectionFairness /\ ReplicationFairness /\ ExecuteFairness
    /\ HeartbeatFairness /\ CatchUpFairness /\ TrimFairness /\ PersistFairness

LSpec == Init /\ [][LNext]_vars /\ Fairness

(***************************************************************************)
(* Properties.  Few temporal formulas on purpose: TLC checks each         *)
(* conjunct of the (negated) property as a separate branch, with all the *)
(* fairness conditions in each, so a leads-to quantified over replicas,  *)
(* slots, ballots and values multiplies the checking time.               *)
(***************************************************************************)
\* Every replica executed v in slot s.
ExecutedEverywhere(s, v) ==
    \A r \in Replicas : lastExecuted[r] >= s /\ exec[r][s] = v

\* The main property: eventually, for good, some replica is leader and
\* every instance in its log (what it proposed, and what it took over
\* from earlier ballots) has been executed, with that value, by every
\* replica.  A leader that loses its instances, never sends its Accepts,
\* never commits, or followers that never learn the commit, all violate
\* it.  (<>[] rather than a leads-to per proposal because the model has
\* finitely many slots, so proposals stop.)
EventuallyAllExecuted ==
    <>[](\E l \in Replicas :
           /\ role[l] = "Leader"
           /\ \A s \in DOMAIN log[l] : log[l][s] # Empty => ExecutedEverywhere(s, log[l][s].val))

\* Per slot: once a value is chosen in slot s (accepted by a quorum at a
\* leader's ballot and committed by that leader), every replica
\* eventually executes slot s, whichever leader comes next.  That it is
\* the chosen value is safety (Agreement, ExecutedPrefixesAgree).
ChosenExecuted ==
    \A s \in Slots :
       (\E c \in chosen : c.slot = s) ~> (\A r \in Replicas : lastExecuted[r] >= s)

=============================================================================

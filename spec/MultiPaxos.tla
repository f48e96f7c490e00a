---------------------------- MODULE MultiPaxos ----------------------------
(***************************************************************************)
(* stutter's MultiPaxos (docs/protocol.md) at the level of messages and   *)
(* per-replica state.  Action names are the trace event names of          *)
(* docs/trace-format.md.  See docs/spec.md for what is abstracted.        *)
(*                                                                         *)
(* Ballots are integers 1..MaxBallot; each ballot is owned by the single  *)
(* replica that started an election with it (owner), which replaces      *)
(* "round * 256 + id" and keeps the replicas symmetric.                   *)
(*                                                                         *)
(* The network is a set of messages: delivery does not remove a message   *)
(* (duplication), any message may be delivered at any time (reordering)  *)
(* and Drop removes one (loss).                                            *)
(*                                                                         *)
(* Operators marked MUTATION POINT are overridden by spec/mutants/.       *)
(***************************************************************************)
EXTENDS Naturals, Sequences, FiniteSets, TLC

CONSTANTS
    Replicas,      \* set of replica ids (model values, symmetric)
    Clients,       \* set of client ids (model values)
    MaxSeq,        \* client sequence numbers are 1..MaxSeq
    NumSlots,      \* slots are 1..NumSlots
    MaxBallot,     \* ballots are 1..MaxBallot (0 = none)
    MaxCrashes,    \* total number of crashes
    ModelDrop,     \* BOOLEAN: include the Drop action (message loss)
    ModelTrim,     \* BOOLEAN: include Trim and global-last-executed tracking
    ModelCatchUp   \* BOOLEAN: include heartbeat replies and CatchUp

VARIABLES
    ballot,        \* ballot[r]: promised ballot (persisted)
    role,          \* "Follower" | "Candidate" | "Leader" (volatile)
    up,            \* up[r]: FALSE between Crash and Restart
    log,           \* log[r][s]: instance [bal, val, com] (persisted, com volatile)
    lastExecuted,  \* highest executed slot (volatile, rebuilt by re-execution)
    trimmed,       \* highest trimmed slot (persisted, with the snapshot)
    gle,           \* global last executed known to r (volatile)
    peerLE,        \* peerLE[r][p]: last executed of p as reported to leader r
    snap,          \* snap[r]: persisted snapshot [kv, sessions, exec] at trimmed[r]
    kv,            \* kv[r]: the key-value state, as the sequence of applied commands
    sessions,      \* sessions[r][c]: highest seq of client c executed
    exec,          \* exec[r][s]: value executed in slot s (history, for invariants)
    msgs,          \* the network
    owner,         \* owner[b]: replica that started ballot b, or NoOwner
    chosen,        \* history: set of [slot, val, bal] committed by a leader quorum
    crashes        \* number of crashes so far

vars == <<ballot, role, up, log, lastExecuted, trimmed, gle, peerLE, snap,
          kv, sessions, exec, msgs, owner, chosen, crashes>>

Slots    == 1..NumSlots
Ballots  == 1..MaxBallot
Commands == Clients \X (1..MaxSeq)          \* <<client, seq>>
Noop     == <<"noop", 0>>
Values   == Commands \cup {Noop}
NoVal    == <<"none", 0>>
Empty    == [bal |-> 0, val |-> NoVal, com |-> FALSE]  \* no instance in the slot
Entry    == [bal : Ballots, val : Values, com : BOOLEAN]
NoOwner  == "none"
Majority(S) == 2 * Cardinality(S) > Cardinality(Replicas)
Max(S)   == CHOOSE x \in S : \A y \in S : y <= x

\* Messages all have the same fields (TLC compares records of one shape).
Msg(t, f, to, b, s, v, le, g, ents, sn) ==
    [type |-> t, from |-> f, to |-> to, bal |-> b, slot |-> s, val |-> v,
     le |-> le, gle |-> g, entries |-> ents, snap |-> sn]
NoEntries == [s \in Slots |-> Empty]
NoSnap    == [le |-> 0, kv |-> <<>>, sessions |-> [c \in Clients |-> 0], exec |-> <<>>]
Broadcast == "all"

Send(m)  == msgs' = msgs \cup {m}
SendAll(M) == msgs' = msgs \cup M
For(r, m) == m.from # r /\ (m.to = Broadcast \/ m.to = r)

LastIndex(r) == Max({0} \cup {s \in Slots : log[r][s] # Empty})

(***************************************************************************)
(* MUTATION POINTS                                                         *)
(***************************************************************************)
\* An acceptor accepts an Accept at ballot b.
AcceptOK(r, b) == b >= ballot[r]
\* The leader's slot is committed once the acceptors in S acked it.
CommitQuorum(S) == Majority(S)
\* A follower commits, on a heartbeat of ballot b, an instance inst.
FollowerCommitOK(inst, b) == inst.bal = b
\* A replica may become leader of ballot b (its own) when its promises are in.
LeaderGuard(r, b) == role[r] = "Candidate" /\ ballot[r] = b
\* The ballot a new leader of ballot b takes.
LeaderBallot(r, b) == b
\* The ballot a restarted replica comes back with.
RestartBallot(r) == ballot[r]
\* Merge of slot s for a new leader of ballot b: own is the own instance,
\* E the set of instances of slot s in the promises (own included).
MergeEntry(own, E, b) ==
    IF \E e \in E : e.com
    THEN [bal |-> b, val |-> (CHOOSE e \in E : e.com).val, com |-> TRUE]
    ELSE IF E # {}
    THEN LET e == CHOOSE e \in E : \A f \in E : f.bal <= e.bal
         IN  [bal |-> b, val |-> e.val, com |-> FALSE]
    ELSE [bal |-> b, val |-> Noop, com |-> FALSE]          \* gap: no-op
\* How far replica r may trim.
TrimLimit(r) == IF gle[r] < lastExecuted[r] THEN gle[r] ELSE lastExecuted[r]

(***************************************************************************)
Init ==
    /\ ballot = [r \in Replicas |-> 0]
    /\ role = [r \in Replicas |-> "Follower"]
    /\ up = [r \in Replicas |-> TRUE]
    /\ log = [r \in Replicas |-> [s \in Slots |-> Empty]]
    /\ lastExecuted = [r \in Replicas |-> 0]
    /\ trimmed = [r \in Replicas |-> 0]
    /\ gle = [r \in Replicas |-> 0]
    /\ peerLE = [r \in Replicas |-> [p \in Replicas |-> 0]]
    /\ snap = [r \in Replicas |-> NoSnap]
    /\ kv = [r \in Replicas |-> <<>>]
    /\ sessions = [r \in Replicas |-> [c \in Clients |-> 0]]
    /\ exec = [r \in Replicas |-> <<>>]
    /\ msgs = {}
    /\ owner = [b \in Ballots |-> NoOwner]
    /\ chosen = {}
    /\ crashes = 0

(***************************************************************************)
(* Election                                                                *)
(***************************************************************************)
\* Smallest unused ballot above the own one (the id part of real ballots
\* makes them unique; here uniqueness comes from owner).
StartElection(r) ==
    /\ up[r] /\ role[r] # "Leader"
    /\ \E b \in Ballots : b > ballot[r] /\ owner[b] = NoOwner
    /\ LET b == CHOOSE b \in Ballots : b > ballot[r] /\ owner[b] = NoOwner
                   /\ \A c \in Ballots : (c > ballot[r] /\ owner[c] = NoOwner) => b <= c
       IN /\ ballot' = [ballot EXCEPT ![r] = b]
          /\ role' = [role EXCEPT ![r] = "Candidate"]
          /\ owner' = [owner EXCEPT ![b] = r]
          /\ Send(Msg("Prepare", r, Broadcast, b, 0, NoVal, lastExecuted[r], 0, NoEntries, NoSnap))
    /\ UNCHANGED <<up, log, lastExecuted, trimmed, gle, peerLE, snap, kv, sessions, exec, chosen, crashes>>

\* Promise: the instances above the candidate's last executed, and the
\* snapshot if this replica trimmed beyond it.
HandlePrepare(r, m) ==
    /\ up[r] /\ m.type = "Prepare" /\ For(r, m)
    /\ m.bal > ballot[r]
    /\ ballot' = [ballot EXCEPT ![r] = m.bal]
    /\ role' = [role EXCEPT ![r] = "Follower"]
    /\ Send(Msg("Promise", r, m.from, m.bal, 0, NoVal, lastExecuted[r], 0,
                [s \in Slots |-> IF s > m.le THEN log[r][s] ELSE Empty],
                IF trimmed[r] > m.le THEN snap[r] ELSE NoSnap))
    /\ UNCHANGED <<up, log, lastExecuted, trimmed, gle, peerLE, snap, kv, sessions, exec, owner, chosen, crashes>>

\* Promises stay in msgs; BecomeLeader reads all that arrived (HandlePromise
\* of the implementation only records them: a stutter here).
Promises(r, b) == {m \in msgs : m.type = "Promise" /\ m.to = r /\ m.bal = b}

BecomeLeader(r) ==
    /\ up[r]
    /\ \E b \in Ballots :
       /\ owner[b] = r
       /\ LeaderGuard(r, b)
       /\ LET P     == Promises(r, b)
              from  == {p.from : p \in P} \cup {r}
              \* newest snapshot among the promises, if ahead of our state
              sn    == IF \E p \in P : p.snap.le > lastExecuted[r]
                       THEN (CHOOSE p \in P : \A q \in P : q.snap.le <= p.snap.le).snap
                       ELSE [le |-> lastExecuted[r], kv |-> kv[r], sessions |-> sessions[r],
                             exec |-> exec[r]]
              le    == sn.le
              top   == Max({0} \cup {s \in Slots : log[r][s] # Empty}
                               \cup {s \in Slots : \E p \in P : p.entries[s] # Empty})
              E(s)  == {p.entries[s] : p \in {p \in P : p.entries[s] # Empty}}
                       \cup (IF log[r][s] # Empty THEN {log[r][s]} ELSE {})
              inst  == le > lastExecuted[r]   \* a snapshot is installed
              newlog == [s \in Slots |->
                          IF s <= le THEN (IF inst THEN Empty ELSE log[r][s])
                          ELSE IF s <= top THEN MergeEntry(log[r][s], E(s), LeaderBallot(r, b))
                          ELSE Empty]
          IN /\ Majority(from)
             /\ ballot' = [ballot EXCEPT ![r] = LeaderBallot(r, b)]
             /\ role' = [role EXCEPT ![r] = "Leader"]
             /\ log' = [log EXCEPT ![r] = newlog]
             /\ lastExecuted' = [lastExecuted EXCEPT ![r] = le]
             /\ trimmed' = [trimmed EXCEPT ![r] = IF inst THEN le ELSE @]
             /\ snap' = [snap EXCEPT ![r] = IF inst THEN sn ELSE @]
             /\ kv' = [kv EXCEPT ![r] = sn.kv]
             /\ sessions' = [sessions EXCEPT ![r] = sn.sessions]
             /\ exec' = [exec EXCEPT ![r] = sn.exec]
             /\ peerLE' = [peerLE EXCEPT ![r] = [p \in Replicas |-> 0]]
             /\ SendAll({Msg("Accept", r, Broadcast, LeaderBallot(r, b), s, newlog[s].val,
                             0, 0, NoEntries, NoSnap) : s \in {s \in Slots : le < s /\ s <= top}})
    /\ UNCHANGED <<up, gle, owner, chosen, crashes>>

\* A leader or candidate that sees a message with a higher ballot steps
\* down (a rejection carries the acceptor's ballot; any message of the
\* higher ballot's owner does too).
StepDown(r) ==
    /\ up[r] /\ role[r] # "Follower"
    /\ \E m \in msgs :
       /\ For(r, m) /\ m.bal > ballot[r]
       /\ ballot' = [ballot EXCEPT ![r] = m.bal]
       /\ role' = [role EXCEPT ![r] = "Follower"]
    /\ UNCHANGED <<up, log, lastExecuted, trimmed, gle, peerLE, snap, kv, sessions, exec, msgs, owner, chosen, crashes>>

(***************************************************************************)
(* Replication                                                             *)
(***************************************************************************)
Propose(r) ==
    /\ up[r] /\ role[r] = "Leader"
    /\ LastIndex(r) < NumSlots
    /\ \E c \in Commands :
       LET s == LastIndex(r) + 1 IN
       /\ log' = [log EXCEPT ![r][s] = [bal |-> ballot[r], val |-> c, com |-> FALSE]]
       /\ Send(Msg("Accept", r, Broadcast, ballot[r], s, c, 0, 0, NoEntries, NoSnap))
    /\ UNCHANGED <<ballot, role, up, lastExecuted, trimmed, gle, peerLE, snap, kv, sessions, exec, owner, chosen, crashes>>

\* Store the instance unless the slot is committed, executed or trimmed.
HandleAccept(r, m) ==
    /\ up[r] /\ m.type = "Accept" /\ For(r, m)
    /\ AcceptOK(r, m.bal)
    /\ ballot' = [ballot EXCEPT ![r] = IF m.bal > @ THEN m.bal ELSE @]
    /\ role' = [role EXCEPT ![r] = IF m.bal > ballot[r] THEN "Follower" ELSE @]
    /\ log' = [log EXCEPT ![r][m.slot] =
                 IF @.com \/ m.slot <= lastExecuted[r] \/ m.slot <= trimmed[r] THEN @
                 ELSE [bal |-> m.bal, val |-> m.val, com |-> FALSE]]
    /\ Send(Msg("Accepted", r, m.from, m.bal, m.slot, NoVal, 0, 0, NoEntries, NoSnap))
    /\ UNCHANGED <<up, lastExecuted, trimmed, gle, peerLE, snap, kv, sessions, exec, owner, chosen, crashes>>

\* The leader commits a slot once a quorum (its own persisted vote
\* included) accepted it at its ballot.
HandleAccepted(r) ==
    /\ up[r] /\ role[r] = "Leader"
    /\ \E s \in Slots :
       /\ log[r][s] # Empty /\ ~log[r][s].com /\ s > lastExecuted[r]
       /\ LET acks == {m.from : m \in {m \in msgs : m.type = "Accepted" /\ m.to = r
                                        /\ m.bal = ballot[r] /\ m.slot = s}}
                      \cup (IF log[r][s].bal = ballot[r] THEN {r} ELSE {})
          IN /\ acks # {r} \/ CommitQuorum(acks)  \* something new to count
             /\ CommitQuorum(acks)
       /\ log' = [log EXCEPT ![r][s].com = TRUE]
       /\ chosen' = chosen \cup {[slot |-> s, val |-> log[r][s].val, bal |-> ballot[r]]}
    /\ UNCHANGED <<ballot, role, up, lastExecuted, trimmed, gle, peerLE, snap, kv, sessions, exec, msgs, owner, crashes>>

\* Apply the next committed slot; at most once per (client, seq).
Execute(r) ==
    /\ up[r]
    /\ lastExecuted[r] < NumSlots
    /\ LET s == lastExecuted[r] + 1
           v == log[r][s].val
       IN /\ log[r][s] # Empty /\ log[r][s].com
          /\ lastExecuted' = [lastExecuted EXCEPT ![r] = s]
          /\ exec' = [exec EXCEPT ![r] = Append(@, v)]
          /\ IF v # Noop /\ v[2] > sessions[r][v[1]]
             THEN /\ kv' = [kv EXCEPT ![r] = Append(@, v)]
                  /\ sessions' = [sessions EXCEPT ![r][v[1]] = v[2]]
             ELSE UNCHANGED <<kv, sessions>>
    /\ UNCHANGED <<ballot, role, up, log, trimmed, gle, peerLE, snap, msgs, owner, chosen, crashes>>


(***************************************************************************)
(* Heartbeats, commit on followers, trimming, catch-up                    *)
(***************************************************************************)
SendHeartbeat(r) ==
    /\ up[r] /\ role[r] = "Leader"
    /\ Send(Msg("Heartbeat", r, Broadcast, ballot[r], 0, NoVal, lastExecuted[r], gle[r],
                NoEntries, NoSnap))
    /\ UNCHANGED <<ballot, role, up, log, lastExecuted, trimmed, gle, peerLE, snap, kv, sessions, exec, owner, chosen, crashes>>

\* Slots a follower commits on heartbeat m: last_executed+1 .. m.le in order,
\* while the instance exists and FollowerCommitOK (its ballot is m's).
HBCommits(r, m) ==
    {s \in Slots : /\ lastExecuted[r] < s /\ s <= m.le
                   /\ \A t \in (lastExecuted[r] + 1)..s :
                        log[r][t] # Empty /\ FollowerCommitOK(log[r][t], m.bal)}

HandleHeartbeat(r, m) ==
    /\ up[r] /\ m.type = "Heartbeat" /\ For(r, m)
    /\ m.bal >= ballot[r]
    /\ ballot' = [ballot EXCEPT ![r] = m.bal]
    /\ role' = [role EXCEPT ![r] = "Follower"]
    /\ log' = [log EXCEPT ![r] = [s \in Slots |->
                  IF s \in HBCommits(r, m) THEN [@[s] EXCEPT !.com = TRUE] ELSE @[s]]]
    /\ gle' = [gle EXCEPT ![r] = m.gle]
    /\ IF ModelTrim \/ ModelCatchUp
       THEN Send(Msg("HeartbeatReply", r, m.from, m.bal, 0, NoVal, lastExecuted[r], 0, NoEntries, NoSnap))
       ELSE UNCHANGED msgs
    /\ UNCHANGED <<up, lastExecuted, trimmed, peerLE, snap, kv, sessions, exec, owner, chosen, crashes>>

Min2(a, b) == IF a < b THEN a ELSE b

\* The leader records the follower's progress, recomputes the global last
\* executed and, if the follower is behind, sends it a CatchUp with the
\* committed instances it lacks, or its snapshot if they are trimmed
\* (SendCatchUp of the trace, folded into this step).
HandleHeartbeatReply(r, m) ==
    /\ up[r] /\ role[r] = "Leader" /\ m.type = "HeartbeatReply" /\ For(r, m)
    /\ m.bal = ballot[r]
    /\ ModelTrim \/ (ModelCatchUp /\ m.le < lastExecuted[r])
    /\ LET pl == IF ~ModelTrim THEN peerLE[r] ELSE [peerLE[r] EXCEPT ![m.from] = IF m.le > @ THEN m.le ELSE @]
       IN /\ peerLE' = [peerLE EXCEPT ![r] = pl]
          /\ gle' = [gle EXCEPT ![r] =
                 CHOOSE x \in {lastExecuted[r]} \cup {pl[p] : p \in Replicas \ {r}} :
                   x <= lastExecuted[r] /\ \A p \in Replicas \ {r} : x <= pl[p]]
    /\ IF ModelCatchUp /\ m.le < lastExecuted[r]
       THEN Send(Msg("CatchUp", r, m.from, ballot[r], 0, NoVal, lastExecuted[r], 0,
                     [s \in Slots |-> IF m.le < s /\ s <= lastExecuted[r] /\ s > trimmed[r]
                                      THEN log[r][s] ELSE Empty],
                     IF m.le < trimmed[r] THEN snap[r] ELSE NoSnap))
       ELSE UNCHANGED msgs
    /\ UNCHANGED <<ballot, role, up, log, lastExecuted, trimmed, snap, kv, sessions, exec, owner, chosen, crashes>>

\* A follower stores the chosen instances of a CatchUp as committed, after
\* installing the snapshot if it carries one ahead of its state
\* (InstallSnapshot of the trace, folded into this step).
HandleCatchUp(r, m) ==
    /\ up[r] /\ m.type = "CatchUp" /\ For(r, m)
    /\ m.bal >= ballot[r]
    /\ ballot' = [ballot EXCEPT ![r] = m.bal]
    /\ role' = [role EXCEPT ![r] = "Follower"]
    /\ LET inst == m.snap.le > lastExecuted[r]
           le   == IF inst THEN m.snap.le ELSE lastExecuted[r]
       IN /\ log' = [log EXCEPT ![r] = [s \in Slots |->
                       IF inst /\ s <= le THEN Empty
                       ELSE IF s > le /\ m.entries[s] # Empty /\ ~@[s].com
                       THEN [m.entries[s] EXCEPT !.com = TRUE]
                       ELSE @[s]]]
          /\ IF inst
             THEN /\ lastExecuted' = [lastExecuted EXCEPT ![r] = le]
                  /\ trimmed' = [trimmed EXCEPT ![r] = le]
                  /\ snap' = [snap EXCEPT ![r] = m.snap]
                  /\ kv' = [kv EXCEPT ![r] = m.snap.kv]
                  /\ sessions' = [sessions EXCEPT ![r] = m.snap.sessions]
                  /\ exec' = [exec EXCEPT ![r] = m.snap.exec]
             ELSE UNCHANGED <<lastExecuted, trimmed, snap, kv, sessions, exec>>
    /\ UNCHANGED <<up, gle, peerLE, msgs, owner, chosen, crashes>>

\* Persist a snapshot at last executed, then drop the log up to TrimLimit.
Trim(r) ==
    /\ ModelTrim /\ up[r]
    /\ TrimLimit(r) > trimmed[r]
    /\ trimmed' = [trimmed EXCEPT ![r] = TrimLimit(r)]
    /\ log' = [log EXCEPT ![r] = [s \in Slots |-> IF s <= TrimLimit(r) THEN Empty ELSE @[s]]]
    /\ snap' = [snap EXCEPT ![r] = [le |-> lastExecuted[r], kv |-> kv[r],
                                    sessions |-> sessions[r], exec |-> exec[r]]]
    /\ UNCHANGED <<ballot, role, up, lastExecuted, gle, peerLE, kv, sessions, exec, msgs, owner, chosen, crashes>>

(***************************************************************************)
(* Faults                                                                  *)
(***************************************************************************)
Crash(r) ==
    /\ up[r] /\ crashes < MaxCrashes
    /\ up' = [up EXCEPT ![r] = FALSE]
    /\ crashes' = crashes + 1
    /\ UNCHANGED <<ballot, role, log, lastExecuted, trimmed, gle, peerLE, snap, kv, sessions, exec, msgs, owner, chosen>>

\* Persisted: ballot, log instances (without commit marks), snapshot and
\* trimmed.  Volatile state is rebuilt from the snapshot.
Restart(r) ==
    /\ ~up[r]
    /\ up' = [up EXCEPT ![r] = TRUE]
    /\ ballot' = [ballot EXCEPT ![r] = RestartBallot(r)]
    /\ role' = [role EXCEPT ![r] = "Follower"]
    /\ log' = [log EXCEPT ![r] = [s \in Slots |-> [@[s] EXCEPT !.com = FALSE]]]
    /\ lastExecuted' = [lastExecuted EXCEPT ![r] = snap[r].le]
    /\ kv' = [kv EXCEPT ![r] = snap[r].kv]
    /\ sessions' = [sessions EXCEPT ![r] = snap[r].sessions]
    /\ exec' = [exec EXCEPT ![r] = snap[r].exec]
    /\ gle' = [gle EXCEPT ![r] = 0]
    /\ peerLE' = [peerLE EXCEPT ![r] = [p \in Replicas |-> 0]]
    /\ UNCHANGED <<trimmed, snap, msgs, owner, chosen, crashes>>

Drop ==
    /\ ModelDrop
    /\ \E m \in msgs : msgs' = msgs \ {m}
    /\ UNCHANGED <<ballot, role, up, log, lastExecuted, trimmed, gle, peerLE, snap, kv, sessions, exec, owner, chosen, crashes>>

(***************************************************************************)
Next ==
    \/ \E r \in Replicas :
        \/ StartElection(r) \/ BecomeLeader(r) \/ StepDown(r)
        \/ Propose(r) \/ HandleAccepted(r) \/ Execute(r)
        \/ SendHeartbeat(r) \/ Trim(r) \/ Crash(r) \/ Restart(r)
        \/ \E m \in msgs :
            \/ HandlePrepare(r, m) \/ HandleAccept(r, m) \/ HandleHeartbeat(r, m)
            \/ HandleHeartbeatReply(r, m) \/ HandleCatchUp(r, m)
    \/ Drop

Spec == Init /\ [][Next]_vars

Symmetry == Permutations(Replicas)

(***************************************************************************)
(* Invariants                                                              *)
(***************************************************************************)
Roles == {"Follower", "Candidate", "Leader"}
Snaps == [le : 0..NumSlots, kv : Seq(Commands), sessions : [Clients -> 0..MaxSeq],
          exec : Seq(Values)]

TypeOK ==
    /\ ballot \in [Replicas -> 0..MaxBallot]
    /\ role \in [Replicas -> Roles]
    /\ up \in [Replicas -> BOOLEAN]
    /\ log \in [Replicas -> [Slots -> Entry \cup {Empty}]]
    /\ lastExecuted \in [Replicas -> 0..NumSlots]
    /\ trimmed \in [Replicas -> 0..NumSlots]
    /\ gle \in [Replicas -> 0..NumSlots]
    /\ \A r \in Replicas : Len(exec[r]) = lastExecuted[r]
    /\ sessions \in [Replicas -> [Clients -> 0..MaxSeq]]
    /\ owner \in [Ballots -> Replicas \cup {NoOwner}]
    /\ crashes \in 0..MaxCrashes

\* At most one value is committed per slot, across replicas and over time.
Agreement ==
    /\ \A c1, c2 \in chosen : c1.slot = c2.slot => c1.val = c2.val
    /\ \A r1, r2 \in Replicas, s \in Slots :
         (log[r1][s].com /\ log[r2][s].com) => log[r1][s].val = log[r2][s].val
    /\ \A r \in Replicas, s \in Slots, c \in chosen :
         (log[r][s].com /\ c.slot = s) => log[r][s].val = c.val

\* Same slot, same value; same last executed, same key-value state.
ExecutedPrefixesAgree ==
    /\ \A r1, r2 \in Replicas :
       /\ \A s \in 1..Min2(lastExecuted[r1], lastExecuted[r2]) : exec[r1][s] = exec[r2][s]
       /\ lastExecuted[r1] = lastExecuted[r2] => kv[r1] = kv[r2] /\ sessions[r1] = sessions[r2]
    /\ \A r \in Replicas, c \in chosen : c.slot <= lastExecuted[r] => exec[r][c.slot] = c.val

\* Anything chosen at ballot b is in the log (or the executed prefix) of
\* every leader of a ballot >= b.
CommittedSurvivesElection ==
    \A r \in Replicas, c \in chosen :
       (up[r] /\ role[r] = "Leader" /\ c.bal <= ballot[r]) =>
          \/ c.slot <= lastExecuted[r] /\ exec[r][c.slot] = c.val
          \/ log[r][c.slot] # Empty /\ log[r][c.slot].val = c.val

\* A (client, seq) is applied at most once to the key-value state.
AtMostOnce ==
    \A r \in Replicas : \A i, j \in DOMAIN kv[r] : i # j => kv[r][i] # kv[r][j]

\* The log never drops an instance that is not executed.
TrimmedExecuted == \A r \in Replicas : trimmed[r] <= lastExecuted[r]

BallotMonotonic == [][\A r \in Replicas : ballot'[r] >= ballot[r]]_vars

=============================================================================

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
(* With ModelPersist, persistence is asynchronous as in the code: a step  *)
(* updates the volatile state at once, queues its durable effects in      *)
(* pend with the messages that depend on them, and Persist makes a prefix *)
(* of the queue durable and sends its messages; a crash keeps dur and any *)
(* prefix of pend (written but not yet acknowledged).                     *)
(*                                                                         *)
(* Logs, and the votes, are kept as windows: functions over the interval *)
(* of slots still held (see Windows), so that a step's cost does not grow *)
(* with the number of slots a run has used.                              *)
(*                                                                         *)
(* Operators marked MUTATION POINT are overridden by spec/mutants/.       *)
(***************************************************************************)
EXTENDS Naturals, Sequences, FiniteSets, TLC

CONSTANTS
    Replicas,      \* set of replica ids (model values, symmetric)
    Clients,       \* clients registered before the behaviour (model values,
                   \* section Sessions)
    MaxSeq,        \* client sequence numbers are 1..MaxSeq
    NumSlots,      \* slots are 1..NumSlots
    MaxBallot,     \* ballots are 1..MaxBallot (0 = none)
    MaxCrashes,    \* total number of crashes
    ModelDrop,     \* BOOLEAN: include the Drop action (message loss)
    ModelTrim,     \* BOOLEAN: include Trim and global-last-executed tracking
    ModelCatchUp,  \* BOOLEAN: include heartbeat replies and CatchUp
    ModelPersist,  \* BOOLEAN: asynchronous persistence (pend, Persist)
    ModelHeartbeats, \* BOOLEAN: leaders send heartbeats (FALSE: only leaders
                   \* commit and execute)
    ModelExecution, \* BOOLEAN: the Execute step (FALSE with CONSTRAINT
                   \* NoExecution: nothing is executed)
    FineSteps,     \* BOOLEAN: the code's finer steps (see below); FALSE keeps
                   \* exhaustive models small, trace validation needs TRUE
    GcCoordination, \* BOOLEAN: Blade-style GC coordination (section GC coordination)
    MaxGc,         \* number of collections that may fall due in a behaviour
    PreVote,       \* BOOLEAN: pre-vote and leader stickiness (section Pre-vote)
    Partition,     \* BOOLEAN: a bridge partition may cut one follower from a
                   \* settled leader, and leases expire only when the leader is
                   \* unreachable (section Pre-vote)
    HandOffPromise, \* BOOLEAN: a hand-off may carry the old leader's promise of
                   \* the target's ballot (Config::gc_handoff_promise, section
                   \* GC coordination)
    CommitOnAccept, \* BOOLEAN: an Accept carries its leader's last executed,
                   \* which followers commit with (Config::commit_on_accept)
    MaxSessions,   \* bound of the session table (session_limit), 0 = none
                   \* (section Sessions)
    Registrations  \* number of Register requests (nonces 1..Registrations),
                   \* and of ids they assign that clients use (section Sessions)

VARIABLES
    ballot,        \* ballot[r]: promised ballot
    role,          \* "Follower" | "Candidate" | "Leader" (volatile)
    up,            \* up[r]: FALSE between Crash and Restart
    log,           \* log[r]: window of instances [bal, val, com] (com volatile)
    lastExecuted,  \* highest executed slot (volatile, rebuilt by re-execution)
    trimmed,       \* highest trimmed slot (persisted, with the snapshot)
    gle,           \* global last executed known to r (volatile)
    peerLE,        \* peerLE[r][p]: last executed of p as reported to leader r
    snap,          \* snap[r]: snapshot [le, kv, sessions, exec] taken at the last trim
    kv,            \* kv[r]: the key-value state, as the sequence of applied commands
    sessions,      \* sessions[r][c]: highest seq of client c executed
    exec,          \* exec[r][s]: value executed in slot s (history, for invariants)
    msgs,          \* the network
    owner,         \* owner[b]: replica that started ballot b, or NoOwner
    chosen,        \* history: set of [slot, val, bal] committed by a leader quorum
    votes,         \* history: the votes [acc, bal, val] cast, by slot (a window), and more (see Voted)
    crashes,       \* number of crashes so far
    dur,           \* dur[r]: durable state [ballot, log, trimmed, snap] (ModelPersist)
    pend,          \* pend[r]: queued writes, each [dur, out] (ModelPersist)
    gc,            \* GC coordination state (volatile; constant without GcCoordination)
    pv             \* pre-vote state and the partition (constant without PreVote)

vars == <<ballot, role, up, log, lastExecuted, trimmed, gle, peerLE, snap,
          kv, sessions, exec, msgs, owner, chosen, votes, crashes, dur, pend, gc, pv>>

Slots    == 1..NumSlots
Ballots  == 1..MaxBallot                    \* overridden by trace validation
\* Client ids are assigned by the log (section Sessions): RegBase + 0,
\* RegBase + 1, ... (2^63 + k in the code, which TLC's integers do not
\* reach; the trace converter maps 2^63 + k here).  A model's clients are
\* those of Clients, whose Register the log executed before the
\* behaviour starts (model values, so that symmetry applies to them), and
\* the ids the first Registrations Register requests assign.
RegBase  == 1000000
RegIds   == {RegBase + j : j \in 0..(Registrations - 1)}
\* A Register request: seq 0 is reserved for it; n is a nonce that only
\* routes the reply (no session is kept for it).
Register(n) == <<n, 0>>
Commands == ((Clients \cup RegIds) \X (1..MaxSeq))   \* <<client, seq>>
            \cup {Register(n) : n \in 1..Registrations}
Noop     == <<"noop", 0>>
Values   == Commands \cup {Noop}
NoVal    == <<"none", 0>>
Empty    == [bal |-> 0, val |-> NoVal, com |-> FALSE]  \* no instance in the slot
Entry    == [bal : Ballots, val : Values, com : BOOLEAN]
NoOwner  == "none"
Majority(S) == 2 * Cardinality(S) > Cardinality(Replicas)
Max(S)   == CHOOSE x \in S : \A y \in S : y <= x
Min(S)   == CHOOSE x \in S : \A y \in S : x <= y
Max2(a, b) == IF a > b THEN a ELSE b
Min2(a, b) == IF a < b THEN a ELSE b

\* Messages all have the same fields (TLC compares records of one shape).
Msg(t, f, to, b, s, v, le, g, ents, sn) ==
    [type |-> t, from |-> f, to |-> to, bal |-> b, slot |-> s, val |-> v,
     le |-> le, gle |-> g, entries |-> ents, snap |-> sn]
\* The session table (section Sessions): c is in DOMAIN seq while it has a
\* session, seq[c] the highest seq of client c executed (0 after its
\* Register), at[c] the slot that last executed a request of c (kept only
\* with a bound: 0 without, so that unbounded models have the states they
\* had), registered the number of Register requests executed.  At the
\* start the clients of Clients have their session (seq 0).
NoSessions == [seq |-> [c \in Clients |-> 0], at |-> [c \in Clients |-> 0], registered |-> 0]
NoSnap    == [le |-> 0, kv |-> <<>>, sessions |-> NoSessions, exec |-> <<>>]
Broadcast == "all"

Send(m)  == msgs' = msgs \cup {m}
\* With Partition, the link between the leader and the follower of pv.cut
\* is cut: nothing sent on it in either direction is delivered.
NoCut == [leader |-> NoOwner, from |-> NoOwner, bal |-> 0]
Severed(a, b) == Partition /\ pv.cut # NoCut /\ {a, b} = {pv.cut.leader, pv.cut.from}
For(r, m) == m.from # r /\ (m.to = Broadcast \/ m.to = r) /\ ~Severed(m.from, r)

(***************************************************************************)
(* Windows                                                                 *)
(***************************************************************************)
\* A log holds instances only in the slots above its trimmed prefix t, up
\* to its last index: it is a function over the interval (t+1)..last (the
\* empty function if it holds none), and a slot outside holds no instance.
\* Kept so, a replica's state, and the cost of a step, depend on the slots
\* it still holds, not on how many a run has used: trace validation
\* replays runs of thousands of slots, and copies and fingerprints the
\* state at every step.  The instances a message carries are a window too
\* (with gaps of Empty), and so are the votes.
NoLog == [s \in {} |-> Empty]
At(lg, s) == IF s \in DOMAIN lg THEN lg[s] ELSE Empty
\* Lowest and highest slot of a non-empty window f.  TLC enumerates an
\* interval from its low end, so Lo costs one step, and Hi no more.
Lo(f) == CHOOSE x \in DOMAIN f : x - 1 \notin DOMAIN f
Hi(f) == Lo(f) + Cardinality(DOMAIN f) - 1
\* Last slot of log lg holding an instance, or its trimmed prefix t.
LastIndexOf(lg, t) == IF DOMAIN lg = {} THEN t ELSE Hi(lg)
LastIndex(r) == LastIndexOf(log[r], trimmed[r])
\* Log lg with trimmed prefix t and the instance e # Empty in slot s > t.
Put(lg, t, s, e) ==
    IF s \in DOMAIN lg THEN [lg EXCEPT ![s] = e]
    ELSE [x \in (t + 1)..s |-> IF x = s THEN e ELSE At(lg, x)]
\* The instances of lg above slot k (a log with trimmed prefix k).
Above(lg, k) == IF DOMAIN lg = {} \/ Hi(lg) <= k THEN NoLog
                ELSE [x \in (k + 1)..Hi(lg) |-> At(lg, x)]
\* Instances carried by a message: the window of r's log over slots a+1..b.
NoEntries == NoLog
EntriesOf(r, a, b) == IF b <= a THEN NoLog ELSE [x \in (a + 1)..b |-> At(log[r], x)]

\* The executed state of r, as a snapshot carries it.
CurrentSnap(r) == [le |-> lastExecuted[r], kv |-> kv[r], sessions |-> sessions[r], exec |-> exec[r]]
\* The session table a replica takes from a snapshot it installs (from a
\* promise, a catch-up or its own disk on restart): the snapshot's, which
\* at-most-once needs (mutants/install_forgets_sessions.tla).
InstalledSessions(r, sn) == sn.sessions

(***************************************************************************)
(* Sessions                                                                *)
(***************************************************************************)
\* Executing value v in slot s applies each request of it at most once per
\* (client, seq), as the core's state machine (impl/core/src/sessions.rs;
\* docs/protocol-sessions.md, "Session expiry"), Raft-style registration included:
\*  - Register (seq 0) assigns the id RegBase + registered, counts it, and
\*    creates its session at seq 0 (nothing is applied to the key-value
\*    state; a Register executed again assigns another id);
\*  - a request <<c, q>> of a client with a session is applied iff q is
\*    above the session's seq;
\*  - a client without a session is not applied: expired if the log
\*    assigned it (Assigned), an unknown client if not.
\* With MaxSessions > 0, a Register when MaxSessions exist first evicts the
\* least recently executed session (smallest slot of its last execution,
\* ties by smaller client id); an evicted client leaves nothing behind.
\* Requests, Applied and ExecHistory are overridden by trace validation,
\* whose values are batches and which does not track the key-value state.
Requests(v) == IF v = Noop THEN <<>> ELSE <<v>>
IsRegister(c) == c[2] = 0
HasSession(ss, c) == c \in DOMAIN ss.seq
NumSessions(ss) == Cardinality(DOMAIN ss.seq)
\* Whether the log assigned id c (IF: a model value is not compared by <).
Assigned(ss, c) == IF c \in Clients THEN TRUE ELSE c < RegBase + ss.registered
\* The session evicted to make room: a model's batches hold one request, so
\* two sessions never share a slot there (and the clients of Clients,
\* model values, are never compared by <: see the ASSUME below).
Victim(ss) ==
    CHOOSE c \in DOMAIN ss.seq : \A d \in DOMAIN ss.seq :
       d = c \/ ss.at[c] < ss.at[d] \/ (ss.at[c] = ss.at[d] /\ c < d)
Evict(ss, c) ==
    [ss EXCEPT !.seq = [x \in DOMAIN @ \ {c} |-> @[x]], !.at = [x \in DOMAIN @ \ {c} |-> @[x]]]
\* Room for one more session.
MakeRoom(ss) ==
    IF MaxSessions > 0 /\ NumSessions(ss) >= MaxSessions THEN Evict(ss, Victim(ss)) ELSE ss
\* Client c's session at seq q, last executed in slot s.
SetSession(ss, c, q, s) ==
    LET at == IF MaxSessions > 0 THEN s ELSE 0 IN
    [ss EXCEPT !.seq = (c :> q) @@ @, !.at = (c :> at) @@ @]
\* Eviction compares clients by <: with a bound, the model values of
\* Clients, which all start at slot 0, would be compared.
ASSUME MaxSessions > 0 => Cardinality(Clients) <= 1

\* MUTATION POINT (mutants/expired_session_executes.tla): a request of a
\* client c without a session is applied, as a new client's.
ExpiredApplies(ss, c) == FALSE

\* The requests reqs executed in slot s, after the key-value state k and
\* the session table ss: the new k and ss, and n, how many were applied
\* (a Register counts).
RECURSIVE ApplyReqs(_, _, _, _, _)
ApplyReqs(k, ss, n, reqs, s) ==
    IF reqs = <<>> THEN [kv |-> k, sessions |-> ss, n |-> n]
    ELSE LET c == Head(reqs) IN
         IF IsRegister(c)
         THEN LET ss1 == MakeRoom(ss) IN
              ApplyReqs(k, SetSession([ss1 EXCEPT !.registered = @ + 1], RegBase + ss.registered, 0, s),
                        n + 1, Tail(reqs), s)
         ELSE IF HasSession(ss, c[1])
         THEN IF c[2] > ss.seq[c[1]]
              THEN ApplyReqs(Append(k, c), SetSession(ss, c[1], c[2], s), n + 1, Tail(reqs), s)
              ELSE ApplyReqs(k, ss, n, Tail(reqs), s)          \* duplicate or stale
         ELSE IF ExpiredApplies(ss, c[1])
         THEN ApplyReqs(Append(k, c), SetSession(MakeRoom(ss), c[1], c[2], s), n + 1, Tail(reqs), s)
         ELSE ApplyReqs(k, ss, n, Tail(reqs), s)               \* expired or unknown
Applied(r, v) == ApplyReqs(kv[r], sessions[r], 0, Requests(v), lastExecuted[r] + 1)
ExecHistory(e, v) == Append(e, v)
\* The history of leader commits after commit c (overridden by trace
\* validation, which checks no invariant that reads it).
CommitHistory(c) == chosen \cup {c}

(***************************************************************************)
(* Votes (history, for the invariants only)                                *)
(***************************************************************************)
\* The standard Paxos notion: acceptor a has voted for value v at ballot b
\* in slot s once it acknowledged it (an Accepted message left) or holds it
\* durably (its own instance, which a leader counts as its own vote and a
\* promise reports to the next leader).  The spec adds to votes wherever
\* messages leave or the durable log changes (Out, PersistUpTo, Crash).
\* votes.at is a sequence: votes.at[i] holds the votes of slot votes.base + i,
\* up to the highest slot voted in (votes.base is 0 in the models; trace
\* validation drops the slots every replica has trimmed, TraceMultiPaxos).
\* votes.at[i].cast holds the votes [acc, bal, val] cast in the slot and
\* votes.at[i].chosen the values chosen there, kept with them so that the
\* invariants need not count votes in every state; votes.max[a] is the
\* highest ballot acceptor a voted in.  (A sequence, so that TLC updates
\* and extends it in native code: it spans every replica's window.)
NoVotes == [cast |-> {}, chosen |-> {}]
VotesAt(s) == IF votes.base < s /\ s <= votes.base + Len(votes.at) THEN votes.at[s - votes.base] ELSE NoVotes
\* The values a majority voted for at one ballot, among the votes V: the
\* acceptors of each pair <<ballot, value>> voted for are counted once per
\* pair, not once per vote (TypeOK recomputes it in every state).
ChosenIn(V) ==
    LET BV == {<<x.bal, x.val>> : x \in V} IN
    {p[2] : p \in {p \in BV : Majority({x.acc : x \in {x \in V : x.bal = p[1] /\ x.val = p[2]}})}}
\* at (a votes sequence starting after slot base) with the votes of each
\* slot s in DOMAIN U (all within it) replaced by U[s], one at a time.
RECURSIVE UpdateVotes(_, _, _)
UpdateVotes(at, base, U) ==
    IF DOMAIN U = {} THEN at
    ELSE LET s == CHOOSE s \in DOMAIN U : TRUE
         IN  UpdateVotes([at EXCEPT ![s - base] = U[s]], base, [x \in DOMAIN U \ {s} |-> U[x]])
\* The votes after r's durable log went from old to new and the messages M
\* left: the instances new holds that old did not (every instance of a
\* durable log was added when it became durable), and the Accepted among M.
\* Votes for slots at or below votes.base (trimmed everywhere) are not kept.
Voted(r, new, old, M) ==
    LET A    == {m \in M : m.type = "Accepted"}
        Mine == {s \in DOMAIN new : new[s] # Empty /\ new[s] # At(old, s)}
        base == votes.base
        S    == {s \in Mine \cup {m.slot : m \in A} : s > base}
        Add(s) == (IF s \in Mine THEN {[acc |-> r, bal |-> new[s].bal, val |-> new[s].val]} ELSE {})
                  \cup {[acc |-> m.from, bal |-> m.bal, val |-> m.val] : m \in {m \in A : m.slot = s}}
        Upd(s) == LET c == VotesAt(s).cast \cup Add(s) IN [cast |-> c, chosen |-> ChosenIn(c)]
        len  == Max({Len(votes.at)} \cup {s - base : s \in S})
        at   == votes.at \o [i \in 1..(len - Len(votes.at)) |-> NoVotes]
        Top(a) == Max({votes.max[a]} \cup {m.bal : m \in {m \in A : m.from = a}}
                      \cup (IF a = r THEN {new[s].bal : s \in Mine} ELSE {}))
    IN  IF S = {} THEN votes
        ELSE [base |-> base, at |-> UpdateVotes(at, base, [s \in S |-> Upd(s)]),
              max  |-> [a \in Replicas |-> Top(a)]]

\* v is chosen in slot s: a majority voted for it at one ballot.
IsChosen(s, v) == v \in VotesAt(s).chosen

(***************************************************************************)
(* Persistence                                                             *)
(***************************************************************************)
Strip(l)  == [s \in DOMAIN l |-> [l[s] EXCEPT !.com = FALSE]]
NoDur     == [ballot |-> 0, log |-> NoLog, trimmed |-> 0, snap |-> NoSnap]
\* The durable part of r's state after the current step (primed).
DurNext(r) == [ballot |-> ballot'[r], log |-> Strip(log'[r]), trimmed |-> trimmed'[r], snap |-> snap'[r]]
\* What a restart of r finds on disk.
Durable(r) == IF ModelPersist THEN dur[r]
              ELSE [ballot |-> ballot[r], log |-> Strip(log[r]), trimmed |-> trimmed[r], snap |-> snap[r]]
LastView(r) == IF pend[r] = <<>> THEN dur[r] ELSE pend[r][Len(pend[r])].dur
DurableBallot(r) == IF ModelPersist THEN dur[r].ballot ELSE ballot[r]

(***************************************************************************)
(* MUTATION POINTS                                                         *)
(***************************************************************************)
\* An acceptor accepts an Accept at ballot b.
AcceptOK(r, b) == b >= ballot[r]
\* The promise of an acceptor after it accepted at ballot b.
PromiseAfterAccept(r, b) == Max2(ballot[r], b)
\* The leader's slot is committed once the acceptors in S acked it.
CommitQuorum(S) == Majority(S)
\* A follower commits, on a heartbeat of ballot b, an instance inst.
FollowerCommitOK(inst, b) == inst.bal = b
\* A replica executes the instance inst of its next slot.
ExecuteOK(inst) == inst.com
\* A replica may become leader of ballot b (its own) when its promises are in.
LeaderGuard(r, b) == role[r] = "Candidate" /\ ballot[r] = b
\* The ballot a new leader of ballot b takes.
LeaderBallot(r, b) == b
\* The ballot a restarted replica comes back with.
RestartBallot(r) == Durable(r).ballot
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
\* Messages that depend on a step's durable effects wait until they are durable.
HoldUntilDurable == TRUE

\* The end of every step that writes durable state or sends messages that
\* depend on it: Now are sent at once, Held once everything the replica has
\* written so far is durable.  Must come after the step's other conjuncts.
Out(r, Now, Held) ==
    IF ~ModelPersist
    THEN /\ msgs' = msgs \cup Now \cup Held
         /\ votes' = Voted(r, log'[r], log[r], Now \cup Held)
         /\ UNCHANGED <<dur, pend>>
    ELSE LET v == DurNext(r)
             L == Len(pend[r])
         IN  IF pend[r] = <<>> /\ v = dur[r]          \* nothing to wait for
             THEN /\ msgs' = msgs \cup Now \cup Held
                  /\ votes' = Voted(r, NoLog, NoLog, Now \cup Held)
                  /\ UNCHANGED <<dur, pend>>
             ELSE LET sent == Now \cup (IF HoldUntilDurable THEN {} ELSE Held) IN
                  /\ msgs' = msgs \cup sent
                  /\ votes' = Voted(r, NoLog, NoLog, sent)
                  /\ LET h == IF HoldUntilDurable THEN Held ELSE {} IN
                     pend' = [pend EXCEPT ![r] =
                                IF v = LastView(r)    \* wait for the last write
                                THEN [@ EXCEPT ![L].out = @ \cup h]
                                ELSE Append(@, [dur |-> v, out |-> h])]
                  /\ UNCHANGED dur

(***************************************************************************)
(* GC coordination: state (the actions are below, before Next)            *)
(***************************************************************************)
\* Blade-style coordination of collections (docs/protocol-gc-coordination.md, "GC
\* coordination (Blade)"; impl/core/src/replica/gc.rs).  A collecting
\* replica is paused: it takes no step but GcDone (and may crash).  All of
\* it is volatile.  Per replica r:
\*   due[r]     a collection is due and has not started
\*   coll[r]    "none", or collecting: "granted" (under a leader's grant) or
\*              "forced" (deadline, no headroom, or no one to hand off to)
\*   gbal[r]    the ballot of the grant it collects under (0 if none)
\*   pend[r]    the ballot of a grant received and not yet used (0 if none):
\*              an old leader holds a grant until its grace has passed
\*   asked[r]   <<leader, ballot>> it last asked for a grant
\*   handoff[r] the leader whose TimeoutNow started r's current election
\* and, while r leads (reset whenever it stops leading):
\*   held[r]    the replicas it counts as collecting: those it granted, and
\*              after its election those that did not promise (they may be
\*              collecting under an earlier leader's grant)
\*   queue[r]   requests waiting for a grant, in order (FIFO)
\*   count      collections that fell due so far (bounded by MaxGc)
GcInit ==
    [due |-> [r \in Replicas |-> FALSE], coll |-> [r \in Replicas |-> "none"],
     gbal |-> [r \in Replicas |-> 0], pend |-> [r \in Replicas |-> 0],
     asked |-> [r \in Replicas |-> <<NoOwner, 0>>], handoff |-> [r \in Replicas |-> NoOwner],
     held |-> [r \in Replicas |-> {}], queue |-> [r \in Replicas |-> <<>>], count |-> 0]

\* How many replicas may collect under grants at once: n - majority, so
\* that a majority always stays live (1 of 3, 2 of 5).  MUTATION POINT.
MajoritySize == Cardinality(Replicas) \div 2 + 1
GcBudget == Cardinality(Replicas) - MajoritySize

Paused(r) == gc.coll[r] # "none"

\* The volatile coordination state of r as a restart (or stepping down)
\* leaves it.
GcForget(g, r) ==
    [g EXCEPT !.due[r] = FALSE, !.coll[r] = "none", !.gbal[r] = 0, !.pend[r] = 0,
              !.asked[r] = <<NoOwner, 0>>, !.handoff[r] = NoOwner,
              !.held[r] = {}, !.queue[r] = <<>>]
GcStopLeading(g, r) == [g EXCEPT !.held[r] = {}, !.queue[r] = <<>>]

\* A step of the protocol (any action of Next but BecomeLeader and the GC
\* actions) changes the coordination only through what it does to r's
\* role: a leader that stops leading forgets its grants and queue (the core
\* drops its leader state); a candidate that gives up or starts another
\* election forgets whose hand-off started it; a restart forgets it all.
GcAfterCore(r) ==
    gc' = IF ~GcCoordination \/ ~up'[r] THEN gc
          ELSE IF ~up[r] THEN GcForget(gc, r)
          ELSE LET g1 == IF role[r] = "Leader" /\ role'[r] # "Leader" THEN GcStopLeading(gc, r) ELSE gc
                   g2 == IF role[r] = "Candidate" /\ (role'[r] = "Follower" \/ ballot'[r] # ballot[r])
                         THEN [g1 EXCEPT !.handoff[r] = NoOwner] ELSE g1
               IN  g2

\* Elected with the promises of Q: every peer that did not promise may be
\* collecting under an earlier grant, and counts until it is heard from or
\* its grant expires; an old leader that handed off to r waits first in
\* the queue (it is due: it handed off to collect).
GcElected(r, Q) ==
    gc' = IF ~GcCoordination THEN gc
          ELSE LET old == gc.handoff[r] IN
               [gc EXCEPT !.held[r] = Replicas \ (Q \cup {r, old}),
                          !.queue[r] = IF old = NoOwner THEN <<>> ELSE <<old>>,
                          !.handoff[r] = NoOwner]

(***************************************************************************)
(* Pre-vote and leader stickiness: state (the actions are below, before   *)
(* Next)                                                                   *)
(***************************************************************************)
\* As the core with Config::pre_vote (docs/protocol-pre-vote.md, "Pre-vote";
\* impl/core/src/replica/pre_vote.rs), after etcd raft's PreVote with
\* CheckQuorum.  All of it is volatile.  Per replica r:
\*   hear[r]   r follows a leader (or a candidate it promised) it heard
\*             from within an election timeout: it is in that leader's
\*             lease.  Time is not modelled: hearing sets it (a Prepare
\*             promised, an Accept, Heartbeat, CatchUp or snapshot handled
\*             as a follower), and only LeaseExpire clears it, besides a
\*             change of role, a pre-vote round and a restart.
\*   round[r]  the ballot of r's pre-vote round, 0 if none
\* and cut: the link the bridge partition cut (Partition), or NoCut.
\* The grants are messages (PreVoteGrant), counted by ElectAfterPreVote.
PvInit == [hear |-> [r \in Replicas |-> FALSE], round |-> [r \in Replicas |-> 0], cut |-> NoCut]

\* Messages that carry a ballot their sender asked about rather than holds:
\* no one adopts it (the core's ballot rule exempts them).
PreVoteAsked == {"PreVote", "PreVoteGrant"}

\* r believes in a live leader: it leads (check quorum has not stepped it
\* down), or it is in its leader's lease.
InLease(r) == role[r] = "Leader" \/ (role[r] = "Follower" /\ pv.hear[r])

\* pv after a step of r that changed nothing of pv itself; heard: the step
\* handled a message of a leader or candidate at (or raised to) its ballot.
\* A follower that handled one is in the lease; a change of role leaves it
\* (a replica that becomes follower follows no one yet: the core's deposed
\* leader is in the new ballot's lease at once, the spec's leaves it out,
\* which lets it grant more, not less), and so does a restart.  A round
\* ends once r hears a leader, leaves the follower role, or its ballot
\* moves (the round asked about a ballot above the old one).
PvAfter(r, heard) ==
    pv' = IF ~PreVote THEN pv
          ELSE LET h  == IF ~up'[r] \/ ~up[r] THEN FALSE
                         ELSE IF heard THEN role'[r] = "Follower"
                         ELSE IF role'[r] # role[r] THEN FALSE
                         ELSE pv.hear[r]
                   rd == IF h \/ ~up'[r] \/ ~up[r] \/ role'[r] # "Follower" \/ ballot'[r] # ballot[r]
                         THEN 0 ELSE pv.round[r]
               IN  [pv EXCEPT !.hear[r] = h, !.round[r] = rd]

(***************************************************************************)
Init ==
    /\ ballot = [r \in Replicas |-> 0]
    /\ role = [r \in Replicas |-> "Follower"]
    /\ up = [r \in Replicas |-> TRUE]
    /\ log = [r \in Replicas |-> NoLog]
    /\ lastExecuted = [r \in Replicas |-> 0]
    /\ trimmed = [r \in Replicas |-> 0]
    /\ gle = [r \in Replicas |-> 0]
    /\ peerLE = [r \in Replicas |-> [p \in Replicas |-> 0]]
    /\ snap = [r \in Replicas |-> NoSnap]
    /\ kv = [r \in Replicas |-> <<>>]
    /\ sessions = [r \in Replicas |-> NoSessions]
    /\ exec = [r \in Replicas |-> <<>>]
    /\ msgs = {}
    /\ owner = [b \in Ballots |-> NoOwner]
    /\ chosen = {}
    /\ votes = [base |-> 0, at |-> <<>>, max |-> [r \in Replicas |-> 0]]
    /\ crashes = 0
    /\ dur = [r \in Replicas |-> NoDur]
    /\ pend = [r \in Replicas |-> <<>>]
    /\ gc = GcInit
    /\ pv = PvInit

(***************************************************************************)
(* Election                                                                *)
(***************************************************************************)
\* Any unused ballot above the own one (the id part of real ballots makes
\* them unique; here uniqueness comes from owner).  A replica may also
\* take again a ballot of its own that a crash made it forget: it is above
\* its durable ballot only if it never became durable, and then no
\* message of it ever left (they wait for the write), so no one else knows
\* it.  (Without ModelPersist no ballot is forgotten.)
StartElectionAt(r, b) ==
    /\ up[r] /\ role[r] # "Leader"
    /\ b \in Ballots /\ b > ballot[r] /\ owner[b] \in {NoOwner, r}
    /\ ballot' = [ballot EXCEPT ![r] = b]
    /\ role' = [role EXCEPT ![r] = "Candidate"]
    /\ owner' = [owner EXCEPT ![b] = r]
    /\ UNCHANGED <<up, log, lastExecuted, trimmed, gle, peerLE, snap, kv, sessions, exec, chosen, crashes>>
    /\ Out(r, {}, {Msg("Prepare", r, Broadcast, b, 0, NoVal, lastExecuted[r], 0, NoEntries, NoSnap)})

\* Without FineSteps only the smallest unused ballot (fewer states).
StartElection(r) ==
    IF FineSteps THEN \E b \in Ballots : StartElectionAt(r, b)
    ELSE \E b \in Ballots : /\ StartElectionAt(r, b)
                            /\ \A c \in Ballots : (c > ballot[r] /\ owner[c] = NoOwner) => b <= c

\* A Prepare is answered with a promise if its ballot is higher than the
\* own one, or (FineSteps) is the own one and comes from its owner: a
\* resent Prepare, or one whose ballot a StepDown step already adopted.
PrepareOK(r, m) == m.bal > ballot[r] \/ (FineSteps /\ m.bal = ballot[r] /\ owner[m.bal] = m.from)

\* Promise: the instances above the candidate's last executed, or, if this
\* replica trimmed beyond it, the executed state and the instances above it.
HandlePrepare(r, m) ==
    /\ up[r] /\ m.type = "Prepare" /\ For(r, m)
    /\ PrepareOK(r, m)
    /\ ballot' = [ballot EXCEPT ![r] = m.bal]
    /\ role' = [role EXCEPT ![r] = "Follower"]
    /\ UNCHANGED <<up, log, lastExecuted, trimmed, gle, peerLE, snap, kv, sessions, exec, owner, chosen, crashes>>
    /\ LET after == IF trimmed[r] > m.le THEN lastExecuted[r] ELSE m.le IN
       Out(r, {}, {Msg("Promise", r, m.from, m.bal, 0, NoVal, lastExecuted[r], 0,
                       EntriesOf(r, after, LastIndex(r)),
                       IF trimmed[r] > m.le THEN CurrentSnap(r) ELSE NoSnap)})

\* A Prepare, Accept or Heartbeat of a lower ballot is answered with the
\* own ballot (the rejections of the code, one message type here).
Reject(r, m) ==
    /\ FineSteps /\ up[r] /\ For(r, m)
    /\ \/ m.type \in {"Accept", "Heartbeat"} /\ m.bal < ballot[r]
       \/ m.type = "Prepare" /\ ~PrepareOK(r, m)
    /\ Send(Msg("Nack", r, m.from, ballot[r], m.slot, NoVal, lastExecuted[r], 0, NoEntries, NoSnap))
    /\ UNCHANGED <<ballot, role, up, log, lastExecuted, trimmed, gle, peerLE, snap, kv, sessions, exec, owner, chosen, votes, crashes, dur, pend>>

\* Promises stay in msgs; BecomeLeader reads those of the promisers Q
\* (HandlePromise of the implementation only records them: a stutter here).
Promises(r, b, Q) == {m \in msgs : m.type = "Promise" /\ m.to = r /\ m.bal = b /\ m.from \in Q}

\* The commit point an Accept carries: its leader's last executed with
\* CommitOnAccept (LearnCommit), else none (0).
AcceptLE(le) == IF CommitOnAccept THEN le ELSE 0

BecomeLeaderWith(r, Q) ==
    /\ up[r] /\ r \notin Q
    /\ \E b \in Ballots :
       /\ owner[b] = r
       /\ LeaderGuard(r, b)
       /\ LET P     == Promises(r, b, Q)
              \* newest snapshot among the promises, if ahead of our state
              sn    == IF \E p \in P : p.snap.le > lastExecuted[r]
                       THEN (CHOOSE p \in P : \A q \in P : q.snap.le <= p.snap.le).snap
                       ELSE CurrentSnap(r)
              le    == sn.le
              top   == Max({LastIndex(r)} \cup {LastIndexOf(p.entries, 0) : p \in P})
              E(s)  == ({At(p.entries, s) : p \in P} \cup {At(log[r], s)}) \ {Empty}
              inst  == le > lastExecuted[r]   \* a snapshot is installed
              t     == IF inst THEN le ELSE trimmed[r]   \* trimmed prefix after
              newlog == IF top <= t THEN NoLog
                        ELSE [s \in (t + 1)..top |->
                                IF s <= le THEN At(log[r], s)
                                ELSE MergeEntry(At(log[r], s), E(s), LeaderBallot(r, b))]
          IN /\ {p.from : p \in P} = Q
             /\ Majority(Q \cup {r})
             /\ ballot' = [ballot EXCEPT ![r] = LeaderBallot(r, b)]
             /\ role' = [role EXCEPT ![r] = "Leader"]
             /\ log' = [log EXCEPT ![r] = newlog]
             /\ lastExecuted' = [lastExecuted EXCEPT ![r] = le]
             /\ trimmed' = [trimmed EXCEPT ![r] = t]
             /\ snap' = [snap EXCEPT ![r] = IF inst THEN sn ELSE @]
             /\ kv' = [kv EXCEPT ![r] = sn.kv]
             /\ sessions' = [sessions EXCEPT ![r] = InstalledSessions(r, sn)]
             /\ exec' = [exec EXCEPT ![r] = sn.exec]
             /\ peerLE' = [peerLE EXCEPT ![r] = [p \in Replicas |-> 0]]
             /\ GcElected(r, Q)
             /\ UNCHANGED <<up, gle, owner, chosen, crashes>>
             /\ Out(r, {Msg("Accept", r, Broadcast, LeaderBallot(r, b), s, newlog[s].val,
                            AcceptLE(le), 0, NoEntries, NoSnap) : s \in (le + 1)..top}, {})

\* The code becomes leader on the first majority of promises; without
\* FineSteps, on all promises that arrived (fewer states).
BecomeLeader(r) ==
    IF FineSteps THEN \E Q \in SUBSET (Replicas \ {r}) : BecomeLeaderWith(r, Q)
    ELSE BecomeLeaderWith(r, {m.from : m \in {m \in msgs : m.type = "Promise" /\ m.to = r /\ m.bal = ballot[r]}})

\* A replica that sees a message with a higher ballot adopts (and persists)
\* it; a leader or candidate becomes follower.  Any message carries its
\* sender's ballot; a Nack carries the rejecting acceptor's.  A follower
\* does so as a step of its own only with FineSteps (otherwise the handler
\* of the message raises the ballot itself).
StepDown(r) ==
    /\ up[r] /\ (FineSteps \/ role[r] # "Follower")
    /\ \E m \in msgs :
       /\ For(r, m) /\ m.bal > ballot[r] /\ m.type \notin PreVoteAsked
       /\ ballot' = [ballot EXCEPT ![r] = m.bal]
       /\ role' = [role EXCEPT ![r] = "Follower"]
    /\ UNCHANGED <<up, log, lastExecuted, trimmed, gle, peerLE, snap, kv, sessions, exec, owner, chosen, crashes>>
    /\ Out(r, {}, {})

\* A leader that has not heard from a majority for an election timeout
\* steps down at its own ballot (check quorum; timing is not modelled).
\* The leader of a bridge partition keeps its majority (Partition: no
\* other fault, the cut takes one follower of three), so it does not.
LoseQuorum(r) ==
    /\ FineSteps /\ up[r] /\ role[r] = "Leader"
    /\ ~(Partition /\ pv.cut.leader = r)
    /\ role' = [role EXCEPT ![r] = "Follower"]
    /\ UNCHANGED <<ballot, up, log, lastExecuted, trimmed, gle, peerLE, snap, kv, sessions, exec, msgs, owner, chosen, votes, crashes, dur, pend>>

(***************************************************************************)
(* Replication                                                             *)
(***************************************************************************)
ProposeValue(r, v) ==
    /\ up[r] /\ role[r] = "Leader"
    /\ LastIndex(r) < NumSlots
    /\ LET s == LastIndex(r) + 1 IN
       /\ log' = [log EXCEPT ![r] = Put(@, trimmed[r], s, [bal |-> ballot[r], val |-> v, com |-> FALSE])]
       /\ UNCHANGED <<ballot, role, up, lastExecuted, trimmed, gle, peerLE, snap, kv, sessions, exec, owner, chosen, crashes>>
       /\ Out(r, {Msg("Accept", r, Broadcast, ballot[r], s, v, AcceptLE(lastExecuted[r]), 0, NoEntries, NoSnap)}, {})

\* Any command may be proposed at any time, again too (a delayed original,
\* a deposed leader's), but a registered id only once its client learned
\* it: some replica executed its Register (its reply carries the id).
\* (Read from the replicas' executed state and snapshots, which a crash
\* may set back: a client that learned an id from a replica that lost it
\* again is not modelled, nor needed by a model without crashes.)
Issued(c) == \E r \in Replicas : c - RegBase < Max2(sessions[r].registered, snap[r].sessions.registered)
\* (IF, not \/: TLC explores every disjunct of an action as a branch.)
Proposable(c) == IF IsRegister(c) \/ c[1] \in Clients THEN TRUE ELSE Issued(c[1])
Propose(r) == \E c \in Commands : Proposable(c) /\ ProposeValue(r, c)

\* Store the instance unless the slot is committed, executed or trimmed.
HandleAccept(r, m) ==
    /\ up[r] /\ m.type = "Accept" /\ For(r, m)
    /\ AcceptOK(r, m.bal)
    /\ ballot' = [ballot EXCEPT ![r] = PromiseAfterAccept(r, m.bal)]
    /\ role' = [role EXCEPT ![r] = IF m.bal > ballot[r] THEN "Follower" ELSE @]
    /\ log' = [log EXCEPT ![r] =
                 IF At(@, m.slot).com \/ m.slot <= lastExecuted[r] \/ m.slot <= trimmed[r] THEN @
                 ELSE Put(@, trimmed[r], m.slot, [bal |-> m.bal, val |-> m.val, com |-> FALSE])]
    /\ UNCHANGED <<up, lastExecuted, trimmed, gle, peerLE, snap, kv, sessions, exec, owner, chosen, crashes>>
    /\ Out(r, {}, {Msg("Accepted", r, m.from, m.bal, m.slot, m.val, 0, 0, NoEntries, NoSnap)})

\* The leader commits slot s once a quorum accepted it at its ballot; its
\* own vote counts once its instance is durable.
Acks(r, s) ==
    {m.from : m \in {m \in msgs : m.type = "Accepted" /\ m.to = r /\ m.bal = ballot[r] /\ m.slot = s}}
    \cup (IF At(Durable(r).log, s).bal = ballot[r] THEN {r} ELSE {})

CommitSlot(r, s) ==
    /\ up[r] /\ role[r] = "Leader"
    /\ At(log[r], s) # Empty /\ ~log[r][s].com /\ s > lastExecuted[r]
    /\ log[r][s].bal = ballot[r]
    /\ CommitQuorum(Acks(r, s))
    /\ log' = [log EXCEPT ![r][s].com = TRUE]
    /\ chosen' = CommitHistory([slot |-> s, val |-> log[r][s].val, bal |-> ballot[r]])
    /\ UNCHANGED <<ballot, role, up, lastExecuted, trimmed, gle, peerLE, snap, kv, sessions, exec, msgs, owner, votes, crashes, dur, pend>>

HandleAccepted(r) == \E s \in DOMAIN log[r] : CommitSlot(r, s)

\* Apply the next committed slot; at most once per (client, seq).
\* Without ModelExecution no Execute step is taken (its successors would
\* all break NoExecution, which still leaves out the other steps that move
\* lastExecuted).
Execute(r) ==
    /\ ModelExecution
    /\ up[r]
    /\ lastExecuted[r] < NumSlots
    /\ LET s == lastExecuted[r] + 1
           v == At(log[r], s).val
           a == Applied(r, v)
       IN /\ At(log[r], s) # Empty /\ ExecuteOK(log[r][s])
          /\ lastExecuted' = [lastExecuted EXCEPT ![r] = s]
          /\ exec' = [exec EXCEPT ![r] = ExecHistory(@, v)]
          /\ kv' = [kv EXCEPT ![r] = a.kv]
          /\ sessions' = [sessions EXCEPT ![r] = a.sessions]
    /\ UNCHANGED <<ballot, role, up, log, trimmed, gle, peerLE, snap, msgs, owner, chosen, votes, crashes, dur, pend>>


(***************************************************************************)
(* Heartbeats, commit on followers, trimming, catch-up                    *)
(***************************************************************************)
\* Without ModelHeartbeats no heartbeat is sent.  (A CONSTRAINT that no
\* heartbeat is in msgs gives the same distinct states, but TLC generates
\* each heartbeat step's successor, checks the invariants on it and only
\* then leaves it out: a sixth of ci_gap's generated states.)
SendHeartbeat(r) ==
    /\ ModelHeartbeats
    /\ up[r] /\ role[r] = "Leader"
    /\ Send(Msg("Heartbeat", r, Broadcast, ballot[r], 0, NoVal, lastExecuted[r], gle[r],
                NoEntries, NoSnap))
    /\ UNCHANGED <<ballot, role, up, log, lastExecuted, trimmed, gle, peerLE, snap, kv, sessions, exec, owner, chosen, votes, crashes, dur, pend>>

\* Slots a follower commits on heartbeat m: last_executed+1 .. m.le in order,
\* skipping those already committed, while the instance exists and is
\* committed or FollowerCommitOK (its ballot is m's).  k is the end of that
\* run; CHOOSE tries k upward and each k before the end fails at its first
\* conjunct, so TLC's work is linear in the run.
HBCommits(r, m) ==
    LET le    == lastExecuted[r]
        OK(s) == At(log[r], s) # Empty /\ (log[r][s].com \/ FollowerCommitOK(log[r][s], m.bal))
        hi    == Max2(le, Min2(m.le, LastIndex(r)))
        k     == CHOOSE k \in le..hi : (k = hi \/ ~OK(k + 1)) /\ \A t \in (le + 1)..k : OK(t)
    IN  {s \in (le + 1)..k : ~log[r][s].com}

\* Highest slot that in-order execution reaches from le over the log lg.
RECURSIVE ExecUpTo(_, _)
ExecUpTo(le, lg) == IF At(lg, le + 1).com THEN ExecUpTo(le + 1, lg) ELSE le

\* The reply reports the last executed slot after executing what this
\* heartbeat committed (the code executes before replying).
HandleHeartbeat(r, m) ==
    /\ up[r] /\ m.type = "Heartbeat" /\ For(r, m)
    /\ m.bal >= ballot[r]
    /\ LET C == HBCommits(r, m)      \* evaluated once, not once per slot
           newlog == IF C = {} THEN log[r]
                     ELSE [s \in DOMAIN log[r] |-> IF s \in C THEN [log[r][s] EXCEPT !.com = TRUE] ELSE log[r][s]]
       IN /\ ballot' = [ballot EXCEPT ![r] = m.bal]
          /\ role' = [role EXCEPT ![r] = "Follower"]
          /\ log' = [log EXCEPT ![r] = newlog]
          /\ gle' = [gle EXCEPT ![r] = Max2(@, m.gle)]
          /\ UNCHANGED <<up, lastExecuted, trimmed, peerLE, snap, kv, sessions, exec, owner, chosen, crashes>>
          /\ Out(r, {}, IF ModelTrim \/ ModelCatchUp
                        THEN {Msg("HeartbeatReply", r, m.from, m.bal, 0, NoVal,
                                  ExecUpTo(lastExecuted[r], newlog), 0, NoEntries, NoSnap)}
                        ELSE {})

\* CommitOnAccept: a follower at the ballot of an Accept commits with the
\* last executed it carries (m.le), as with a heartbeat's; the Accepted
\* it sent is the only answer.  Taken only when it commits something (the
\* core traces it only then).
LearnCommit(r, m) ==
    /\ CommitOnAccept /\ up[r] /\ m.type = "Accept" /\ For(r, m)
    /\ m.bal = ballot[r] /\ role[r] = "Follower" /\ m.le > lastExecuted[r]
    /\ LET C == HBCommits(r, m) IN
       /\ C # {}
       /\ log' = [log EXCEPT ![r] = [s \in DOMAIN log[r] |->
                                       IF s \in C THEN [log[r][s] EXCEPT !.com = TRUE] ELSE log[r][s]]]
    /\ UNCHANGED <<ballot, role, up, lastExecuted, trimmed, gle, peerLE, snap, kv, sessions, exec,
                   msgs, owner, chosen, votes, crashes, dur, pend>>

\* The leader records the follower's progress and recomputes the global
\* last executed over the followers it heard from recently (H: the code
\* leaves out followers silent for longer than a grace period).
HandleHeartbeatReply(r, m) ==
    /\ ModelTrim
    /\ up[r] /\ role[r] = "Leader" /\ m.type = "HeartbeatReply" /\ For(r, m)
    /\ m.bal = ballot[r]
    /\ LET pl == [peerLE[r] EXCEPT ![m.from] = Max2(@, m.le)]
       IN /\ peerLE' = [peerLE EXCEPT ![r] = pl]
          /\ \E H \in SUBSET (Replicas \ {r}) :
               /\ m.from \in H
               /\ gle' = [gle EXCEPT ![r] = Max2(@, Min({lastExecuted[r]} \cup {pl[p] : p \in H}))]
    /\ UNCHANGED <<ballot, role, up, log, lastExecuted, trimmed, snap, kv, sessions, exec, msgs, owner, chosen, votes, crashes, dur, pend>>

\* MUTATION POINT (mutants/catch_up_beyond_executed.tla): the highest
\* slot a catch-up carries, the leader's last executed (the core's
\* send_catch_up: every instance up to it is chosen, so the follower may
\* store them as committed).
CatchUpTop(r) == lastExecuted[r]

\* A follower's reply shows it lacks executed slots: the leader sends the
\* instances m.le+1..hi (hi up to CatchUpTop) ...
SendCatchUpTo(r, m, hi) ==
    /\ ModelCatchUp /\ up[r] /\ role[r] = "Leader"
    /\ m.type = "HeartbeatReply" /\ m.to = r /\ m.bal = ballot[r]
    /\ trimmed[r] <= m.le /\ m.le < hi /\ hi <= CatchUpTop(r)
    /\ Send(Msg("CatchUp", r, m.from, ballot[r], 0, NoVal, hi, 0,
                EntriesOf(r, m.le, hi), NoSnap))
    /\ UNCHANGED <<ballot, role, up, log, lastExecuted, trimmed, gle, peerLE, snap, kv, sessions, exec, owner, chosen, votes, crashes, dur, pend>>

\* ... or, if it trimmed them, its executed state.
SendSnapshot(r, m) ==
    /\ ModelCatchUp /\ up[r] /\ role[r] = "Leader"
    /\ m.type = "HeartbeatReply" /\ m.to = r /\ m.bal = ballot[r]
    /\ m.le < trimmed[r]
    /\ Send(Msg("Snapshot", r, m.from, ballot[r], 0, NoVal, lastExecuted[r], 0, NoEntries, CurrentSnap(r)))
    /\ UNCHANGED <<ballot, role, up, log, lastExecuted, trimmed, gle, peerLE, snap, kv, sessions, exec, owner, chosen, votes, crashes, dur, pend>>

SendCatchUp(r) ==
    ModelCatchUp /\ up[r] /\ role[r] = "Leader" /\    \* both start so: not tried per message
    \E m \in msgs : SendSnapshot(r, m) \/ \E hi \in (m.le + 1)..CatchUpTop(r) : SendCatchUpTo(r, m, hi)

\* A follower stores the chosen instances of a CatchUp as committed.
HandleCatchUp(r, m) ==
    /\ up[r] /\ m.type = "CatchUp" /\ For(r, m)
    /\ m.bal >= ballot[r]
    /\ ballot' = [ballot EXCEPT ![r] = m.bal]
    /\ role' = [role EXCEPT ![r] = "Follower"]
    /\ LET M      == m.entries
           New(s) == At(M, s) # Empty /\ s > lastExecuted[r] /\ ~At(log[r], s).com
           hi     == Max2(LastIndex(r), LastIndexOf(M, 0))
       IN  log' = [log EXCEPT ![r] =
                     IF hi <= trimmed[r] THEN NoLog
                     ELSE [s \in (trimmed[r] + 1)..hi |->
                             IF New(s) THEN [M[s] EXCEPT !.com = TRUE] ELSE At(log[r], s)]]
    /\ UNCHANGED <<up, lastExecuted, trimmed, gle, peerLE, snap, kv, sessions, exec, owner, chosen, crashes>>
    /\ Out(r, {}, {})

\* A follower replaces its executed state by a newer one from the leader.
InstallSnapshot(r, m) ==
    /\ up[r] /\ m.type = "Snapshot" /\ For(r, m)
    /\ m.bal >= ballot[r]
    /\ m.snap.le > lastExecuted[r]
    /\ ballot' = [ballot EXCEPT ![r] = m.bal]
    /\ role' = [role EXCEPT ![r] = "Follower"]
    /\ log' = [log EXCEPT ![r] = Above(@, m.snap.le)]
    /\ lastExecuted' = [lastExecuted EXCEPT ![r] = m.snap.le]
    /\ trimmed' = [trimmed EXCEPT ![r] = m.snap.le]
    /\ snap' = [snap EXCEPT ![r] = m.snap]
    /\ kv' = [kv EXCEPT ![r] = m.snap.kv]
    /\ sessions' = [sessions EXCEPT ![r] = InstalledSessions(r, m.snap)]
    /\ exec' = [exec EXCEPT ![r] = m.snap.exec]
    /\ UNCHANGED <<up, gle, peerLE, owner, chosen, crashes>>
    /\ Out(r, {}, {})

\* Persist a snapshot at last executed, then drop the log up to TrimLimit.
Trim(r) ==
    /\ ModelTrim /\ up[r]
    /\ TrimLimit(r) > trimmed[r]
    /\ trimmed' = [trimmed EXCEPT ![r] = TrimLimit(r)]
    /\ log' = [log EXCEPT ![r] = Above(@, TrimLimit(r))]
    /\ snap' = [snap EXCEPT ![r] = CurrentSnap(r)]
    /\ UNCHANGED <<ballot, role, up, lastExecuted, gle, peerLE, kv, sessions, exec, owner, chosen, crashes>>
    /\ Out(r, {}, {})

(***************************************************************************)
(* Persistence and faults                                                  *)
(***************************************************************************)
\* The first k queued writes are durable: their messages go out.
PersistUpTo(r, k) ==
    /\ ModelPersist /\ up[r]
    /\ 1 <= k /\ k <= Len(pend[r])
    /\ LET out == UNION {pend[r][i].out : i \in 1..k} IN
       /\ dur' = [dur EXCEPT ![r] = pend[r][k].dur]
       /\ msgs' = msgs \cup out
       /\ votes' = Voted(r, pend[r][k].dur.log, dur[r].log, out)
    /\ pend' = [pend EXCEPT ![r] = SubSeq(@, k + 1, Len(@))]
    /\ UNCHANGED <<ballot, role, up, log, lastExecuted, trimmed, gle, peerLE, snap, kv, sessions, exec, owner, chosen, crashes>>

Persist(r) == \E k \in 1..Len(pend[r]) : PersistUpTo(r, k)

\* Volatile state is lost; writes that reached the disk without being
\* acknowledged (a prefix of pend) survive, their messages do not.
Crash(r) ==
    /\ up[r] /\ crashes < MaxCrashes
    /\ up' = [up EXCEPT ![r] = FALSE]
    /\ crashes' = crashes + 1
    /\ \E k \in 0..Len(pend[r]) :
         /\ dur' = [dur EXCEPT ![r] = IF k = 0 THEN @ ELSE pend[r][k].dur]
         /\ votes' = IF k = 0 THEN votes ELSE Voted(r, pend[r][k].dur.log, dur[r].log, {})
    /\ pend' = [pend EXCEPT ![r] = <<>>]
    /\ UNCHANGED <<ballot, role, log, lastExecuted, trimmed, gle, peerLE, snap, kv, sessions, exec, msgs, owner, chosen>>

\* Restart from the durable state: ballot, log instances (executed ones up
\* to the snapshot count as committed), snapshot and trimmed; the executed
\* state is the snapshot's.
Restart(r) ==
    /\ ~up[r]
    /\ LET D == Durable(r) IN
       /\ up' = [up EXCEPT ![r] = TRUE]
       /\ ballot' = [ballot EXCEPT ![r] = RestartBallot(r)]
       /\ role' = [role EXCEPT ![r] = "Follower"]
       /\ log' = [log EXCEPT ![r] = [s \in DOMAIN D.log |->
                    IF D.log[s] # Empty /\ s <= D.snap.le THEN [D.log[s] EXCEPT !.com = TRUE]
                    ELSE D.log[s]]]
       /\ trimmed' = [trimmed EXCEPT ![r] = D.trimmed]
       /\ snap' = [snap EXCEPT ![r] = D.snap]
       /\ lastExecuted' = [lastExecuted EXCEPT ![r] = D.snap.le]
       /\ kv' = [kv EXCEPT ![r] = D.snap.kv]
       /\ sessions' = [sessions EXCEPT ![r] = InstalledSessions(r, D.snap)]
       /\ exec' = [exec EXCEPT ![r] = D.snap.exec]
       /\ gle' = [gle EXCEPT ![r] = 0]
       /\ peerLE' = [peerLE EXCEPT ![r] = [p \in Replicas |-> 0]]
    /\ UNCHANGED <<msgs, owner, chosen, votes, crashes, dur, pend>>

Drop ==
    /\ ModelDrop
    /\ \E m \in msgs : msgs' = msgs \ {m}
    /\ UNCHANGED <<ballot, role, up, log, lastExecuted, trimmed, gle, peerLE, snap, kv, sessions, exec, owner, chosen, votes, crashes, dur, pend>>

(***************************************************************************)
(* GC coordination: actions                                                *)
(***************************************************************************)
\* Named like the trace events (docs/trace-format.md).  Timing is not
\* modelled; where the core's safety rests on its timers, the action says
\* which assumption it makes.  None of these touches a ballot, a promise,
\* a log or a commit: a collecting replica is only a paused one.
GcMsg(t, f, to, b) == Msg(t, f, to, b, 0, NoVal, 0, 0, NoEntries, NoSnap)
GcUnchanged == UNCHANGED <<ballot, role, up, log, lastExecuted, trimmed, gle, peerLE, snap,
                           kv, sessions, exec, owner, chosen, votes, crashes, dur, pend>>
Leads(l) == up[l] /\ role[l] = "Leader"

\* The driver's collector reports a collection due.
GcDue(r) ==
    /\ GcCoordination /\ up[r] /\ ~Paused(r) /\ ~gc.due[r]
    /\ gc.count < MaxGc
    /\ gc' = [gc EXCEPT !.due[r] = TRUE, !.pend[r] = 0, !.count = @ + 1]
    /\ GcUnchanged /\ UNCHANGED msgs

\* A due follower asks its leader, once per leader and ballot (and not
\* while it holds a grant).
RequestGcTo(r, to) ==
    /\ GcCoordination /\ up[r] /\ ~Paused(r) /\ role[r] = "Follower"
    /\ gc.due[r] /\ gc.pend[r] = 0
    /\ to # r /\ gc.asked[r] # <<to, ballot[r]>>
    /\ gc' = [gc EXCEPT !.asked[r] = <<to, ballot[r]>>]
    /\ Send(GcMsg("GcRequest", r, to, ballot[r]))
    /\ GcUnchanged
\* In the models a follower's leader is the owner of its ballot.
RequestGc(r) == ballot[r] \in Ballots /\ owner[ballot[r]] \in Replicas /\ RequestGcTo(r, owner[ballot[r]])

\* The leader grants at once if no one waits, it is not due itself (a due
\* leader waits its turn or is handing off) and fewer than GcBudget
\* replicas count as collecting; otherwise the request waits in the
\* queue.  A request from a replica it counts already is a retry (the
\* grant was lost: granted again) or, if it only assumed it collecting,
\* a fresh request; the spec does not tell the two apart and allows both.
\* granted: whether the core answers with a grant.
HandleGcRequestAs(l, m, granted) ==
    /\ GcCoordination /\ Leads(l) /\ ~Paused(l)
    /\ m.type = "GcRequest" /\ m.to = l /\ m.bal = ballot[l]
    /\ LET p == m.from
           retry == p \in gc.held[l]
           held1 == gc.held[l] \ {p}
           now   == gc.queue[l] = <<>> /\ ~gc.due[l] /\ Cardinality(held1) < GcBudget
       IN  \/ /\ retry /\ granted
              /\ Send(GcMsg("GcGrant", l, p, ballot[l]))
              /\ UNCHANGED gc
           \/ /\ granted = now
              /\ IF now
                 THEN /\ gc' = [gc EXCEPT !.held[l] = held1 \cup {p}]
                      /\ Send(GcMsg("GcGrant", l, p, ballot[l]))
                 ELSE /\ gc' = [gc EXCEPT !.held[l] = held1,
                                          !.queue[l] = IF \E i \in DOMAIN @ : @[i] = p THEN @ ELSE Append(@, p)]
                      /\ UNCHANGED msgs
    /\ GcUnchanged
HandleGcRequest(l, m) == \E g \in BOOLEAN : HandleGcRequestAs(l, m, g)

\* A grant frees up (done, expired): the head of the queue gets it.
GrantGc(l) ==
    /\ GcCoordination /\ Leads(l) /\ ~Paused(l)
    /\ gc.queue[l] # <<>> /\ Cardinality(gc.held[l]) < GcBudget
    /\ LET p == Head(gc.queue[l]) IN
       /\ gc' = [gc EXCEPT !.held[l] = @ \cup {p}, !.queue[l] = Tail(@)]
       /\ Send(GcMsg("GcGrant", l, p, ballot[l]))
    /\ GcUnchanged

\* A grant at the replica's ballot arrives.  Due, it keeps it (and
\* collects, GcCollectGranted); not due (collected already, forced), it
\* frees it at once.  A grant is delivered at most once (it is removed):
\* the core does not match a grant to its request, so a duplicate that
\* came after the leader stopped counting the grant would start an
\* uncounted collection.  Links that do not duplicate (TCP, the
\* simulator's) are assumed.
HandleGcGrant(r, m) ==
    /\ GcCoordination /\ up[r] /\ ~Paused(r)
    /\ m.type = "GcGrant" /\ m.to = r /\ m.bal = ballot[r]
    /\ IF gc.due[r]
       THEN gc' = [gc EXCEPT !.pend[r] = m.bal] /\ msgs' = msgs \ {m}
       ELSE UNCHANGED gc /\ msgs' = (msgs \ {m}) \cup {GcMsg("GcDone", r, m.from, m.bal)}
    /\ GcUnchanged

\* Collect under a grant of the current ballot.  The core collects under
\* a grant held through an old leader's grace even after a ballot change
\* (mutants/gc_stale_grant.tla shows why it must not).  MUTATION POINT.
GrantCurrent(r) == gc.pend[r] = ballot[r]
\* Never while leading: a leader is granted nothing at its own ballot, and
\* an old leader in its grace (gc_transfer_wait, 100 ms) cannot be elected
\* again before it ends (the election timeout is 300 ms): a timing
\* assumption.  (mutants/gc_leader_collects.tla lets a leader collect in
\* place: GcLeaderCollect.)
GcCollectGranted(r) ==
    /\ GcCoordination /\ up[r] /\ ~Paused(r) /\ role[r] # "Leader"
    /\ gc.due[r] /\ gc.pend[r] # 0 /\ GrantCurrent(r)
    /\ gc' = [gc EXCEPT !.due[r] = FALSE, !.coll[r] = "granted", !.gbal[r] = gc.pend[r], !.pend[r] = 0]
    /\ GcUnchanged /\ UNCHANGED msgs

\* No grant before the deadline (gc_wait_max), no headroom, or no one to
\* hand off to: collect anyway, leader or not.
GcCollectForced(r) ==
    /\ GcCoordination /\ up[r] /\ ~Paused(r) /\ gc.due[r]
    /\ gc' = [gc EXCEPT !.due[r] = FALSE, !.coll[r] = "forced", !.pend[r] = 0]
    /\ GcUnchanged /\ UNCHANGED msgs

\* The collection is over; a granted one tells the leader of its grant.
GcDone(r) ==
    /\ GcCoordination /\ up[r] /\ Paused(r)
    /\ gc' = [gc EXCEPT !.coll[r] = "none", !.gbal[r] = 0]
    /\ IF gc.coll[r] = "granted"
       THEN Send(GcMsg("GcDone", r, owner[gc.gbal[r]], gc.gbal[r]))
       ELSE UNCHANGED msgs
    /\ GcUnchanged

\* The leader stops counting a replica: it reported done ...
HandleGcDone(l, m) ==
    /\ GcCoordination /\ Leads(l) /\ ~Paused(l)
    /\ m.type = "GcDone" /\ m.to = l /\ m.bal = ballot[l] /\ m.from \in gc.held[l]
    /\ gc' = [gc EXCEPT !.held[l] = @ \ {m.from}]
    /\ GcUnchanged /\ UNCHANGED msgs
\* ... or its grant timed out (gc_grant_timeout), or, assumed collecting
\* after the election, it was heard from.  Timing assumption: a grant is
\* delivered, used and done with well within gc_grant_timeout (1 s against
\* pauses of milliseconds), so a count expires only when p neither
\* collects under a grant, nor holds one, nor has one it could still use
\* on its way (of its ballot or above).
GcExpire(l, p) ==
    /\ GcCoordination /\ Leads(l) /\ ~Paused(l)
    /\ p \in gc.held[l] /\ gc.coll[p] # "granted" /\ gc.pend[p] = 0
    /\ ~\E m \in msgs : m.type = "GcGrant" /\ m.to = p /\ m.bal >= ballot[p]
    /\ gc' = [gc EXCEPT !.held[l] = @ \ {p}]
    /\ GcUnchanged /\ UNCHANGED msgs

\* A due leader whose turn has come (fewer than GcBudget collecting) hands
\* off: TimeoutNow to t, and it steps down (keeping its ballot); it then
\* asks the next leader for a grant like any follower.  The core picks the
\* most up-to-date follower heard from recently, not collecting or queued,
\* and waits until t has accepted every slot in flight (or
\* gc_transfer_wait): the models require t to hold every instance of the
\* leader's log (TransferTargetOK); trace validation does not (the wait
\* may time out).  In the core this is one step after a silent start.
TransferTo(l, t) ==
    /\ GcCoordination /\ Leads(l) /\ ~Paused(l) /\ gc.due[l]
    /\ Cardinality(gc.held[l]) < GcBudget
    /\ t \in Replicas \ ({l} \cup gc.held[l]) /\ \A i \in DOMAIN gc.queue[l] : gc.queue[l][i] # t
    /\ role' = [role EXCEPT ![l] = "Follower"]
    /\ gc' = [GcStopLeading(gc, l) EXCEPT !.asked[l] = <<NoOwner, 0>>, !.pend[l] = 0]
    /\ Send(GcMsg("TimeoutNow", l, t, ballot[l]))
    /\ UNCHANGED <<ballot, up, log, lastExecuted, trimmed, gle, peerLE, snap,
                   kv, sessions, exec, owner, chosen, votes, crashes, dur, pend>>
\* MUTATION POINT: t is up, follows l's ballot and holds every instance
\* of l's log.
TransferTargetOK(l, t) ==
    /\ up[t] /\ role[t] = "Follower" /\ ballot[t] = ballot[l] /\ ~Paused(t)
    /\ \A s \in DOMAIN log[l] : log[l][s] # Empty =>
          At(log[t], s).bal = log[l][s].bal /\ At(log[t], s).val = log[l][s].val

\* HandOffPromise (Config::gc_handoff_promise): as TransferTo, and the
\* leader first promises b, the ballot t will campaign at (b is t's from
\* here: owner), exactly as it would answer t's Prepare(b): it adopts b
\* (durably: both messages wait for the write) and sends t that promise,
\* its instances above the last executed t reported (peerLE; a lower
\* figure only carries more), with the TimeoutNow (whose slot field names
\* b).  The core sends the two as one message.  Not when it trimmed beyond
\* that point (the core then hands off without a promise).  No wait for t
\* to hold the slots in flight (the core's gc_handoff_eager): the promise
\* carries them.  MUTATION POINT (mutants/handoff_promise_not_adopted.tla):
\* HandOffAdopts, the old leader adopts b and so stops leading at its own
\* ballot.
HandOffAdopts == TRUE
TransferWithPromiseAt(l, t, b) ==
    /\ GcCoordination /\ HandOffPromise /\ Leads(l) /\ ~Paused(l) /\ gc.due[l]
    /\ Cardinality(gc.held[l]) < GcBudget
    /\ t \in Replicas \ ({l} \cup gc.held[l]) /\ \A i \in DOMAIN gc.queue[l] : gc.queue[l][i] # t
    /\ trimmed[l] <= peerLE[l][t]
    /\ b \in Ballots /\ b > ballot[l] /\ owner[b] \in {NoOwner, t}
    /\ owner' = [owner EXCEPT ![b] = t]
    /\ ballot' = [ballot EXCEPT ![l] = IF HandOffAdopts THEN b ELSE @]
    /\ role' = [role EXCEPT ![l] = IF HandOffAdopts THEN "Follower" ELSE @]
    /\ gc' = IF HandOffAdopts THEN [GcStopLeading(gc, l) EXCEPT !.asked[l] = <<NoOwner, 0>>, !.pend[l] = 0]
             ELSE gc
    /\ UNCHANGED <<up, log, lastExecuted, trimmed, gle, peerLE, snap, kv, sessions, exec, chosen, crashes>>
    /\ Out(l, {}, {Msg("TimeoutNow", l, t, ballot[l], b, NoVal, 0, 0, NoEntries, NoSnap),
                   Msg("Promise", l, t, b, 0, NoVal, lastExecuted[l], 0,
                       EntriesOf(l, peerLE[l][t], LastIndex(l)), NoSnap)})
\* Without FineSteps only the smallest unused ballot, as StartElection.
TransferWithPromise(l, t) ==
    \E b \in Ballots :
       /\ \/ FineSteps
          \/ owner[b] = NoOwner /\ \A c \in Ballots : (c > ballot[l] /\ owner[c] = NoOwner) => b <= c
       /\ TransferWithPromiseAt(l, t, b)
\* The target of a hand-off with a promise: up, following l's ballot, not
\* collecting; it need not hold l's log (no wait).
TransferPromiseTargetOK(l, t) ==
    up[t] /\ role[t] = "Follower" /\ ballot[t] = ballot[l] /\ ~Paused(t)
TransferLeadership(l) ==
    \E t \in Replicas :
       \/ TransferTargetOK(l, t) /\ TransferTo(l, t)
       \/ TransferPromiseTargetOK(l, t) /\ TransferWithPromise(l, t)

\* The chosen follower campaigns at once, remembering who handed off;
\* at the ballot the old leader promised (m.slot) if that is above its
\* own, and it then counts that promise (BecomeLeader reads it).
HandleTimeoutNow(r, m) ==
    /\ GcCoordination /\ up[r] /\ ~Paused(r)
    /\ m.type = "TimeoutNow" /\ m.to = r /\ m.bal = ballot[r] /\ role[r] = "Follower"
    /\ IF m.slot > ballot[r] THEN StartElectionAt(r, m.slot) ELSE StartElection(r)
    /\ gc' = [gc EXCEPT !.handoff[r] = m.from]

\* MUTATION POINT (mutants/gc_leader_collects.tla): FALSE, a leader never
\* collects under a grant without handing off.
LeaderCollectsInPlace == FALSE
GcLeaderCollect(l) ==
    /\ LeaderCollectsInPlace
    /\ GcCoordination /\ Leads(l) /\ ~Paused(l) /\ gc.due[l]
    /\ Cardinality(gc.held[l]) < GcBudget
    /\ gc' = [gc EXCEPT !.due[l] = FALSE, !.coll[l] = "granted", !.gbal[l] = ballot[l],
                        !.held[l] = @ \cup {l}]
    /\ GcUnchanged /\ UNCHANGED msgs

\* Each step changes the role or ballot of r alone (a hand-off's leader
\* steps down; its target campaigns, with no pre-vote: a transfer
\* bypasses stickiness, as etcd's does).
GcStep(r) ==
       \/ GcDue(r) \/ RequestGc(r) \/ GrantGc(r) \/ GcCollectGranted(r) \/ GcCollectForced(r)
       \/ GcDone(r) \/ TransferLeadership(r) \/ GcLeaderCollect(r)
       \/ \E p \in Replicas : GcExpire(r, p)
       \/ GcCoordination /\       \* as all four handlers: not tried per message without it
          \E m \in msgs : HandleGcRequest(r, m) \/ HandleGcGrant(r, m) \/ HandleGcDone(r, m)
                         \/ HandleTimeoutNow(r, m)
GcNext == \E r \in Replicas : GcStep(r) /\ PvAfter(r, FALSE)

(***************************************************************************)
(* Pre-vote and leader stickiness: actions                                 *)
(***************************************************************************)
\* Named like the core's trace events (StartPreVote, HandlePreVote; its
\* HandlePreVoteReply only counts a grant, here a read of msgs in
\* ElectAfterPreVote, whose step is the core's StartElection).
\* MUTATION POINT (mutants/no_pre_vote.tla): the election timer starts a
\* pre-vote round rather than an election.
PreVoteFirst == PreVote

\* The ballot a round asks about: the one StartElection would take (its
\* smallest unused ballot above the own one, or with FineSteps any), and
\* claimed at once, as the core's ballots carry their owner's id.  A
\* candidate whose campaign timed out is a follower again.  Grants left
\* from an earlier round are dropped: a timing assumption (a round lasts
\* an election timeout, far longer than a message takes; the core counts
\* a grant by its ballot only; docs/spec.md).  Refusals are kept: they
\* exist only with FineSteps (trace validation), and the core handles
\* every refusal whatever its round, a late one too (a link clogged
\* 1.5 s: the madsim layer's seed 0 with `--gc go --blade`).  Nothing is
\* persisted.
StartPreVote(r) ==
    /\ PreVote /\ up[r] /\ role[r] # "Leader" /\ ~pv.hear[r]
    /\ \E b \in Ballots :
       /\ b > ballot[r] /\ owner[b] \in {NoOwner, r}
       /\ FineSteps \/ \A c \in Ballots : (c > ballot[r] /\ owner[c] \in {NoOwner, r}) => b <= c
       /\ role' = [role EXCEPT ![r] = "Follower"]
       /\ owner' = [owner EXCEPT ![b] = r]
       /\ msgs' = {m \in msgs : ~(m.type = "PreVoteGrant" /\ m.to = r)}
                  \cup {Msg("PreVote", r, Broadcast, b, 0, NoVal, 0, 0, NoEntries, NoSnap)}
       /\ pv' = [pv EXCEPT !.round[r] = b, !.hear[r] = FALSE]
    /\ UNCHANGED <<ballot, up, log, lastExecuted, trimmed, gle, peerLE, snap, kv, sessions, exec,
                   chosen, votes, crashes, dur, pend>>

\* The election timer fires: r's lease has run out (a candidate is never
\* in one).  Without PreVote timing is not modelled at all (StartElection
\* any time, as before).
Campaign(r) ==
    IF ~PreVote THEN StartElection(r)
    ELSE ~InLease(r) /\ (IF PreVoteFirst THEN StartPreVote(r) ELSE StartElection(r))

\* MUTATION POINT (mutants/pre_vote_in_lease.tla): a pre-vote for ballot b
\* is granted if a Prepare of b would be promised and the replica is in
\* no live leader's lease (a leader never grants).
PreVoteGrantOK(r, b) == b > ballot[r] /\ ~InLease(r)

\* Answered at once, whatever the replica's role; nothing changes here.
\* A refusal carries the own ballot, adopted by the asker's StepDown if
\* higher; without FineSteps a follower (as the asker is) takes no
\* StepDown, so a refusal would change nothing and is not sent (fewer
\* states).
HandlePreVote(r, m) ==
    /\ PreVote /\ up[r] /\ m.type = "PreVote" /\ For(r, m)
    /\ IF PreVoteGrantOK(r, m.bal)
       THEN Send(Msg("PreVoteGrant", r, m.from, m.bal, 0, NoVal, 0, 0, NoEntries, NoSnap))
       ELSE /\ FineSteps
            /\ Send(Msg("PreVoteRefuse", r, m.from, ballot[r], 0, NoVal, 0, 0, NoEntries, NoSnap))
    /\ UNCHANGED <<ballot, role, up, log, lastExecuted, trimmed, gle, peerLE, snap, kv, sessions,
                   exec, owner, chosen, votes, crashes, dur, pend, pv>>

\* A majority granted, the own grant included: the election, at exactly
\* the ballot asked about (the core's StartElection after its last
\* HandlePreVoteReply).
ElectAfterPreVote(r) ==
    /\ PreVote /\ pv.round[r] # 0
    /\ Majority({r} \cup {m.from : m \in {m \in msgs : m.type = "PreVoteGrant" /\ For(r, m)
                                                      /\ m.bal = pv.round[r]}})
    /\ StartElectionAt(r, pv.round[r])
    /\ pv' = [pv EXCEPT !.round[r] = 0, !.hear[r] = FALSE]

\* The lease runs out: an election timeout passed without a word from the
\* leader.  Timing is not modelled, so without Partition any time (any
\* message may be late).  With Partition the network is timely but for
\* the cut, so only when r's leader (the owner of its ballot) cannot be
\* heard: down, not leading at r's ballot, paused, or cut from r.
LeaderAudible(r) ==
    LET l == IF ballot[r] \in Ballots THEN owner[ballot[r]] ELSE NoOwner IN
    /\ l \in Replicas /\ l # r /\ up[l] /\ role[l] = "Leader" /\ ballot[l] = ballot[r]
    /\ ~Paused(l) /\ ~Severed(l, r)
LeaseExpire(r) ==
    /\ PreVote /\ up[r] /\ pv.hear[r]
    /\ ~Partition \/ ~LeaderAudible(r)
    /\ pv' = [pv EXCEPT !.hear[r] = FALSE]
    /\ UNCHANGED <<ballot, role, up, log, lastExecuted, trimmed, gle, peerLE, snap, kv, sessions,
                   exec, msgs, owner, chosen, votes, crashes, dur, pend, gc>>

\* The bridge partition (at most one per behaviour): once leader l is
\* settled, every other replica a follower in its lease at its ballot,
\* the link between l and the follower c is cut for good.  Nothing else
\* fails in the model (no crash, no loss): l keeps its majority.
BridgeCut(l, c) ==
    /\ Partition /\ pv.cut = NoCut
    /\ up[l] /\ role[l] = "Leader" /\ ~Paused(l) /\ c # l
    /\ \A r \in Replicas \ {l} : up[r] /\ role[r] = "Follower" /\ ballot[r] = ballot[l] /\ pv.hear[r]
    /\ pv' = [pv EXCEPT !.cut = [leader |-> l, from |-> c, bal |-> ballot[l]]]
    /\ UNCHANGED <<ballot, role, up, log, lastExecuted, trimmed, gle, peerLE, snap, kv, sessions,
                   exec, msgs, owner, chosen, votes, crashes, dur, pend, gc>>

\* The pre-vote steps of r that are protocol steps (a paused replica takes
\* none); each sets pv itself.
PreVoteStep(r) ==
    \/ StartPreVote(r) \/ ElectAfterPreVote(r)
    \/ PreVote /\ \E m \in msgs : HandlePreVote(r, m)

(***************************************************************************)
\* The protocol's steps of r other than BecomeLeader (which sets the
\* coordination state itself); a paused (collecting) replica takes none
\* of them, though it may crash.
\* The steps that hear a leader or candidate (pv: PvAfter).
\* The guards common to the handlers of a message come before the choice of
\* the message (the same steps, in the same order; TLC does not try every
\* message of msgs when they fail).
HearStep(r) ==
    up[r] /\ \E m \in msgs :
        \/ HandlePrepare(r, m) \/ HandleAccept(r, m) \/ HandleHeartbeat(r, m)
        \/ HandleCatchUp(r, m) \/ InstallSnapshot(r, m)
OtherCoreStep(r) ==
    \/ Campaign(r) \/ StepDown(r) \/ LoseQuorum(r)
    \/ Propose(r) \/ HandleAccepted(r) \/ Execute(r)
    \/ SendHeartbeat(r) \/ SendCatchUp(r) \/ Trim(r)
    \/ Persist(r) \/ Restart(r)
    \/ (FineSteps \/ ModelTrim \/ CommitOnAccept) /\ up[r] /\
       \E m \in msgs : Reject(r, m) \/ HandleHeartbeatReply(r, m) \/ LearnCommit(r, m)
CoreStep(r) ==
    \/ HearStep(r) /\ PvAfter(r, TRUE)
    \/ OtherCoreStep(r) /\ PvAfter(r, FALSE)
    \/ PreVoteStep(r)

Next ==
    \/ \E r \in Replicas :
        \/ ~Paused(r) /\ BecomeLeader(r) /\ PvAfter(r, FALSE)
        \/ ~Paused(r) /\ CoreStep(r) /\ GcAfterCore(r)
        \/ Crash(r) /\ gc' = (IF GcCoordination THEN GcForget(gc, r) ELSE gc)   \* a crash ends a collection
                   /\ PvAfter(r, FALSE)
        \/ LeaseExpire(r)
        \/ \E c \in Replicas : BridgeCut(r, c)
    \/ GcNext
    \/ Drop /\ UNCHANGED <<gc, pv>>

Spec == Init /\ [][Next]_vars

Symmetry == Permutations(Replicas)
\* Clients are symmetric too (each permutation of one set is a symmetry;
\* TLC reduces by the permutations listed, a subset of the group is sound).
SymmetryRC == Permutations(Replicas) \cup Permutations(Clients)

(***************************************************************************)
(* Invariants                                                              *)
(***************************************************************************)
Roles == {"Follower", "Candidate", "Leader"}
\* A session table: sessions of ids the log assigned only, seqs within
\* MaxSeq, the bound kept.
SessionsOK(ss) ==
    /\ DOMAIN ss.at = DOMAIN ss.seq
    /\ ss.registered \in 0..NumSlots
    /\ \A c \in DOMAIN ss.seq \ Clients : c \in RegBase..(RegBase + ss.registered - 1)
    /\ \A c \in DOMAIN ss.seq : ss.seq[c] \in 0..MaxSeq /\ ss.at[c] \in 0..NumSlots
    /\ MaxSessions > 0 => NumSessions(ss) <= MaxSessions

TypeOK ==
    /\ ballot \in [Replicas -> {0} \cup Ballots]
    /\ role \in [Replicas -> Roles]
    /\ up \in [Replicas -> BOOLEAN]
    /\ \A r \in Replicas :       \* log[r]: a window over trimmed+1 .. last index
         /\ DOMAIN log[r] \subseteq Slots
         /\ \A s \in DOMAIN log[r] : log[r][s] \in Entry \cup {Empty}
         /\ DOMAIN log[r] # {} => Lo(log[r]) = trimmed[r] + 1 /\ log[r][Hi(log[r])] # Empty
    /\ lastExecuted \in [Replicas -> 0..NumSlots]
    /\ trimmed \in [Replicas -> 0..NumSlots]
    /\ gle \in [Replicas -> 0..NumSlots]
    /\ \A r \in Replicas : Len(exec[r]) = lastExecuted[r]
    /\ \A ss \in {sessions[r] : r \in Replicas} \cup {snap[r].sessions : r \in Replicas} :
         SessionsOK(ss)           \* each distinct table once (they are mostly equal)
    /\ owner \in [Ballots -> Replicas \cup {NoOwner}]
    /\ crashes \in 0..MaxCrashes
    /\ votes.base + Len(votes.at) <= NumSlots
    /\ \A i \in DOMAIN votes.at :
         /\ votes.at[i].cast \subseteq [acc : Replicas, bal : Ballots, val : Values]
         /\ votes.at[i].chosen = ChosenIn(votes.at[i].cast)
    /\ votes.max \in [Replicas -> {0} \cup Ballots]
    /\ \A i \in DOMAIN votes.at : \A x \in votes.at[i].cast :   \* (x.acc is a replica: above)
         x.bal <= votes.max[x.acc]
    /\ \A r \in Replicas : ModelPersist \/ pend[r] = <<>>

\* At most one value is committed per slot, across replicas and over time:
\* in each slot, the leader commits of chosen and the instances the
\* replicas hold as committed have one value.  (The same as comparing
\* every two commits, every two replicas' committed instances and every
\* committed instance with every commit of its slot, at less cost.)
Agreement ==
    \A s \in UNION {DOMAIN log[r] : r \in Replicas} \cup {c.slot : c \in chosen} :
       Cardinality({c.val : c \in {c \in chosen : c.slot = s}}
                   \cup {log[r][s].val : r \in {r \in Replicas : At(log[r], s).com}}) <= 1

\* Same slot, same value; same last executed, same key-value state.
\* Stated against one replica rather than for every two: the executed
\* prefixes agree pairwise iff each is a prefix of the longest (top's),
\* and the replicas of one last executed have one state iff each has the
\* state of the first of them (rep); a commit agrees with every executed
\* prefix reaching its slot iff it agrees with top's.
ExecutedPrefixesAgree ==
    LET top    == CHOOSE r \in Replicas : \A q \in Replicas : lastExecuted[q] <= lastExecuted[r]
        rep(r) == CHOOSE q \in Replicas : lastExecuted[q] = lastExecuted[r]
    IN  /\ \A r \in Replicas :
           /\ \A s \in 1..lastExecuted[r] : exec[r][s] = exec[top][s]
           /\ kv[r] = kv[rep(r)] /\ sessions[r] = sessions[rep(r)]
        /\ \A c \in chosen : c.slot <= lastExecuted[top] => exec[top][c.slot] = c.val

\* Anything chosen at ballot b is in the log (or the executed prefix) of
\* every leader of a ballot >= b.
CommittedSurvivesElection ==
    \A r \in Replicas, c \in chosen :
       (up[r] /\ role[r] = "Leader" /\ c.bal <= ballot[r]) =>
          \/ c.slot <= lastExecuted[r] /\ exec[r][c.slot] = c.val
          \/ At(log[r], c.slot) # Empty /\ log[r][c.slot].val = c.val

\* A (client, seq), seq >= 1, is applied at most once to the key-value
\* state of a replica.  kv[r] is the sequence of every request applied in
\* r's executed prefix: a snapshot carries it and a restart or an install
\* takes it, so this holds across snapshots and restarts too.  (Register
\* requests, seq 0, are not applied to it: executed again, one assigns
\* another id.)
\* Stated as: the positions of requests (seq >= 1) hold distinct requests,
\* checked once per distinct key-value state.
AtMostOnce ==
    \A k \in {kv[r] : r \in Replicas} :
       LET I == {i \in DOMAIN k : k[i][2] >= 1} IN Cardinality({k[i] : i \in I}) = Cardinality(I)

\* The log never drops an instance that is not executed.
TrimmedExecuted == \A r \in Replicas : trimmed[r] <= lastExecuted[r]

\* Every instance held as committed is chosen (a majority voted for its
\* value at one ballot): committing takes a quorum, and so does every way
\* a replica learns of a commit (heartbeat, catch-up, merge, restart).
CommittedIsChosen ==
    \A r \in Replicas : \A s \in DOMAIN log[r] : log[r][s].com => IsChosen(s, log[r][s].val)

\* Every executed value is chosen in its slot.  exec[r] holds the values
\* of the slots up to lastExecuted[r]: all of them (Len = lastExecuted)
\* or, in trace validation, only the last (docs/conformance.md).
ExecutedIsChosen ==
    \A r \in Replicas : \A i \in 1..Len(exec[r]) :
       IsChosen(lastExecuted[r] - Len(exec[r]) + i, exec[r][i])

\* An acceptor never holds an instance of a ballot above its promise, and
\* every ballot it voted in is at most its durable promise (a vote counts
\* only once the promise that covers it is on disk).
AcceptedBelowPromise ==
    /\ \A r \in Replicas : \A s \in DOMAIN log[r] : log[r][s].bal <= ballot[r]
    /\ \A r \in Replicas : votes.max[r] <= DurableBallot(r)

\* Ballots never go down: the in-memory ballot while the replica stays up
\* (with ModelPersist a crash loses a ballot not yet durable, so it may
\* come back lower), and the durable ballot at any time.
BallotMonotonic == [][\A r \in Replicas : up[r] /\ up'[r] => ballot'[r] >= ballot[r]]_vars
DurableBallotMonotonic == [][\A r \in Replicas : DurableBallot(r)' >= DurableBallot(r)]_vars

(***************************************************************************)
(* State constraints for models that leave a feature out                  *)
(***************************************************************************)
\* Nothing is executed (models of merging, where execution only shrinks promises).
NoExecution == \A r \in Replicas : lastExecuted[r] = 0

(***************************************************************************)
(* GC coordination invariants (models/ci_gc.cfg)                           *)
(***************************************************************************)
GcTypeOK ==
    /\ gc.due \in [Replicas -> BOOLEAN]
    /\ gc.coll \in [Replicas -> {"none", "granted", "forced"}]
    /\ gc.gbal \in [Replicas -> {0} \cup Ballots] /\ gc.pend \in [Replicas -> {0} \cup Ballots]
    /\ gc.held \in [Replicas -> SUBSET Replicas] /\ gc.queue \in [Replicas -> Seq(Replicas)]
    /\ gc.count \in 0..MaxGc
    /\ \A r \in Replicas :
         /\ gc.due[r] => gc.coll[r] = "none"           \* a due replica is not collecting
         /\ (gc.coll[r] = "granted") = (gc.gbal[r] # 0)
         /\ role[r] # "Leader" => gc.held[r] = {} /\ gc.queue[r] = <<>>

\* Never more than n - majority replicas collect under grants: a majority
\* is always live (stated on the replicas, not on any leader's count).
GcGrantsWithinBudget ==
    Cardinality({r \in Replicas : gc.coll[r] = "granted"}) <= Cardinality(Replicas) - MajoritySize

\* A leader counts at most n - majority replicas as collecting.
GcLeaderWithinBudget ==
    \A l \in Replicas : role[l] = "Leader" => Cardinality(gc.held[l]) <= Cardinality(Replicas) - MajoritySize

\* Every replica collecting under a grant is counted by every leader of
\* that grant's ballot or a later one (by the grantor as granted, by a
\* later leader as assumed: a paused replica cannot have promised it).
\* With GcLeaderWithinBudget this bounds the collectors whenever there is
\* a leader; it fails at once if a grant of an old ballot is used.
GcCollectorsCounted ==
    \A r, l \in Replicas :
       (gc.coll[r] = "granted" /\ up[l] /\ role[l] = "Leader" /\ l # r /\ ballot[l] >= gc.gbal[r])
          => r \in gc.held[l]

\* A replica never collects under a grant while it leads (a leader due for
\* a collection hands off first).
GcCollectorNotLeader ==
    \A r \in Replicas : gc.coll[r] = "granted" => role[r] # "Leader"

(***************************************************************************)
(* Pre-vote invariants (models/ci_prevote.cfg)                             *)
(***************************************************************************)
PvTypeOK ==
    /\ pv.hear \in [Replicas -> BOOLEAN]
    /\ pv.round \in [Replicas -> {0} \cup Ballots]
    /\ pv.cut \in {NoCut} \cup [leader : Replicas, from : Replicas, bal : Ballots]
    /\ \A r \in Replicas : pv.round[r] # 0 =>      \* a round asks about a ballot above its own
         /\ role[r] = "Follower" /\ ~pv.hear[r]
         /\ pv.round[r] > ballot[r] /\ owner[pv.round[r]] = r

\* What pre-vote buys: a follower cut off from a settled leader that keeps
\* its majority (BridgeCut) cannot unseat it.  The leader stays leader and
\* no replica it reaches ever takes a ballot above its own (one that did
\* would refuse its Accepts and heartbeats).  Without pre-vote the cut
\* follower's election timer raises its ballot and the follower it can
\* still reach promises it (mutants/no_pre_vote.tla); with a pre-vote
\* round, that follower, in the leader's lease, refuses (and so does the
\* leader), so the round never gets a majority.  (The cut follower's own
\* ballot does not move either; stated only for the others, as a ballot
\* no one else adopts harms no one.)
StickyLeader ==
    pv.cut # NoCut =>
       /\ role[pv.cut.leader] = "Leader"
       /\ \A r \in Replicas \ {pv.cut.from} : ballot[r] <= pv.cut.bal

=============================================================================

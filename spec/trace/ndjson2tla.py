#!/usr/bin/env python3
"""Convert an ndjson trace of stutter-core events (docs/trace-format.md) into
the TLA+ module TraceData that spec/TraceMultiPaxos.tla validates.

This TLC build has no Json module, so the trace becomes a TLA+ constant:
a sequence of tuples, one per event, holding the fields the trace spec
reads (tuples, not records: SANY reads a long trace in half the time).
Each tuple is <<action, replica, last_token, ballot, role, last_index,
last_executed, global_last_executed, trimmed>> (the event and its state
summary) followed by the action's fields in the order of FIELDS.  Values
(batches of requests) are compared for identity, so each distinct batch
becomes a number, the no-op (empty batch) 0 (TraceMultiPaxos overrides
Noop accordingly); TraceRequests lists the <<client, seq>> requests of
each, so that the trace spec can keep every replica's session table and
judge at-most-once execution.

Registration (MultiPaxos.tla, section Sessions): a request [nonce, 0] is
a Register (seq 0 is reserved for it; the nonce only routes the reply and
becomes 0 here), and the log assigns client ids 2^63 + k, which the spec
computes from its counter: they become REG_BASE + k (the spec's RegBase).
A request of any other id is not one the core puts in its log: the trace
is refused (exit 2).  The bound of the session
table (session_limit) is read from the `limit` field of the events'
`sessions` summaries (absent: unbounded, as every trace before it).

Usage: ndjson2tla.py TRACE.ndjson OUTDIR   -> OUTDIR/TraceData.tla
Prints the number of events; exits 2 on input it cannot read.
"""
import json
import sys

ROLES = {"Follower", "Candidate", "Leader"}

# Batches numbered 1, 2, ... in order of first appearance; the empty one
# (a no-op) is 0.  Client ids exceed TLC's integers: 2^63 + k becomes
# REG_BASE + k.
BATCHES = {(): 0}
TLC_MAX = 2**31 - 1
REG_ID = 2**63        # the core's first registered id
REG_BASE = 1000000    # MultiPaxos.tla's RegBase
LIMITS = set()        # the session bounds the trace reports


def client(c, q):
    """TLA+ text of the client of request [c, q]."""
    if q == 0:
        return "0"                    # a Register: the nonce is not read
    if c < REG_ID:
        raise ValueError(f"request ({c}, {q}): client id {c} was not assigned by the log (below 2^63)")
    k = c - REG_ID
    if REG_BASE + k > TLC_MAX:
        raise ValueError(f"client id 2^63 + {k} is outside TLC's integers")
    return str(REG_BASE + k)


def small(x, what):
    x = int(x)
    if not 0 <= x <= TLC_MAX:
        raise ValueError(f"{what} {x} is outside TLC's integers")
    return str(x)


def val(v):
    # A request is [client, seq].
    key = tuple((int(r[0]), int(r[1])) for r in (v or []))
    if key not in BATCHES:
        BATCHES[key] = len(BATCHES)
        for c, q in key:
            client(c, q)
            small(q, "sequence number")
    return str(BATCHES[key])


def requests_table():
    """TLA+ text of TraceRequests: the requests of batch v at index v + 1."""
    return "<<" + ",\n  ".join(
        "<<" + ", ".join(f"<<{client(c, q)}, {q}>>" for c, q in key) + ">>"
        for key, _ in sorted(BATCHES.items(), key=lambda kv: kv[1])) + ">>"


def sessions(e):
    """The session table summary of an event: clients, sum of seqs."""
    s = e["sessions"]
    LIMITS.add(int(s.get("limit", 0) or 0))
    return [small(s["clients"], "session count"), small(s["seq_sum"], "sum of session seqs")]


def setof(xs):
    return "{" + ", ".join(str(int(x)) for x in xs) + "}"


def b(x):
    return "TRUE" if x else "FALSE"


def entries(xs):
    return "<<" + ", ".join(
        f"<<{int(x['slot'])}, {int(x['ballot'])}, {val(x['value'])}, {b(x['committed'])}>>"
        for x in xs) + ">>"


def catchup_range(slots):
    """lo, hi of the consecutive slots a catch-up sent (0, 0 if none; lo = -1
    if they are not consecutive, which no step of the spec matches)."""
    if not slots:
        return "0", "0"
    lo, hi = int(slots[0]), int(slots[-1])
    if [int(x) for x in slots] != list(range(lo, hi + 1)):
        return "-1", str(hi)
    return str(lo), str(hi)


# The fields of each action after the common ones, in the order TraceStep
# (spec/TraceMultiPaxos.tla) names them.
FIELDS = {
    "StartElection": lambda e: [str(int(e["ballot"]))],
    "HandlePrepare": lambda e: [str(int(e["from"])), str(int(e["ballot"])), b(e["ok"])],
    "HandlePromise": lambda e: [str(int(e["from"])), str(int(e["ballot"])), b(e["ok"])],
    "BecomeLeader": lambda e: [str(int(e["ballot"])), setof(e["merged_from"]),
                               "-1" if e["snapshot_from"] is None else str(int(e["snapshot_from"])),
                               entries(e["entries"]), *sessions(e)],
    "Propose": lambda e: [str(int(e["slot"])), val(e["value"])],
    "HandleAccept": lambda e: [str(int(e["from"])), str(int(e["ballot"])), str(int(e["slot"])),
                               b(e["ok"]), val(e["value"])],
    "HandleAccepted": lambda e: [str(int(e["from"])), str(int(e["ballot"])), str(int(e["slot"])),
                                 b(e["ok"]), b(e["committed"])],
    "Execute": lambda e: [str(int(e["slot"])), val(e["value"]), str(int(e["applied"])),
                          *sessions(e)],
    "SendHeartbeat": lambda e: [str(int(e["ballot"])), str(int(e["last_executed"])),
                                str(int(e["global_last_executed"]))],
    "HandleHeartbeat": lambda e: [str(int(e["from"])), str(int(e["ballot"])),
                                  str(int(e["leader_last_executed"])),
                                  str(int(e["global_last_executed"])), b(e["ok"]),
                                  setof(e["committed"])],
    "HandleHeartbeatReply": lambda e: [str(int(e["from"])), str(int(e["ballot"])), b(e["ok"]),
                                       str(int(e["last_executed"]))],
    "Trim": lambda e: [str(int(e["up_to"]))],
    "SendCatchUp": lambda e: [str(int(e["to"])), b(e["snapshot"]), *catchup_range(e["slots"])],
    "HandleCatchUp": lambda e: [str(int(e["from"])), str(int(e["ballot"])), setof(e["slots"])],
    "InstallSnapshot": lambda e: [str(int(e["from"])), str(int(e["last_executed"])),
                                  *sessions(e)],
    "StepDown": lambda e: [str(int(e["ballot"]))],
    "Persisted": lambda e: [str(int(e["token"]))],
    "Recover": lambda e: sessions(e),
    # GC coordination (docs/protocol-gc-coordination.md); GcDue's headroom is not read.
    "GcDue": lambda e: [],
    "RequestGc": lambda e: [str(int(e["to"])), str(int(e["ballot"]))],
    "HandleGcRequest": lambda e: [str(int(e["from"])), str(int(e["ballot"])), b(e["granted"])],
    "GrantGc": lambda e: [str(int(e["to"])), str(int(e["ballot"]))],
    "HandleGcGrant": lambda e: [str(int(e["from"])), str(int(e["ballot"]))],
    "Collect": lambda e: [b(e["granted"])],
    "GcDone": lambda e: [],
    "HandleGcDone": lambda e: [str(int(e["from"])), str(int(e["ballot"])), b(e["expired"])],
    "TransferLeadership": lambda e: [str(int(e["to"])), str(int(e["ballot"]))],
    "HandleTimeoutNow": lambda e: [str(int(e["from"])), str(int(e["ballot"]))],
    # Config::gc_handoff_promise and commit_on_accept.
    "TransferWithPromise": lambda e: [str(int(e["to"])), str(int(e["ballot"])), str(int(e["promised"]))],
    "LearnCommit": lambda e: [str(int(e["from"])), str(int(e["ballot"])), str(int(e["slot"])),
                              str(int(e["leader_last_executed"])), setof(e["committed"])],
    # Pre-vote (docs/protocol-pre-vote.md, "Pre-vote").
    "StartPreVote": lambda e: [str(int(e["ballot"]))],
    "HandlePreVote": lambda e: [str(int(e["from"])), str(int(e["ballot"])), b(e["ok"])],
    "HandlePreVoteReply": lambda e: [str(int(e["from"])), str(int(e["ballot"])), b(e["ok"])],
}

# Events that exist only with pre-vote on: a trace that holds one is
# validated with the spec's PreVote = TRUE (TracePreVote).
PRE_VOTE_EVENTS = {"StartPreVote", "HandlePreVote", "HandlePreVoteReply"}


def record(e):
    a = e["action"]
    st = e["state"]
    if st["role"] not in ROLES:
        raise ValueError(f"unknown role {st['role']!r}")
    if a not in FIELDS:
        raise ValueError(f"unknown action {a!r}")
    f = [f'"{a}"', str(int(e["replica"])), str(int(e["last_token"])), str(int(st["ballot"])),
         f'"{st["role"]}"', str(int(st["last_index"])), str(int(st["last_executed"])),
         str(int(st["global_last_executed"])), str(int(st["trimmed"]))]
    return "<<" + ", ".join(f + FIELDS[a](e)) + ">>"


# ----- message pruning -------------------------------------------------
# The spec keeps every message in its network forever (duplication), so
# its state, and TLC's time per step, would grow with the trace.  The trace
# spec instead drops a message once no later event can read it (a Drop of
# the spec, so a pruned behaviour is still one of MultiPaxos).  Which
# events read which messages is known here, from the whole trace: each
# reading event names the message by a key, and a message dies after the
# last event that reads its key.  Keys (TraceMultiPaxos.tla, Readable):
# (type, from, ballot, x) with x the slot of Accept/Accepted, the last
# executed of Heartbeat/HeartbeatReply/Snapshot, the last slot of CatchUp,
# 0 otherwise.  Reads that do not
# pin a message that finely use a coarse key (type, from, ballot), any x,
# or the ballot alone.  A StepDown needs some message of its new ballot:
# the last heartbeat of that ballot from another replica if there was one
# (a fine key), else any message of the ballot.  (Keeping every message of
# a ballot alive until a late StepDown, a leader's own at the end of a run
# for instance, made the network, and each step, grow with the trace.)

TYPES = ["Prepare", "Promise", "Nack", "Accept", "Accepted", "Heartbeat",
         "HeartbeatReply", "CatchUp", "Snapshot", "GcRequest", "GcGrant", "GcDone",
         "TimeoutNow", "PreVote", "PreVoteGrant", "PreVoteRefuse"]


class Sent:
    """What the events before the current one sent, as far as the reads of
    later events need it (see message_reads)."""

    def __init__(self):
        self.state = {}        # replica -> its state after its last event
        self.heartbeats = {}   # ballot -> sender -> last executed of its last heartbeat
        self.replies = {}      # (leader, follower, ballot) -> last executed of the last reply handled
        self.catchups = {}     # (leader, follower, ballot) -> [(first slot, last slot)] sent

    def after(self, e):
        a, st = e["action"], e["state"]
        if a == "SendHeartbeat":
            self.heartbeats.setdefault(e["ballot"], {})[e["replica"]] = e["last_executed"]
        elif a == "HandleHeartbeatReply" and e["ok"]:
            self.replies[(e["replica"], e["from"], e["ballot"])] = e["last_executed"]
        elif a == "SendCatchUp" and not e["snapshot"] and e["slots"]:
            self.catchups.setdefault((e["replica"], e["to"], st["ballot"]), []).append(
                (e["slots"][0], e["slots"][-1]))
        self.state[e["replica"]] = st


def message_reads(e, n, sent):
    """(fine keys, coarse keys, ballots) that event e may read, given what
    the events before it sent."""
    a, st = e["action"], e["state"]
    before = sent.state.get(e["replica"], {"ballot": 0, "last_executed": 0})
    fine, coarse, bals = [], [], []
    if a == "HandlePrepare":
        fine.append(("Prepare", e["from"], e["ballot"], 0))
    elif a == "HandlePromise":
        fine.append(("Promise" if e["ok"] else "Nack", e["from"], e["ballot"], 0))
    elif a == "BecomeLeader":
        fine += [("Promise", q, e["ballot"], 0) for q in e["merged_from"] if q != e["replica"]]
    elif a in ("HandleAccept", "LearnCommit"):
        fine.append(("Accept", e["from"], e["ballot"], e["slot"]))
    elif a == "HandleAccepted":
        if not e["ok"]:
            fine.append(("Nack", e["from"], e["ballot"], 0))
        elif e["committed"]:  # the commit counts every acceptance of the slot
            fine += [("Accepted", q, e["ballot"], e["slot"]) for q in range(n)]
        elif e["from"] != e["replica"]:
            fine.append(("Accepted", e["from"], e["ballot"], e["slot"]))
    elif a == "HandleHeartbeat":
        fine.append(("Heartbeat", e["from"], e["ballot"], e["leader_last_executed"]))
    elif a == "HandleHeartbeatReply":
        if e["ok"]:
            fine.append(("HeartbeatReply", e["from"], e["ballot"], e["last_executed"]))
        else:
            fine.append(("Nack", e["from"], e["ballot"], 0))
    elif a == "SendCatchUp":
        if e["snapshot"] or not e["slots"]:
            # prompted by a reply of the follower: the last one handled
            le = sent.replies.get((e["replica"], e["to"], st["ballot"]))
            if le is None:
                coarse.append(("HeartbeatReply", e["to"], st["ballot"]))
            else:
                fine.append(("HeartbeatReply", e["to"], st["ballot"], le))
        else:
            fine.append(("HeartbeatReply", e["to"], st["ballot"], e["slots"][0] - 1))
    elif a == "HandleCatchUp":
        # CatchUp messages are keyed by their last slot.  One that committed
        # slots S covers S; one that committed nothing (a duplicate, or slots
        # a heartbeat committed meanwhile) is the last sent whose slots were
        # all executed already, or the last sent.
        sends = sent.catchups.get((e["from"], e["replica"], e["ballot"]), [])
        if e["slots"]:
            lo, hi = min(e["slots"]), max(e["slots"])
            his = {b for a_, b in sends if a_ <= lo and hi <= b}
        else:
            done = [b for _, b in sends if b <= before["last_executed"]]
            his = set(done[-1:]) | {b for _, b in sends[-1:]}
        if his:
            fine += [("CatchUp", e["from"], e["ballot"], b) for b in his]
        else:
            coarse.append(("CatchUp", e["from"], e["ballot"]))
    elif a == "InstallSnapshot":
        fine.append(("Snapshot", e["from"], st["ballot"], e["last_executed"]))
    elif a in ("HandleGcRequest", "HandleGcGrant", "HandleTimeoutNow"):
        t = {"HandleGcRequest": "GcRequest", "HandleGcGrant": "GcGrant",
             "HandleTimeoutNow": "TimeoutNow"}[a]
        fine.append((t, e["from"], e["ballot"], 0))
    elif a == "HandlePreVote":
        fine.append(("PreVote", e["from"], e["ballot"], 0))
    elif a == "HandlePreVoteReply":
        # a refusal carries the refuser's ballot, a grant the one asked about
        fine.append(("PreVoteGrant" if e["ok"] else "PreVoteRefuse", e["from"], e["ballot"], 0))
    elif a == "StartElection":
        # after a pre-vote round, the election counts the round's grants
        # (ElectAfterPreVote): any replica's at this ballot
        fine += [("PreVoteGrant", q, e["ballot"], 0) for q in range(n) if q != e["replica"]]
    elif a == "HandleGcDone" and not e["expired"]:
        fine.append(("GcDone", e["from"], e["ballot"], 0))
    elif a == "StepDown" and st["ballot"] > before["ballot"]:   # else its own ballot: reads nothing
        hb = [(f, le) for f, le in sent.heartbeats.get(st["ballot"], {}).items() if f != e["replica"]]
        if hb:
            f, le = max(hb)
            fine.append(("Heartbeat", f, st["ballot"], le))
        else:
            bals.append(st["ballot"])
    return fine, coarse, bals


def by_ballot(d):
    """A TLA+ function over the ballots of d (a small set: a linear search
    by TLC is cheap), mapping each to TLA+ text d[b]."""
    if not d:
        return "[b \\in {} |-> 0]"
    return " @@ ".join(f"({b} :> {v})" for b, v in sorted(d.items()))


def per_type_sender(n, cell):
    """[type |-> <<cell(type, 0), ..., cell(type, n-1)>>]: a record over the
    message types and a tuple over the senders, both looked up by TLC in
    constant time."""
    return "[" + ", ".join(
        f"{t} |-> <<" + ", ".join(cell(t, f) for f in range(n)) + ">>" for t in TYPES) + "]"


def read_tables(events, n):
    """TLA+ text of LastReadFine, LastReadCoarse, LastReadBallot."""
    fine, coarse, bals = {}, {}, {}
    sent = Sent()
    for i, e in enumerate(events, 1):
        f, c, b = message_reads(e, n, sent)
        sent.after(e)
        for k in f:
            fine[k] = i
        for k in c:
            coarse[k] = i
        for k in b:
            bals[k] = i
    # Fine: type -> sender -> ballot -> [lo, v] with v a tuple over
    # x = lo .. lo + Len(v) - 1 (0 where no event reads), so that the last
    # level is an array index too.
    runs = {}
    for (t, f, b, x), i in fine.items():
        runs.setdefault((t, f), {}).setdefault(b, {})[x] = i
    def fine_cell(t, f):
        d = {}
        for b, xs in runs.get((t, f), {}).items():
            lo, hi = min(xs), max(xs)
            d[b] = f"[lo |-> {lo}, v |-> <<" + ", ".join(str(xs.get(x, 0)) for x in range(lo, hi + 1)) + ">>]"
        return by_ballot(d)
    def coarse_cell(t, f):
        return by_ballot({b: i for (t2, f2, b), i in coarse.items() if (t2, f2) == (t, f)})
    return (per_type_sender(n, fine_cell), per_type_sender(n, coarse_cell),
            by_ballot(bals))


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    src, outdir = sys.argv[1], sys.argv[2]
    events = []
    try:
        with open(src) as fh:
            for n, line in enumerate(fh, 1):
                line = line.strip()
                if not line:
                    continue
                e = json.loads(line)
                events.append(e)
        recs = [record(e) for e in events]
        if len(LIMITS) > 1:
            raise ValueError(f"sessions summaries report several bounds: {sorted(LIMITS)}")
    except (OSError, ValueError, KeyError, TypeError) as err:
        print(f"ndjson2tla: {src}: {err}", file=sys.stderr)
        sys.exit(2)
    replicas = sorted({int(e["replica"]) for e in events} | {0})
    n = max(replicas) + 1
    # A pre-vote round claims the ballot it asks about (the spec's owner).
    ballots = sorted({int(e["ballot"]) for e in events
                      if e["action"] in ("StartElection", "StartPreVote")})
    pre_vote = any(e["action"] in PRE_VOTE_EVENTS for e in events)
    slots = [0]
    for e in events:
        st = e["state"]
        slots += [st["last_index"], st["last_executed"]]
        for k in ("slot", "up_to"):
            if k in e:
                slots.append(e[k])
        for x in e.get("entries", []):
            slots.append(x["slot"])
    with open(f"{outdir}/TraceData.tla", "w") as out:
        out.write("---- MODULE TraceData ----\n")
        out.write(f"\\* Generated by spec/trace/ndjson2tla.py from {src}; do not edit.\n")
        out.write("EXTENDS Integers, Sequences, TLC\n")
        out.write(f"TraceReplicas == 0..{n - 1}\n")
        out.write(f"TraceBallots == {setof(ballots) if ballots else '{}'}\n")
        out.write(f"TraceNumSlots == {max(slots) + 1}\n")
        out.write("\\* The bound of the session table (0: none), from the sessions summaries.\n")
        out.write(f"TraceMaxSessions == {max(LIMITS | {0})}\n")
        out.write("\\* Pre-vote on: the trace holds a pre-vote event.\n")
        out.write(f"TracePreVote == {b(pre_vote)}\n")
        out.write("\\* The <<client, seq>> requests of batch v, at index v + 1.\n")
        out.write(f"TraceRequests == {requests_table()}\n")
        fine, coarse, bals = read_tables(events, n)
        out.write("\\* Index of the last event that may read a message, by key (see message_reads).\n")
        out.write(f"LastReadFine == {fine}\n")
        out.write(f"LastReadCoarse == {coarse}\n")
        out.write(f"LastReadBallot == {bals}\n")
        out.write("Trace == <<\n")
        out.write(",\n".join(recs))
        out.write("\n>>\n====\n")
    print(len(events))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Convert an ndjson trace of stutter-core events (docs/trace-format.md) into
the TLA+ module TraceData that spec/TraceMultiPaxos.tla validates.

This TLC build has no Json module, so the trace becomes a TLA+ constant:
a sequence of records, one per event, holding the fields the trace spec
reads.  Values (batches of requests) become tuples of <<client, seq>>; a
no-op becomes <<>> (TraceMultiPaxos overrides Noop accordingly).

Usage: ndjson2tla.py TRACE.ndjson OUTDIR   -> OUTDIR/TraceData.tla
Prints the number of events; exits 2 on input it cannot read.
"""
import json
import sys

ROLES = {"Follower", "Candidate", "Leader"}


# Client ids (the real node derives them from the clock) and sequence
# numbers may exceed TLC's 32-bit integers; values are compared only for
# identity, so each is renumbered 1, 2, ... in order of first appearance.
CLIENTS = {}
SEQS = {}


def small(table, x):
    return table.setdefault(int(x), len(table) + 1)


def val(v):
    if v is None:
        return "<<>>"
    return "<<" + ", ".join(f"<<{small(CLIENTS, c)}, {small(SEQS, s)}>>" for c, s in v) + ">>"


def seq(xs):
    return "<<" + ", ".join(str(int(x)) for x in xs) + ">>"


def setof(xs):
    return "{" + ", ".join(str(int(x)) for x in xs) + "}"


def b(x):
    return "TRUE" if x else "FALSE"


def record(e):
    a = e["action"]
    st = e["state"]
    if st["role"] not in ROLES:
        raise ValueError(f"unknown role {st['role']!r}")
    f = {
        "a": f'"{a}"',
        "r": int(e["replica"]),
        "tok": int(e["last_token"]),
        "sb": int(st["ballot"]),
        "srole": f'"{st["role"]}"',
        "sli": int(st["last_index"]),
        "sle": int(st["last_executed"]),
        "sgle": int(st["global_last_executed"]),
        "strim": int(st["trimmed"]),
    }
    if a == "StartElection":
        f["bal"] = int(e["ballot"])
    elif a in ("HandlePrepare", "HandlePromise"):
        f.update(frm=int(e["from"]), bal=int(e["ballot"]), ok=b(e["ok"]))
    elif a == "BecomeLeader":
        ents = [
            f'[slot |-> {int(x["slot"])}, bal |-> {int(x["ballot"])}, val |-> {val(x["value"])}, com |-> {b(x["committed"])}]'
            for x in e["entries"]
        ]
        f.update(bal=int(e["ballot"]), merged=setof(e["merged_from"]),
                 snapfrom=-1 if e["snapshot_from"] is None else int(e["snapshot_from"]),
                 entries="<<" + ", ".join(ents) + ">>")
    elif a == "Propose":
        f.update(slot=int(e["slot"]), val=val(e["value"]))
    elif a == "HandleAccept":
        f.update(frm=int(e["from"]), bal=int(e["ballot"]), slot=int(e["slot"]), ok=b(e["ok"]), val=val(e["value"]))
    elif a == "HandleAccepted":
        f.update(frm=int(e["from"]), bal=int(e["ballot"]), slot=int(e["slot"]), ok=b(e["ok"]), com=b(e["committed"]))
    elif a == "Execute":
        f.update(slot=int(e["slot"]), val=val(e["value"]))
    elif a == "SendHeartbeat":
        f.update(bal=int(e["ballot"]), le=int(e["last_executed"]), gle=int(e["global_last_executed"]))
    elif a == "HandleHeartbeat":
        f.update(frm=int(e["from"]), bal=int(e["ballot"]), lle=int(e["leader_last_executed"]),
                 gle=int(e["global_last_executed"]), ok=b(e["ok"]), slots=setof(e["committed"]))
    elif a == "HandleHeartbeatReply":
        f.update(frm=int(e["from"]), bal=int(e["ballot"]), ok=b(e["ok"]), le=int(e["last_executed"]))
    elif a == "Trim":
        f.update(upto=int(e["up_to"]))
    elif a == "SendCatchUp":
        f.update(to=int(e["to"]), slots=seq(e["slots"]), snapshot=b(e["snapshot"]))
    elif a == "HandleCatchUp":
        f.update(frm=int(e["from"]), bal=int(e["ballot"]), slots=setof(e["slots"]))
    elif a == "InstallSnapshot":
        f.update(frm=int(e["from"]), le=int(e["last_executed"]))
    elif a == "StepDown":
        f.update(bal=int(e["ballot"]))
    elif a == "Persisted":
        f.update(token=int(e["token"]))
    elif a == "Recover":
        pass
    else:
        raise ValueError(f"unknown action {a!r}")
    return "[" + ", ".join(f"{k} |-> {v}" for k, v in f.items()) + "]"


# ----- message pruning -------------------------------------------------
# The spec keeps every message in its network forever (duplication), so
# its state, and TLC's time per step, would grow with the trace.  The trace
# spec instead drops a message once no later event can read it (a Drop of
# the spec, so a pruned behaviour is still one of MultiPaxos).  Which
# events read which messages is known here, from the whole trace: each
# reading event names the message by a key, and a message dies after the
# last event that reads its key.  Keys (TraceMultiPaxos.tla, Readable):
# (type, from, ballot, x) with x the slot of Accept/Accepted or the last
# executed of Heartbeat/HeartbeatReply, 0 otherwise.  Reads that do not
# pin a message that finely use a coarse key (type, from, ballot), any x,
# or, for a StepDown (any message of the new ballot), the ballot alone.

TYPES = ["Prepare", "Promise", "Nack", "Accept", "Accepted", "Heartbeat",
         "HeartbeatReply", "CatchUp", "Snapshot"]


def message_reads(e, n):
    """(fine keys, coarse keys, ballots) that event e may read."""
    a, st = e["action"], e["state"]
    fine, coarse, bals = [], [], []
    if a == "HandlePrepare":
        fine.append(("Prepare", e["from"], e["ballot"], 0))
    elif a == "HandlePromise":
        fine.append(("Promise" if e["ok"] else "Nack", e["from"], e["ballot"], 0))
    elif a == "BecomeLeader":
        fine += [("Promise", q, e["ballot"], 0) for q in e["merged_from"] if q != e["replica"]]
    elif a == "HandleAccept":
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
            coarse.append(("HeartbeatReply", e["to"], st["ballot"]))
        else:
            fine.append(("HeartbeatReply", e["to"], st["ballot"], e["slots"][0] - 1))
    elif a == "HandleCatchUp":
        fine.append(("CatchUp", e["from"], e["ballot"], 0))
    elif a == "InstallSnapshot":
        coarse.append(("Snapshot", e["from"], st["ballot"]))
    elif a == "StepDown":
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
    for i, e in enumerate(events, 1):
        f, c, b = message_reads(e, n)
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
    except (OSError, ValueError, KeyError, TypeError) as err:
        print(f"ndjson2tla: {src}: {err}", file=sys.stderr)
        sys.exit(2)
    replicas = sorted({int(e["replica"]) for e in events} | {0})
    n = max(replicas) + 1
    ballots = sorted({int(e["ballot"]) for e in events if e["action"] == "StartElection"})
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

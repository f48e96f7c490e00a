#!/usr/bin/env python3
"""Make a trace with client registration, eviction and expiry out of a
simulated one, until the core traces them itself (docs/conformance.md,
"Registration and bounded sessions").

It takes a run of legacy clients (`sim run --seed 1 --scenario calm
--legacy-clients --duration 1.5 --rate 100 --trace F`; the simulator's
clients did not register when it was written, and register by default
since), keeps its events up to the last Execute of slot
len(SCRIPT), and rewrites the value of slot k (wherever the trace shows
it: Propose, HandleAccept, BecomeLeader entries, Execute) to SCRIPT[k].
It then recomputes, for every replica, what executing the new values does
under the contract of the core's registration (MultiPaxos.tla, section
Sessions): each Execute's `applied` and every `sessions` summary, which
also gets `limit` (the bound the converter reads).

  register_trace.py SIM_TRACE OUT_VALID [OUT_INVALID]

OUT_INVALID, if given, is the same trace cut at the leader's Execute of
the last slot (a delayed original of a request whose session was
evicted), with `applied` 1: as if the expired request executed again.
"""
import json
import sys

LIMIT = 2
B = 2**63                      # the core's first registered id


def reg(nonce):
    return [nonce, 0]          # a Register request


# Slot k's batch (index k - 1), with a bound of LIMIT = 2 sessions.
SCRIPT = [
    [reg(11)],                     # 1: B registered (session at seq 0)
    [[B, 1], [B, 1]],              # 2: B's seq 1, and a duplicate in the same batch
    [reg(12)],                     # 3: B + 1 registered: 2 sessions
    [[B + 1, 1]],                  # 4: B + 1's seq 1
    [reg(13), [B, 2]],             # 5: B + 2 registered, evicting B (last executed in
                                   #    slot 2, before B + 1's slot 4); B's seq 2 expired
    [[B + 1, 2], [B + 9, 1]],      # 6: B + 1's seq 2; B + 9 not assigned: unknown
    [[B, 1]],                      # 7: a delayed original of B's seq 1: expired
]


class Table:
    """One replica's session table under the registration contract."""

    def __init__(self):
        self.seq, self.at, self.registered = {}, {}, 0

    def room(self):
        if len(self.seq) >= LIMIT:
            victim = min(self.seq, key=lambda c: (self.at[c], c))
            del self.seq[victim], self.at[victim]

    def execute(self, batch, slot):
        applied = 0
        for c, q in batch:
            if q == 0:
                self.room()
                self.seq[B + self.registered] = 0
                self.at[B + self.registered] = slot
                self.registered += 1
                applied += 1
            elif c in self.seq:
                if q > self.seq[c]:
                    self.seq[c], self.at[c] = q, slot
                    applied += 1
            # else: a registered id without a session, expired or unknown
        return applied

    def summary(self):
        return {"clients": len(self.seq), "seq_sum": sum(self.seq.values()), "limit": LIMIT}


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    events = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    n = len(SCRIPT)
    execs = [i for i, e in enumerate(events) if e["action"] == "Execute" and e["slot"] == n]
    replicas = {e["replica"] for e in events}
    if len(execs) < len(replicas):
        sys.exit(f"register_trace: not every replica executes slot {n}")
    events = events[:execs[-1] + 1]
    by_value = {}               # original batch -> its slot
    for e in events:
        if e["action"] in ("Propose", "HandleAccept", "Execute"):
            by_value.setdefault(json.dumps(e["value"]), e["slot"])
        for x in e.get("entries", []):
            by_value.setdefault(json.dumps(x["value"]), x["slot"])

    def new(value):
        if value is None:
            return None
        slot = by_value[json.dumps(value)]
        if slot > n:
            sys.exit(f"register_trace: slot {slot} is beyond the script")
        return SCRIPT[slot - 1]

    tables = {r: Table() for r in replicas}
    last_leader_exec = None
    for i, e in enumerate(events):
        r = e["replica"]
        if "value" in e:
            e["value"] = new(e["value"])
        for x in e.get("entries", []):
            x["value"] = new(x["value"])
        # a table taken from a snapshot is not recomputed here
        if e["action"] in ("InstallSnapshot", "Recover") or e.get("snapshot_from") is not None:
            sys.exit(f"register_trace: {e['action']} (a snapshot's table) is not handled")
        if e["action"] == "Execute":
            e["applied"] = tables[r].execute(e["value"], e["slot"])
            if e["slot"] == n and e["state"]["role"] == "Leader":
                last_leader_exec = i
        if "sessions" in e:
            e["sessions"] = tables[r].summary()
    with open(sys.argv[2], "w") as out:
        for e in events:
            out.write(json.dumps(e, separators=(",", ":")) + "\n")
    if len(sys.argv) == 4:
        bad = events[:last_leader_exec + 1]
        bad[-1]["applied"] = 1
        with open(sys.argv[3], "w") as out:
            for e in bad:
                out.write(json.dumps(e, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()

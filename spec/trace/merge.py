#!/usr/bin/env python3
"""Merge the per-replica traces of a real cluster into one trace.

Usage: merge.py [--gone I,...] TRACE... > MERGED.ndjson

Each replica process writes its own trace file; its `time` is microseconds
since the Unix epoch (read once at start, advanced by the monotonic clock),
so times of replicas on one machine are comparable.  Every event is traced
with the time its handler started, and a message is received after it was
sent, so ordering all events by time (keeping each file's own order for
equal times) gives an order consistent with causality, which is what the
trace spec needs.  Only for replicas sharing one clock.

A process that was killed loses the end of its trace (buffered lines, a
torn last line).  So the merged trace stops at the earliest time at which
some file ends: up to then every file is complete, after it an event could
answer a message whose sending was lost.  A prefix of a behaviour is a
behaviour, so the cut trace is still one the spec must accept.  What is
cut is reported on stderr.

`--gone I,...` names traces (0-based, in the order given) whose process
stopped for good before the others ended (a replica that refused to start
on damaged state, in the simulation layers): their end does not cut the
merge, or everything after it would go unjudged.  Their last process was
killed too, so a lost last line could make the spec reject what others
did after it (a spurious rejection); the lost line itself goes unjudged,
as it would with the default cut.
"""
import heapq
import json
import sys


def events(i, path):
    """(time, file index, line number, line) of every readable event."""
    out = []
    with open(path) as fh:
        for n, line in enumerate(fh):
            line = line.strip()
            if not line:
                continue
            try:
                t = int(json.loads(line)["time"])
            except (ValueError, KeyError, TypeError):
                # A process killed mid-write leaves a torn last line.
                print(f"merge: {path}:{n + 1}: skipped unreadable line", file=sys.stderr)
                continue
            out.append((t, i, n, line))
    return out


def main():
    args = sys.argv[1:]
    gone = set()
    if args[:1] == ["--gone"] and len(args) >= 2:
        gone = {int(x) for x in args[1].split(",") if x.strip()}
        args = args[2:]
    if not args:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    files = [events(i, p) for i, p in enumerate(args)]
    ends = [f[-1][0] for i, f in enumerate(files) if f and i not in gone]
    # Every trace gone for good (a whole cluster refusing): nothing to cut.
    cut = min(ends) if ends else float("inf")
    kept = dropped = 0
    for t, _, _, line in heapq.merge(*files):
        if t > cut:
            dropped += 1
            continue
        kept += 1
        print(line)
    if dropped:
        print(f"merge: {kept} events; cut {dropped} after time {cut}, where the first trace ends",
              file=sys.stderr)


if __name__ == "__main__":
    main()

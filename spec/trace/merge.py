#!/usr/bin/env python3
"""Merge the per-replica traces of a real cluster into one trace.

Usage: merge.py TRACE... > MERGED.ndjson

Each replica process writes its own trace file; its `time` is microseconds
since the Unix epoch (read once at start, advanced by the monotonic clock),
so times of replicas on one machine are comparable.  A message is received
after it was sent, so ordering all events by time (keeping each file's own
order for equal times) gives an order consistent with causality, which is
what the trace spec needs.  Only for replicas sharing one clock.
"""
import heapq
import json
import sys


def events(i, path):
    with open(path) as fh:
        for n, line in enumerate(fh):
            line = line.strip()
            if not line:
                continue
            try:
                t = json.loads(line)["time"]
            except (ValueError, KeyError):
                # A process killed mid-write leaves a torn last line.
                print(f"merge: {path}:{n + 1}: skipped unreadable line", file=sys.stderr)
                continue
            yield (t, i, n, line)


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    for _, _, _, line in heapq.merge(*(events(i, p) for i, p in enumerate(sys.argv[1:]))):
        print(line)


if __name__ == "__main__":
    main()

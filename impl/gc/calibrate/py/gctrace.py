"""Parse the Go runtime's GODEBUG=gctrace=1 lines (one per cycle).

A line reads (Go 1.26):

  gc 12 @2.777s 0%: 0.12+13+0.003 ms clock, 0.25+0/2.8/16+0.007 ms cpu,
     109->109->62 MB, 124 MB goal, 0 MB stacks, 0 MB globals, 2 P

clock: wall time of sweep termination (stop-the-world), concurrent mark,
mark termination (stop-the-world). cpu: sweep termination, mark assists /
dedicated+fractional background marking / idle marking, mark termination;
the runtime computes these from the time Ps spend in each state, so they
are P-time, not OS CPU time. Heap: at the start of the cycle, at the end of
mark, marked live; then the goal. "MB" in this output is MiB (the runtime
shifts by 20).
"""

import re

LINE = re.compile(
    r"gc (\d+) @([\d.]+)s \d+%: "
    r"([\d.]+)\+([\d.]+)\+([\d.]+) ms clock, "
    r"([\d.]+)\+([\d.]+)/([\d.]+)/([\d.]+)\+([\d.]+) ms cpu, "
    r"(\d+)->(\d+)->(\d+) MB, (\d+) MB goal, (\d+) MB stacks, (\d+) MB globals, (\d+) P"
    r"( \(forced\))?"
)


def parse(text):
    """Cycles as dicts, in order."""
    cycles = []
    for line in text.splitlines():
        m = LINE.search(line)
        if not m:
            continue
        g = m.groups()
        f = [float(x) for x in g[:17]]
        cycles.append({
            "n": int(f[0]), "at_s": f[1],
            "stw_sweep_term_ms": f[2], "mark_wall_ms": f[3], "stw_mark_term_ms": f[4],
            "cpu_sweep_term_ms": f[5], "cpu_assist_ms": f[6], "cpu_background_ms": f[7],
            "cpu_idle_ms": f[8], "cpu_mark_term_ms": f[9],
            "heap_start_mib": f[10], "heap_end_mib": f[11], "live_mib": f[12], "goal_mib": f[13],
            "stacks_mib": f[14], "globals_mib": f[15], "procs": int(f[16]),
            "forced": g[17] is not None,
        })
    return cycles


def mark_cpu_ms(c):
    """P-time spent marking in one cycle: assists, background, idle workers."""
    return c["cpu_assist_ms"] + c["cpu_background_ms"] + c["cpu_idle_ms"]


def in_window(cycles, start_s, end_s):
    """Cycles that started inside [start_s, end_s) and are not forced."""
    return [c for c in cycles if start_s <= c["at_s"] < end_s and not c["forced"]]

"""Seed swarms of the three simulation layers, sharded by seed range.

A shard is `A..B`: the layer's own swarm command over those seeds on one
core. The driver checks that each shard ran exactly B - A runs (else an
infrastructure error), and merges the failing seeds in seed order with
the command that replays each."""

import re

from . import jobs
from .fanout import fan_out, progress

# layer -> how a shard runs, what its failing-seed lines and summary look
# like, and how a seed replays.
LAYERS = {
    "sim": {
        "binary": "target/release/sim",
        "argv": lambda lo, hi: ["swarm", "--seeds", f"{lo}..{hi}", "--jobs", "1"],
        "fail": re.compile(r"^FAIL seed (\d+) (.*)$"),
        "summary": re.compile(r"^swarm (\d+)\.\.(\d+): (\d+) runs, (\d+) failing"),
        "runs": lambda m: int(m.group(3)),
        "replay": "target/release/sim run --seed {seed}",
        "swarm_only": {"--jobs": 1, "--fail-fast": 0},
    },
    "turmoil": {
        "binary": "dsim/turmoil/target/release/stutter-dsim-turmoil",
        "argv": lambda lo, hi: ["swarm", "--from", str(lo), "--count", str(hi - lo)],
        "fail": re.compile(r"^seed (\d+) ((?:FAILED|ERROR): .*)$"),
        "summary": re.compile(r"^(\d+) seeds, (\d+) failed"),
        "runs": lambda m: int(m.group(1)),
        "replay": "dsim/turmoil/target/release/stutter-dsim-turmoil run --seed {seed}",
        "swarm_only": {},
    },
    "madsim": {
        "binary": "dsim/madsim/target/release/stutter-dsim-madsim",
        "argv": lambda lo, hi: ["swarm", "--seeds", f"{lo}..{hi}"],
        "fail": re.compile(r"^seed (\d+) ((?:FAILED|ERROR): .*)$"),
        "summary": re.compile(r"^(\d+) seeds, (\d+) failed"),
        "runs": lambda m: int(m.group(1)),
        "replay": "dsim/madsim/target/release/stutter-dsim-madsim run --seed {seed}",
        "swarm_only": {},
    },
}


def parse_range(text):
    a, sep, b = text.partition("..")
    if not sep:
        raise ValueError(f"seeds must be A..B, not {text!r}")
    lo, hi = int(a), int(b)
    if hi < lo:
        raise ValueError(f"empty or reversed range {text!r}")
    return lo, hi


def shards(lo, hi, size):
    return [(a, min(a + size, hi)) for a in range(lo, hi, size)]


def default_shard_size(count, workers):
    # About eight shards a worker: a slow shard at the end delays the
    # whole run by at most an eighth of a worker's share.
    return max(1, -(-count // max(1, workers * 8)))


def replay_args(layer, extra):
    """The swarm's extra arguments that `run` takes too."""
    skip = LAYERS[layer]["swarm_only"]
    out, i = [], 0
    while i < len(extra):
        a = extra[i]
        if a in skip:
            i += 1 + skip[a]
            continue
        out.append(a)
        i += 1
    return out


def judge_shard(layer, lo, hi, result):
    """(failing [(seed, text)], error or None) of one shard's result."""
    spec = LAYERS[layer]
    rc, out = result["rc"], result["stdout"]
    failing, runs = [], None
    for line in out.splitlines():
        m = spec["fail"].match(line)
        if m:
            failing.append((int(m.group(1)), m.group(2)))
            continue
        m = spec["summary"].match(line)
        if m:
            runs = spec["runs"](m)
    where = f"on {result['host']} (pid {result['pid']})"
    if rc not in (0, 1):
        tail = result["stderr"].strip().splitlines()[-3:]
        return failing, f"exit {rc} {where}: {' | '.join(tail)}"
    if runs is None:
        return failing, f"no summary line {where}"
    if runs != hi - lo:
        return failing, f"ran {runs} of {hi - lo} seeds {where}"
    if (rc == 1) != bool(failing):
        return failing, f"exit {rc} with {len(failing)} failing seed line(s) {where}"
    outside = [s for s, _ in failing if not lo <= s < hi]
    if outside:
        return failing, f"failing seeds {outside} outside the shard {where}"
    return failing, None


def run(client, outcome, layer, binary, lo, hi, shard_size, extra):
    spec = LAYERS[layer]
    parts = shards(lo, hi, shard_size)
    argv = {p: spec["argv"](*p) + list(extra) for p in parts}
    replay = " ".join([spec["replay"]] + replay_args(layer, extra))
    runs = 0

    def judge(name, result):
        nonlocal runs
        a, b = bounds[name]
        failing, err = judge_shard(layer, a, b, result)
        for seed, text in failing:
            outcome.fail(seed, f"FAIL seed {seed} {text}\n  replay: {replay.format(seed=seed)}")
        if err:
            outcome.error(f"{name}: {err}")
        else:
            runs += b - a
            progress(f"shard {a}..{b}: {b - a} runs, {len(failing)} failing, {result['seconds']:.1f} s on {result['host']}")

    bounds = {f"shard {a}..{b}": (a, b) for a, b in parts}
    todo = [(f"shard {a}..{b}", jobs.run_shipped, (binary, argv[(a, b)])) for a, b in parts]
    secs = fan_out(client, todo, outcome, judge)
    return runs, len(parts), secs

"""scripts/fleet: fan stutter's judges out over a Dask cluster.

    scripts/fleet swarm --seeds 0..1000000 [--layer sim|turmoil|madsim] [--scheduler tcp://HOST:8786] [-- SWARM ARGS]
    scripts/fleet tlc-simulate --model large_trim [--mutant NAME] --shards 8 --num 3000 --depth 60
    scripts/fleet validate TRACE.ndjson...
    scripts/fleet tlc-distributed --model ci_small [--mutant NAME] --host HOST
    scripts/fleet campaigns --seeds 1..5 [--collect DIR] [-- jepsen/run ARGS]

Without --scheduler, a LocalCluster of --workers processes on this
machine. Exit 0: every job passed; 1: failures (failing seeds, rejected
traces, violations), listed in order; 2: an infrastructure error (a job
lost with its worker, a job that died, a shard whose run count does not
match its range), named — the answer is then incomplete.
"""

import argparse
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parser():
    p = argparse.ArgumentParser(prog="scripts/fleet", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--scheduler", help="address of a running Dask scheduler (default: a LocalCluster here)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="LocalCluster worker processes (default: cores)")
    p.add_argument("--allowed-failures", type=int, default=0,
                   help="LocalCluster: times Dask re-runs a job whose worker died before reporting it lost (default 0)")
    sub = p.add_subparsers(dest="cmd", required=True)

    s = sub.add_parser("swarm", help="a seed range of a simulation layer's swarm, sharded")
    s.add_argument("--seeds", required=True, help="A..B (B excluded)")
    s.add_argument("--layer", choices=["sim", "turmoil", "madsim"], default="sim")
    s.add_argument("--binary", help="the layer's built binary (default: this checkout's release build)")
    s.add_argument("--shard-size", type=int, help="seeds per job (default: about eight jobs per worker)")
    s.add_argument("extra", nargs="*", help="after --: arguments for every shard's swarm command")

    t = sub.add_parser("tlc-simulate", help="TLC -simulate with distinct seeds, one run per job")
    t.add_argument("--model", required=True, help="a cfg of spec/models (without .cfg)")
    t.add_argument("--mutant", help="a spec/mutants module instead of MultiPaxos (with its OVERRIDE lines)")
    t.add_argument("--shards", type=int, default=4)
    t.add_argument("--num", type=int, default=3000, help="behaviours per run")
    t.add_argument("--depth", type=int, default=60)
    t.add_argument("--seed", type=int, default=1, help="first seed; run i uses seed + i")

    v = sub.add_parser("validate", help="spec/validate on many traces at once")
    v.add_argument("traces", nargs="+")

    d = sub.add_parser("tlc-distributed", help="exhaustive TLC, distributed mode (safety only, verdict read from output)")
    d.add_argument("--model", required=True)
    d.add_argument("--mutant")
    d.add_argument("--host", default="127.0.0.1", help="this host's address as the workers reach it")
    d.add_argument("--tlc-workers", type=int, default=2)
    d.add_argument("--invariants-only", action="store_true",
                   help="drop the cfg's PROPERTY lines (distributed TLC ignores them) instead of refusing")

    c = sub.add_parser("campaigns", help="independent jepsen/run campaigns, result folders collected")
    c.add_argument("--seeds", required=True, help="A..B")
    c.add_argument("--repo", default=REPO, help="the checkout at this path on every worker host")
    c.add_argument("--collect", default=os.path.join(REPO, "jepsen", "results", "fleet"))
    c.add_argument("--timeout", type=float, default=3600)
    c.add_argument("extra", nargs="*", help="after --: arguments for every jepsen/run")
    return p


def main(argv=None):
    args = parser().parse_args(argv)
    # Imported here so that --help works before scripts/setup installed Dask.
    from . import campaigns, cluster, shipping, swarm, tlc
    from .outcome import Outcome

    outcome = Outcome()
    with cluster.connect(args.scheduler, args.workers, args.allowed_failures) as client:
        workers = max(1, len(client.scheduler_info().get("workers", {})))
        if args.cmd == "swarm":
            lo, hi = swarm.parse_range(args.seeds)
            binary = args.binary or os.path.join(REPO, swarm.LAYERS[args.layer]["binary"])
            if not os.path.isfile(binary):
                print(f"fleet: {binary} not built", file=sys.stderr)
                return 2
            shipped = shipping.ship_file(client, binary)
            size = args.shard_size or swarm.default_shard_size(hi - lo, workers)
            runs, n, secs = swarm.run(client, outcome, args.layer, (shipped.name, shipped.digest, shipped.data),
                                      lo, hi, size, args.extra)
            print(f"fleet swarm {args.layer} {lo}..{hi}: {runs} runs in {n} shards of {size} on {workers} worker(s), "
                  f"{secs:.1f} s, {runs / max(secs, 1e-9) * 60:.0f} runs/min")
            return outcome.report(f"fleet swarm {args.layer} {lo}..{hi}")
        bundle = None
        if args.cmd in ("tlc-simulate", "validate", "tlc-distributed"):
            b = shipping.ship_tree(client, "bundle", tlc.bundle_members(REPO))
            bundle = (b.name, b.digest, b.data)
        if args.cmd == "tlc-simulate":
            checked, secs = tlc.simulate(client, outcome, bundle, REPO, args.model, args.mutant,
                                         args.shards, args.num, args.depth, args.seed)
            print(f"fleet tlc-simulate {args.mutant or 'MultiPaxos'} on {args.model}: {args.shards} runs, "
                  f"{checked} states checked, {secs:.1f} s on {workers} worker(s)")
            return outcome.report("fleet tlc-simulate")
        if args.cmd == "validate":
            secs = tlc.validate(client, outcome, bundle, args.traces)
            print(f"fleet validate: {len(args.traces)} traces, {secs:.1f} s on {workers} worker(s)")
            return outcome.report("fleet validate")
        if args.cmd == "tlc-distributed":
            v = tlc.distributed(client, outcome, bundle, REPO, args.model, args.mutant, args.host,
                                min(args.tlc_workers, workers), args.invariants_only)
            if v is None:
                return 2
            return outcome.report("fleet tlc-distributed")
        if args.cmd == "campaigns":
            lo, hi = swarm.parse_range(args.seeds)
            secs = campaigns.run(client, outcome, args.repo, range(lo, hi), args.extra, args.collect, args.timeout)
            print(f"fleet campaigns {lo}..{hi}: {hi - lo} campaigns, {secs:.0f} s on {workers} worker(s), results in {args.collect}")
            return outcome.report("fleet campaigns")
    return 2

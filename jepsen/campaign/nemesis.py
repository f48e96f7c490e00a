"""The nemesis: faults scheduled from the seed (partitions, kills, power cuts,
pauses, loss, delay, collections), each logged with when it began and healed."""
import datetime
import json
import os
import random
import threading
import time

from campaign.common import log


class Nemesis(threading.Thread):
    def __init__(self, cluster, kinds, seed, duration, outdir, election_ms):
        super().__init__(daemon=True)
        self.c, self.kinds, self.rng, self.duration = cluster, kinds, random.Random(seed), duration
        self.election_ms = election_ms
        self.ndjson = open(os.path.join(outdir, "nemesis.ndjson"), "a")
        self.text = open(os.path.join(outdir, "nemesis.log"), "a")
        self.t0 = None
        self.next_id = 0
        self.stop_ev = threading.Event()
        self.counts = {}
        self.error = None

    def emit(self, event, kind="", fid=-1, detail=""):
        now = time.time_ns()
        rec = {"time": now, "event": event, "kind": kind, "id": fid, "detail": detail}
        self.ndjson.write(json.dumps(rec) + "\n")
        self.ndjson.flush()
        iso = datetime.datetime.fromtimestamp(now / 1e9, datetime.timezone.utc).isoformat(timespec="milliseconds")
        rel = (now - self.t0) / 1e9 if self.t0 else 0.0
        line = f"{iso} +{rel:7.3f}s {event:8s} {kind:10s} {detail}"
        self.text.write(line + "\n")
        self.text.flush()
        log("nemesis " + line.split(" ", 1)[1])

    def nodes(self):
        return list(self.c.topo.nodes)

    def pick_leader(self):
        ld = self.c.leader()
        return ld if ld else self.rng.choice(self.nodes())

    def start_fault(self, kind):
        """Apply one fault; return (description, heal function, hold seconds)."""
        rng, nodes, c, topo = self.rng, self.nodes(), self.c, self.c.topo
        if kind == "partition":
            variant = rng.choice(self.c.args.partition_variants.split(","))
            if variant == "bridge-leader":
                # Issue 17: the leader cut from one follower only; the
                # other follower still sees both (it is the bridge).
                a = self.pick_leader()
                b = rng.choice([x for x in nodes if x != a])
                pairs = [(a, b), (b, a)]
                groups = ([a], "-/-", [b])
            elif variant == "isolate-leader":
                a = self.pick_leader()
                groups = ([a], [x for x in nodes if x != a])
                pairs = [(x, y) for x in groups[0] for y in groups[1]] + [(y, x) for x in groups[0] for y in groups[1]]
            elif variant in ("majority-minority", "isolate-one"):
                sh_nodes = nodes[:]
                rng.shuffle(sh_nodes)
                k = len(nodes) // 2 if variant == "majority-minority" else 1
                groups = (sh_nodes[:k], sh_nodes[k:])
                pairs = [(x, y) for x in groups[0] for y in groups[1]] + [(y, x) for x in groups[0] for y in groups[1]]
            elif variant == "bridge":
                sh_nodes = nodes[:]
                rng.shuffle(sh_nodes)
                mid = sh_nodes[0]
                rest = sh_nodes[1:]
                half = len(rest) // 2
                left, right = rest[:half] or rest[:1], rest[half:]
                pairs = [(x, y) for x in left for y in right if x != y]
                pairs += [(y, x) for x, y in pairs]
                groups = (left + [mid], [mid] + right)
            else:  # one-way: frames from a to everyone else are dropped
                a = rng.choice(["leader", "random"])
                a = self.pick_leader() if a == "leader" else rng.choice(nodes)
                pairs = [(a, y) for y in nodes if y != a]
                groups = ([a], "-/->", [y for y in nodes if y != a])
            heal = topo.drop(pairs)
            desc = f"{variant} {groups} (dropped {' '.join(f'{a}->{b}' for a, b in pairs)})"
            return desc, heal, rng.uniform(2, 5)
        if kind == "loss":
            p = rng.choice([10, 20, 30])
            heal = topo.loss(p)
            return f"{p}% random packet loss on every bridge port", heal, rng.uniform(2, 5)
        if kind == "delay":
            variant = rng.choice(["leader", "one", "all"])
            ms = rng.choice([50, 100, 200])
            if variant == "all":
                targets = nodes
            else:
                targets = [self.pick_leader() if variant == "leader" else rng.choice(nodes)]
            for h in targets:
                c.set_delay(h, ms)

            def heal():
                for h in targets:
                    c.set_delay(h, 0)
            return f"{ms} ms delay on peer links into {targets} ({variant})", heal, rng.uniform(2, 5)
        if kind == "kill":
            # A soak also kills every replica at once (a power cut); kept
            # out of the default draw so that a seed keeps its schedule.
            variant = rng.choice(["follower", "leader", "majority"] + (["all"] if self.c.args.soak else []))
            ld = self.pick_leader()
            if variant == "leader":
                targets = [ld]
            elif variant == "follower":
                targets = [rng.choice([x for x in nodes if x != ld])]
            elif variant == "all":
                targets = nodes[:]
            else:
                sh_nodes = nodes[:]
                rng.shuffle(sh_nodes)
                targets = sh_nodes[:len(nodes) // 2 + 1]
            targets = [t for t in targets if t not in c.killed]
            for h in targets:
                c.kill(h)

            def heal():
                for h in targets:
                    c.start_replica(h)
            return f"kill -9 {variant} {targets} (restart with the same data dir at the end)", heal, rng.uniform(1, 4)
        if kind == "power":
            # A power cut: every write the replica had not synced is lost
            # and its disk stops answering (faultfs cut), then kill -9;
            # half the cuts tear the last unsynced write. Power returns and
            # the replica restarts with what survived when it heals
            # (start_replica). Cut first: see jepsen/faultfs.py.
            variant = rng.choice(self.c.args.power_variants.split(","))
            alive = [x for x in nodes if x not in c.killed]
            if variant == "all":
                targets = nodes[:]
            elif variant == "minority":
                targets = rng.sample(nodes, (len(nodes) - 1) // 2)
            else:
                targets = [self.pick_leader() if rng.random() < 0.5 else rng.choice(nodes)]
            targets = [t for t in targets if t in alive]
            if not targets:
                return None
            torn = [rng.randrange(1 << 32) if rng.random() < 0.5 else None for _ in targets]
            lost = [f"{h}: {c.disks.cut(h, t)}" for h, t in zip(targets, torn)]
            for h in targets:
                c.kill(h)

            def heal():
                for h in targets:
                    c.start_replica(h)
            return (f"power cut {variant} {targets} (unsynced writes dropped, then kill -9: {'; '.join(lost)}; "
                    f"restart at the end)"), heal, rng.uniform(1, 4)
        if kind == "pause":
            variant = rng.choice(["leader", "follower"])
            ld = self.pick_leader()
            h = ld if variant == "leader" else rng.choice([x for x in nodes if x != ld])
            if h in c.killed:
                return None
            c.pause(h)
            hold = self.election_ms / 1000.0 * rng.uniform(2.0, 4.0)
            return (f"SIGSTOP {variant} {h} for >= {hold:.2f}s (election timeout + jitter {self.election_ms} ms)",
                    lambda: c.resume(h), hold)
        if kind == "gc":
            # Unlike SIGSTOP, the pause is the collector's own (its length
            # from the model and the heap), and with coordination the
            # replica asks the leader first; a leader hands off first.
            variant = rng.choice(["leader", "follower", "all"])
            ld = self.pick_leader()
            if variant == "all":
                targets = nodes[:]
            else:
                targets = [ld if variant == "leader" else rng.choice([x for x in nodes if x != ld])]
            targets = [t for t in targets if t not in c.killed and t not in c.stopped]
            if not targets:
                return None
            for h in targets:
                c.ask_gc(h)
            mode = "coordinated" if self.c.args.gc[2] else "uncoordinated"
            return f"full collection asked of {variant} {targets} ({mode})", lambda: None, rng.uniform(0.5, 1.5)
        raise ValueError(kind)

    def sleep(self, secs):
        return self.stop_ev.wait(max(0.0, secs))

    def run(self):
        try:
            self.t0 = time.time_ns()
            end = time.time() + self.duration
            self.emit("begin", detail=f"kinds={','.join(self.kinds)} duration={self.duration}s")
            self.sleep(self.rng.uniform(1.0, 2.0))
            order = []
            if not self.kinds:
                self.sleep(end - time.time())
            while self.kinds and time.time() < end - 1.5 and not self.stop_ev.is_set():
                # Every kind once per round (seeded order), so that a short
                # campaign still exercises them all; sometimes two at once.
                if not order:
                    order = self.kinds[:]
                    self.rng.shuffle(order)
                kinds = [order.pop()]
                if len(self.kinds) > 1 and self.rng.random() < 0.25:
                    kinds.append(self.rng.choice([k for k in self.kinds if k != kinds[0]]))
                active = []
                hold = 0
                for k in kinds:
                    r = self.start_fault(k)
                    if r is None:
                        continue
                    desc, heal, h = r
                    fid = self.next_id
                    self.next_id += 1
                    self.counts[k] = self.counts.get(k, 0) + 1
                    self.emit("start", k, fid, desc)
                    active.append((k, fid, heal))
                    hold = max(hold, h)
                self.sleep(min(hold, end - time.time()))
                for k, fid, heal in reversed(active):
                    heal()
                    self.emit("stop", k, fid, "healed")
                self.sleep(min(self.rng.uniform(1.0, 3.0), end - time.time()))
        except Exception as e:  # noqa: BLE001 - recorded and reported
            self.error = repr(e)
            log(f"nemesis error: {e!r}")
        finally:
            self.heal_all()

    def heal_all(self):
        c = self.c
        try:
            c.topo.heal_net()
        except Exception as e:  # noqa: BLE001
            log(f"heal: {e!r}")
        for h in c.topo.nodes:
            c.set_delay(h, 0)
        for h in list(c.stopped):
            c.resume(h)
        for h in list(c.killed):
            c.start_replica(h)
        self.emit("heal-all", detail="network healed, delays 0, paused resumed, killed restarted")

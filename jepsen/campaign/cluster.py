"""The hosts and processes of a campaign: one network namespace per replica
and one for the clients, joined by a bridge in a switch namespace
(Topology), and the replica processes with their delay proxies (Cluster)."""
import json
import os
import signal
import subprocess
import threading
import time

from campaign.common import CLIENT_PORT, PEER_LOCAL_PORT, PEER_PORT, SUBNET, sh


class Topology:
    """Namespaces <prefix>-n1..nN, <prefix>-c and the switch <prefix>-sw."""

    def __init__(self, prefix, n):
        self.prefix = prefix
        self.nodes = [f"n{i}" for i in range(1, n + 1)]
        self.hosts = self.nodes + ["c"]
        self.created = []
        self.table = "stutter"

    def ns(self, h):
        return f"{self.prefix}-{h}"

    def port(self, h):  # switch-side veth name (<= 15 chars)
        return f"{self.prefix}{h}"

    def ip(self, h):
        return f"{SUBNET}.100" if h == "c" else f"{SUBNET}.{self.nodes.index(h) + 1}"

    def up(self):
        sw = self.ns("sw")
        for h in ["sw"] + self.hosts:
            sh(["ip", "netns", "add", self.ns(h)])
            self.created.append(self.ns(h))
            sh(["ip", "-n", self.ns(h), "link", "set", "lo", "up"])
        sh(["ip", "-n", sw, "link", "add", "br0", "type", "bridge"])
        sh(["ip", "-n", sw, "link", "set", "br0", "up"])
        for h in self.hosts:
            sh(["ip", "-n", sw, "link", "add", self.port(h), "type", "veth",
                "peer", "name", "eth0", "netns", self.ns(h)])
            sh(["ip", "-n", sw, "link", "set", self.port(h), "master", "br0", "up"])
            sh(["ip", "-n", self.ns(h), "addr", "add", f"{self.ip(h)}/24", "dev", "eth0"])
            sh(["ip", "-n", self.ns(h), "link", "set", "eth0", "up"])
        self.nft(f"add table bridge {self.table}\n")
        self.chains = set()
        self.next_chain = 0

    def nft(self, script):
        sh(["ip", "netns", "exec", self.ns("sw"), "nft", "-f", "-"], input=script)

    def new_chain(self, rules):
        """Each fault gets its own base chain on the bridge forward hook, so
        that healing one fault (deleting its chain) leaves the others."""
        name = f"fault{self.next_chain}"
        self.next_chain += 1
        body = "".join(f"add rule bridge {self.table} {name} {r}\n" for r in rules)
        self.nft(f"add chain bridge {self.table} {name} {{ type filter hook forward priority 0; policy accept; }}\n" + body)
        self.chains.add(name)
        return lambda: self.del_chain(name)

    def del_chain(self, name):
        if name in self.chains:
            self.nft(f"delete chain bridge {self.table} {name}\n")
            self.chains.discard(name)

    def drop(self, pairs):
        """Drop frames from node a to node b for each (a, b); returns the heal."""
        return self.new_chain([f'iifname "{self.port(a)}" oifname "{self.port(b)}" drop' for a, b in pairs])

    def loss(self, percent):
        ports = ", ".join(f'"{self.port(h)}"' for h in self.hosts)
        return self.new_chain([f"iifname {{ {ports} }} numgen random mod 100 < {percent} drop"])

    def heal_net(self):
        for name in list(self.chains):
            self.del_chain(name)

    def pids(self):
        out = set()
        for ns in self.created:
            r = sh(["ip", "netns", "pids", ns], check=False)
            out.update(int(x) for x in r.stdout.split())
        return out

    def down(self):
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
        for ns in reversed(self.created):
            sh(["ip", "netns", "del", ns], check=False)
        self.created = []

    def leftovers(self):
        r = sh(["ip", "netns", "list"], check=False)
        return [l.split()[0] for l in r.stdout.splitlines() if l.startswith(self.prefix + "-")]


class Cluster:
    def __init__(self, topo, replica, bindir, outdir, args):
        self.topo, self.replica, self.bindir, self.outdir, self.args = topo, replica, bindir, outdir, args
        self.procs = {}      # name -> Popen
        self.all_pids = set()
        self.stopped = set()  # nodes under SIGSTOP
        self.killed = set()   # nodes killed and not yet restarted
        self.disks = None     # faultfs mounts (--faultfs, the power nemesis)
        self.lock = threading.Lock()
        os.makedirs(os.path.join(outdir, "logs"), exist_ok=True)
        self.client_addrs = [f"{topo.ip(h)}:{CLIENT_PORT}" for h in topo.nodes]

    def config(self, me):
        """Per-replica TOML: the replica itself listens for peers on its
        loopback behind its delay proxy; the others dial the proxy."""
        lines = []
        for h in self.topo.nodes:
            rid = self.topo.nodes.index(h)
            peer = f"127.0.0.1:{PEER_LOCAL_PORT}" if h == me else f"{self.topo.ip(h)}:{PEER_PORT}"
            lines += ["[[replica]]", f"id = {rid}", f'peer_addr = "{peer}"',
                      f'client_addr = "{self.topo.ip(h)}:{CLIENT_PORT}"', ""]
        if self.args.gc:
            model, ratio, blade, dataset = self.args.gc
            lines = ["[gc]", f'model = "{model}"', f"memory_limit_mib = {max(1, round(ratio * dataset))}",
                     f"dataset_mib = {dataset}", f"coordinated = {'true' if blade else 'false'}", ""] + lines
        extra = self.args.replica_config_extra
        if extra:
            lines = [extra.replace("\\n", "\n"), ""] + lines
        path = os.path.join(self.outdir, "config", f"{me}.toml")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("\n".join(lines))
        return path

    def spawn(self, name, ns, argv, logname):
        f = open(os.path.join(self.outdir, "logs", logname), "ab")
        p = subprocess.Popen(["ip", "netns", "exec", self.topo.ns(ns)] + argv, stdout=f, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        f.close()
        with self.lock:
            self.procs[name] = p
            self.all_pids.add(p.pid)
        with open(os.path.join(self.outdir, "pids"), "a") as pf:
            pf.write(f"{name} {p.pid}\n")
        return p

    def start_proxy(self, h):
        dfile = os.path.join(self.outdir, "delay", h)
        os.makedirs(os.path.dirname(dfile), exist_ok=True)
        with open(dfile, "w") as f:
            f.write("0\n")
        self.spawn(f"proxy-{h}", h, [os.path.join(self.bindir, "delayproxy"), "-listen",
                                     f"{self.topo.ip(h)}:{PEER_PORT}", "-target", f"127.0.0.1:{PEER_LOCAL_PORT}",
                                     "-delay-file", dfile], f"proxy-{h}.log")

    def set_delay(self, h, ms):
        with open(os.path.join(self.outdir, "delay", h), "w") as f:
            f.write(f"{ms}\n")

    def start_replica(self, h):
        rid = self.topo.nodes.index(h)
        argv = [self.replica, "--config", self.config(h), "--id", str(rid),
                "--data-dir", os.path.join(self.outdir, "data", h)]
        if self.args.unsafe:
            argv.append("--unsafe-" + self.args.unsafe)
        os.makedirs(os.path.join(self.outdir, "data", h), exist_ok=True)
        if self.disks:
            self.disks.power_on(h)  # after a power cut (the nemesis's cut)
        self.spawn(h, h, argv, f"{h}.log")
        with self.lock:
            self.killed.discard(h)

    def signal(self, h, sig):
        p = self.procs.get(h)
        if p is not None and p.poll() is None:
            os.kill(p.pid, sig)

    def kill(self, h):
        with self.lock:
            self.stopped.discard(h)
            self.killed.add(h)
        self.signal(h, signal.SIGKILL)
        p = self.procs.get(h)
        if p is not None:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass

    def pause(self, h):
        with self.lock:
            self.stopped.add(h)
        self.signal(h, signal.SIGSTOP)

    def ask_gc(self, h):
        """SIGUSR1: the replica's collector model is asked for a full
        collection, stop-the-world now or, coordinated, when granted."""
        self.signal(h, signal.SIGUSR1)

    def resume(self, h):
        self.signal(h, signal.SIGCONT)
        with self.lock:
            self.stopped.discard(h)

    def status(self):
        r = sh(["ip", "netns", "exec", self.topo.ns("c"), os.path.join(self.bindir, "jctl"), "-addrs",
                ",".join(self.client_addrs), "-names", ",".join(self.topo.nodes)], check=False, timeout=10)
        try:
            return json.loads(r.stdout)
        except ValueError:
            return []

    def leader(self):
        best = None
        for s in self.status():
            if "error" in s:
                continue
            if str(s.get("role", "")).lower().startswith("lead"):
                if best is None or s.get("ballot", 0) > best.get("ballot", 0):
                    best = s
        return best["node"] if best else None

    def stop_all(self):
        for h in list(self.procs):
            self.signal(h, signal.SIGCONT)
        for h, p in list(self.procs.items()):
            if p.poll() is None:
                try:
                    p.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.time() + 3
        for p in list(self.procs.values()):
            try:
                p.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def alive_pids(self):
        alive = []
        for pid in self.all_pids:
            try:
                os.kill(pid, 0)
                # a zombie is not a leftover
                with open(f"/proc/{pid}/stat") as f:
                    if f.read().split(")")[-1].split()[0] == "Z":
                        continue
                alive.append(pid)
            except (ProcessLookupError, FileNotFoundError):
                pass
        return alive

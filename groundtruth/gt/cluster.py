"""A 3-replica cluster of one implementation on this machine: each replica
in a cgroup of its own (the same memory limit for every implementation),
optionally pinned to cores, with its logs and runtime samples in the run
folder."""

import json
import os
import signal
import socket
import subprocess
import time

from . import BIN, impls, osinfo


def free_port_base(start=21000, span=40):
    """A base port with the `span` ports above it free (clusters of one
    invocation take consecutive bases)."""
    base = start
    while base < 60000:
        if all(_free(base + k) for k in range(span)):
            return base
        base += 100
    raise RuntimeError("no free ports")


def _free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


class Cluster:
    def __init__(self, impl, build, run_dir, memory_bytes, slack_bytes, port_base, tag,
                 commit_interval_ms=150, threadpool=64, procs=None, calibrate=False, n=3):
        self.impl, self.build, self.run_dir, self.n = impl, build, run_dir, n
        self.memory_bytes = memory_bytes
        self.cgroup_limit = memory_bytes + slack_bytes
        self.ports = impls.Ports(port_base)
        self.tag = tag
        self.procs_hint = procs
        self.commit_interval_ms = commit_interval_ms
        os.makedirs(run_dir, exist_ok=True)
        self.config = impls.write_config(impl, run_dir, self.ports, n, commit_interval_ms, threadpool)
        self.launches = [impls.launch(impl, build, i, self.config, run_dir, memory_bytes, procs, calibrate)
                         for i in range(n)]
        self.groups, self.procs, self.starts = [], [], []
        self.placement = {i: "any" for i in range(n)}
        self.exit_codes = None

    # ---- life cycle -------------------------------------------------------

    def start(self):
        for i, l in enumerate(self.launches):
            g = osinfo.Group(f"{self.tag}-{i}", memory_limit=self.cgroup_limit)
            self.groups.append(g)
            log = open(os.path.join(self.run_dir, f"replica-{i}.log"), "w")
            p = subprocess.Popen(l.argv, env=l.env, stdout=log, stderr=subprocess.STDOUT,
                                 cwd=self.run_dir, preexec_fn=g.join, start_new_session=True)
            log.close()
            self.procs.append(p)
            self.starts.append(osinfo.start_unix(p.pid))
            # One at a time, each once its peer port listens: Replicant's
            # Java links to a peer that is not up yet never recover (they
            # keep the null reader and writer of the failed first connect),
            # so a replica must find the earlier ones listening.
            deadline = time.time() + 120
            while not _accepts(self.ports.peer(i)) and time.time() < deadline and p.poll() is None:
                time.sleep(0.2)
        with open(os.path.join(self.run_dir, "launch.json"), "w") as f:
            json.dump({"argv": [l.argv for l in self.launches],
                       "env": [{k: v for k, v in l.env.items() if k.startswith(("GO", "STUTTER", "TOKIO"))}
                               for l in self.launches],
                       "cgroup_limit": self.cgroup_limit, "memory": self.memory_bytes}, f, indent=1)

    def wait_ready(self, timeout_s=120):
        """Waits until every client port accepts and one leader has answered
        for `stable_s` (4 commit rounds, at least 2 s); returns its id. The
        first leader is not always the last: in Replicant's Java the
        replica started last takes over from one that cannot reach it.
        JVMs on a busy machine take tens of seconds to start."""
        deadline = time.time() + timeout_s
        stable_s = max(2.0, 4 * self.commit_interval_ms / 1000)
        since, last = None, None
        while time.time() < deadline:
            dead = self.dead()
            if dead:
                raise RuntimeError(f"replica(s) {dead} exited during start-up: see {self.run_dir}/replica-*.log")
            leader = None
            if all(_accepts(self.ports.client(i)) for i in range(self.n)):
                leader = self.leader()
            if leader is None or leader != last:
                since, last = time.time(), leader
            elif time.time() - since >= stable_s:
                return leader
            time.sleep(0.5)
        raise RuntimeError(f"{self.impl.name}: no stable leader after {timeout_s} s (logs in {self.run_dir})")

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.exit_codes = [p.returncode for p in self.procs]
        mem = [g.memory() for g in self.groups]
        for g in self.groups:
            g.remove()
        return mem

    def dead(self):
        return [i for i, p in enumerate(self.procs) if p.poll() is not None]

    def deaths(self):
        """Why each replica that exited did: {id: "exit CODE: first fatal line of its log"}."""
        out = {}
        for i in self.dead():
            code = self.procs[i].returncode
            why = "killed by the kernel's OOM killer?" if code == -9 else ""
            try:
                with open(os.path.join(self.run_dir, f"replica-{i}.log"), errors="replace") as f:
                    for line in f:
                        if any(k in line for k in FATAL):
                            why = line.strip()[:300]
                            break
            except OSError:
                pass
            out[i] = f"exit {code}: {why}".strip()
        return out

    # ---- roles and placement ----------------------------------------------

    def leader(self):
        """The id of the replica that serves as leader, or None."""
        if self.impl.name == "stutter":
            r = subprocess.run([os.path.join(BIN, "kv"), "--config", self.config, "status"],
                               capture_output=True, text=True, timeout=30)
            for line in r.stdout.splitlines():
                try:
                    s = json.loads(line)
                except ValueError:
                    continue
                if s.get("reachable") and s.get("role") == "leader":
                    return s["id"]
            return None
        for i in range(self.n):
            reply = _ask(self.ports.client(i), b"get gt-leader-probe\n")
            if reply is not None and not reply.startswith((b"leader is", b"retry")) and reply != b"":
                return i
        return None

    def pin(self, leader, layout):
        """Pins the replicas (and says where bench goes): layout "leader" =
        the leader alone on core 0, the followers on core 1 (bench too).
        Returns bench's cpus (None: anywhere)."""
        if layout == "none":
            return None
        if layout != "leader":
            raise ValueError(layout)
        for i, p in enumerate(self.procs):
            cpus = "0" if i == leader else "1"
            self.groups[i].move_cpus(p.pid, cpus)
            self.placement[i] = f"cpu {cpus}"
        return "1"

    # ---- measurement ------------------------------------------------------

    def snapshot(self):
        """Per replica: process CPU s, and (JVM) CPU s of collector threads."""
        from .runtime_stats import java_gc_thread_cpu
        out = []
        for p in self.procs:
            s = {"cpu_s": osinfo.process_cpu(p.pid), "alive": p.poll() is None}
            if self.impl.runtime == "java":
                s["gc_threads_cpu_s"] = java_gc_thread_cpu(osinfo.thread_cpu(p.pid))
            out.append(s)
        return out

    def memory(self):
        return [g.memory() for g in self.groups]

    def reset_peaks(self):
        for g in self.groups:
            g.reset_peak()

    def force_full_gc(self):
        """Runs a full collection in each replica (Go: SIGUSR1 to our hook;
        Java: jcmd GC.run); returns after they finished or 20 s."""
        if self.impl.runtime == "go":
            for p in self.procs:
                os.kill(p.pid, signal.SIGUSR1)
            time.sleep(2.0)
        elif self.impl.runtime == "java":
            for p in self.procs:
                subprocess.run(["jcmd", str(p.pid), "GC.run"], capture_output=True, timeout=60)
            time.sleep(0.5)

    def target(self, protocol="text", connections=64, window=1):
        """bench's description of this cluster."""
        if self.impl.name == "stutter":
            return {"kind": "stutter", "config": self.config, "protocol": protocol,
                    "connections": connections, "window": window}
        return {"kind": "replicant", "addrs": [f"127.0.0.1:{self.ports.client(i)}" for i in range(self.n)],
                "connections": connections * max(1, window)}


# The first line of a fatal error, by runtime: Go's panic (logrus's
# Panicf prints its message first), glog's CHECK, a JVM's fatal error, a
# Rust panic.
FATAL = ("panic", "Check failed", "Exception in thread", "OutOfMemoryError", "fatal error", "SIGSEGV")


def _accepts(port):
    try:
        socket.create_connection(("127.0.0.1", port), 0.5).close()
        return True
    except OSError:
        return False


def _ask(port, line, timeout=3.0):
    """Sends one text-protocol line; returns the reply line or None."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout) as s:
            s.settimeout(timeout)
            s.sendall(line)
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(4096)
                if not chunk:
                    break
                buf += chunk
            return buf.strip()
    except OSError:
        return None

"""The implementations the harness runs, and how one replica of each is
started: its command line, environment, runtime flags and config file.

Every replica runs under the same cgroup memory limit (memory + slack, see
cluster.py); on top of it the collected runtimes get their own limit at
`memory` bytes, as the seed paper set them: GOMEMLIMIT for Go, -Xmx for
Java (G1 named explicitly: the JVM picks Serial under a small container
limit).
"""

import json
import os
from dataclasses import dataclass

from . import BIN


@dataclass(frozen=True)
class Impl:
    name: str
    # "none" | "go" | "java": which collector the process runs under.
    runtime: str
    # The simulator profile its measurements become (sim/profiles/NAME.toml).
    profile: str
    # Folder of the Replicant checkout it is built from (None: stutter).
    src_dir: str | None
    # Whether reads go through the log like writes (Replicant: every
    # command, Get included, is accepted by a majority and executed on
    # every replica; stutter serves reads from the leader's lease). The
    # simulator then charges followers for reads; the profile says so
    # explicitly rather than the simulator guessing it from a follower's
    # measured read allocation, which is small but not zero for stutter.
    reads_replicated: bool


# The seed paper measured Go and Rust with TCP between peers (go-tcp,
# rust-tcp) and kept gRPC for Java and C++ (§4.4): its Java is `java`,
# whose profile is therefore replicant-java, and its C++ `c++`. java-tcp, the TCP fork, creates
# a Jackson ObjectMapper for every peer message and allocates some 100 KB
# per message for it (measured here), which is not the paper's Java.
IMPLS = {
    "stutter": Impl("stutter", "none", "stutter", None, False),
    "go-tcp": Impl("go-tcp", "go", "replicant-go", "go-tcp", True),
    "java": Impl("java", "java", "replicant-java", "java", True),
    "java-tcp": Impl("java-tcp", "java", "replicant-java-tcp", "java-tcp", True),
    "rust-tcp": Impl("rust-tcp", "none", "replicant-rust", "rust-tcp", True),
    "c++": Impl("c++", "none", "replicant-cxx", "c++", True),
    "c++-tcp": Impl("c++-tcp", "none", "replicant-cxx-tcp", "c++-tcp", True),
}
REPLICANTS = ["go-tcp", "java", "rust-tcp", "c++"]


def get(name):
    if name not in IMPLS:
        raise SystemExit(f"unknown implementation {name!r}: one of {', '.join(IMPLS)}")
    return IMPLS[name]


@dataclass
class Ports:
    """Replica i listens for peers on peer(i) and clients on client(i)."""
    base: int

    def peer(self, i):
        return self.base + 10 * i

    def client(self, i):
        # Replicant's convention: the client port is the peer port + 1.
        return self.peer(i) + 1


STUTTER_PROTOCOL = """
# The protocol settings of examples/local-3.toml.
[protocol]
heartbeat_ms = 50
election_timeout_ms = 300
election_jitter_ms = 300
window = 16
max_batch = 256

[storage]
sync_interval_us = 1000

[security]
cluster_secret = "groundtruth harness cluster only, not a secret"
"""


def write_config(impl, run_dir, ports, n, commit_interval_ms, threadpool):
    """Writes the cluster's config file; returns its path."""
    if impl.name == "stutter":
        path = os.path.join(run_dir, "cluster.toml")
        parts = []
        for i in range(n):
            parts.append(f'[[replica]]\nid = {i}\npeer_addr = "127.0.0.1:{ports.peer(i)}"\n'
                         f'client_addr = "127.0.0.1:{ports.client(i)}"\n')
        with open(path, "w") as f:
            f.write("\n".join(parts) + STUTTER_PROTOCOL)
        return path
    path = os.path.join(run_dir, "config.json")
    cfg = {
        # One file for every variant: each reads the keys it knows.
        "threadpool_size": threadpool,
        "commit_interval": commit_interval_ms,
        "peers": [f"127.0.0.1:{ports.peer(i)}" for i in range(n)],
        "store": "mem",
        "db_path": os.path.join(run_dir, "rocksdb"),
    }
    with open(path, "w") as f:
        json.dump(cfg, f, indent=1)
    return path


@dataclass
class Launch:
    argv: list
    env: dict
    # Files the replica writes that the harness reads.
    metrics: str | None = None  # Go hook / Java agent samples
    gclog: str | None = None    # Go: its stderr (gctrace); Java: -Xlog file
    calibrate: str | None = None  # stutter --calibrate CSV


def launch(impl, build, i, config, run_dir, memory_bytes, procs=None, calibrate=False):
    """How to start replica `i`. `procs`: the processor count the runtime
    is told (pinned runs), None for its own detection."""
    env = dict(os.environ)
    log = os.path.join(run_dir, f"replica-{i}.log")
    if impl.name == "stutter":
        argv = [os.path.join(BIN, "replica"), "--config", config, "--id", str(i),
                "--data-dir", os.path.join(run_dir, f"data-{i}")]
        l = Launch(argv, env)
        if calibrate:
            l.calibrate = os.path.join(run_dir, f"turns-{i}.csv")
            argv += ["--calibrate", l.calibrate]
        return l
    binary = build["binary"]
    if impl.name == "go-tcp":
        env["GODEBUG"] = "gctrace=1"
        env["GOMEMLIMIT"] = str(int(memory_bytes))
        env["STUTTER_GT_METRICS"] = os.path.join(run_dir, f"metrics-{i}.txt")
        if procs:
            env["GOMAXPROCS"] = str(procs)
        return Launch([binary, "-id", str(i), "-c", config], env,
                      metrics=env["STUTTER_GT_METRICS"], gclog=log)
    if impl.runtime == "java":
        gclog = os.path.join(run_dir, f"gc-{i}.log")
        metrics = os.path.join(run_dir, f"metrics-{i}.txt")
        mib = max(16, int(memory_bytes) >> 20)
        argv = [build.get("java", "java"), f"-Xmx{mib}m", "-XX:+UseG1GC",
                # The parser (impl/gc/calibrate/py/g1log.py) expects these
                # decorations; PLAB statistics give what each pause copied.
                f"-Xlog:gc*=info,gc+plab=debug,gc+ergo+cset=debug:file={gclog}:uptime,level,tags",
                f"-javaagent:{build['agent']}={metrics}"]
        if procs:
            argv.append(f"-XX:ActiveProcessorCount={procs}")
        argv += ["-cp", build["classpath"], "ReplicantMain", str(i), config]
        return Launch(argv, env, metrics=metrics, gclog=gclog)
    if impl.name == "rust-tcp":
        if procs:
            env["TOKIO_WORKER_THREADS"] = str(procs)
        return Launch([binary, "--id", str(i), "--config-path", config], env)
    if impl.name in ("c++", "c++-tcp"):
        # Its asio thread count (--num_threads, default 4) is the program's
        # own setting, not a runtime's view of the cores: left as it is.
        return Launch([binary, f"--id={i}", f"--config_path={config}"], env)
    raise ValueError(impl.name)

"""Constants, logging, commands, and the tools and binaries a campaign needs."""
import datetime
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # jepsen/
ROOT = os.path.dirname(HERE)
NEMESES = ["partition", "kill", "pause", "loss", "delay", "gc", "power"]
POWER_VARIANTS = ["one", "minority", "all"]
SUBNET = "10.77.0"
PEER_PORT = 7000        # where peers dial (the delay proxy listens here)
PEER_LOCAL_PORT = 7100  # where the replica itself listens, on its loopback
CLIENT_PORT = 8000


def log(msg):
    ts = datetime.datetime.now(datetime.timezone.utc).strftime("%H:%M:%S.%f")[:-3]
    print(f"[{ts}] {msg}", flush=True)


def sh(args, check=True, input=None, timeout=60):
    p = subprocess.run(args, input=input, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({p.returncode}): {p.stderr.strip()}")
    return p


def ensure_tools():
    if os.geteuid() != 0:
        sys.exit("jepsen/run needs root (network namespaces, nftables)")
    if shutil.which("nft") is None:
        log("installing nftables (Debian package)")
        r = subprocess.run(["apt-get", "install", "-y", "nftables"], capture_output=True)
        if r.returncode != 0:
            subprocess.run(["apt-get", "update"], capture_output=True)
            sh(["apt-get", "install", "-y", "nftables"], timeout=600)
    for d in ["/usr/local/go/bin", os.path.expanduser("~/.cargo/bin")]:
        if os.path.isdir(d) and d not in os.environ.get("PATH", "").split(":"):
            os.environ["PATH"] = os.environ.get("PATH", "") + ":" + d
    for t in ["ip", "nft", "go"]:
        if shutil.which(t) is None:
            sys.exit(f"missing tool: {t}")


def build(args):
    bindir = os.path.join(HERE, "bin")
    log("building the Go tools (workload, check, jctl, delayproxy)")
    subprocess.run(["go", "build", "-o", bindir + "/", "./cmd/..."], cwd=HERE, check=True)
    if args.replica_bin:
        replica = os.path.abspath(args.replica_bin)
    else:
        log("building the replica (cargo build --release)")
        # --unsafe flags exist only in a replica built for negative controls;
        # --replica-features builds an injected node bug in.
        feats = (["stutter-replica/negative-controls"] if args.unsafe else []) + \
            [f"stutter-replica/{f}" for f in args.replica_features.split(",") if f]
        features = ["--features", ",".join(feats)] if feats else []
        subprocess.run(["cargo", "build", "--release", "--bin", "replica"] + features, cwd=ROOT, check=True)
        replica = os.path.join(ROOT, "target", "release", "replica")
        if args.replica_features:
            # Kept aside: the next plain build overwrites target/release/replica.
            aside = replica + "-" + args.replica_features.replace(",", "+")
            shutil.copy2(replica, aside)
            replica = aside
    if not os.access(replica, os.X_OK):
        sys.exit(f"replica binary not found: {replica}")
    faultfs = None
    if args.faultfs:
        faultfs = os.path.abspath(args.faultfs_bin) if args.faultfs_bin else \
            os.path.join(ROOT, "target", "release", "faultfs")
        if not args.faultfs_bin:
            log("building faultfs (cargo build --release -p stutter-faultfs)")
            subprocess.run(["cargo", "build", "--release", "-p", "stutter-faultfs"], cwd=ROOT, check=True)
        if not os.access(faultfs, os.X_OK):
            sys.exit(f"faultfs binary not found: {faultfs}")
        if shutil.which("fusermount3") is None:
            sys.exit("faultfs needs fusermount3 (Debian package fuse3; scripts/setup installs it)")
    return bindir, replica, faultfs

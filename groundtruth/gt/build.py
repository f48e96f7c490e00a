"""Building each implementation: stutter from this repository, the
Replicant variants from a checkout the user names, each into a folder of
its own under the build directory (outside the repository).

Every build records what it did in BUILD_DIR/<impl>/build.json: the
status, the binary (or classpath), the source fingerprint, tool versions,
and, when it failed, why. A build whose sources and glue are unchanged is
not redone. Nothing is downloaded but dependencies from the registries
(Go modules, Maven Central, crates.io; Debian packages with
--install-deps).
"""

import hashlib
import json
import os
import shutil
import subprocess
import time

from . import BIN, HERE, ROOT

# What each variant needs from Debian, by a file or command that shows it.
DEPS = {
    "go-tcp": [("cmd", "go", "golang-go"), ("file", "/usr/include/rocksdb/c.h", "librocksdb-dev"),
               ("cmd", "gcc", "gcc")],
    "java": [("cmd", "mvn", "maven"), ("cmd", "javac", "default-jdk-headless")],
    "java-tcp": [("cmd", "mvn", "maven"), ("cmd", "javac", "default-jdk-headless")],
    "rust-tcp": [("cmd", "cargo", "cargo (rustup)"), ("cmd", "protoc", "protobuf-compiler"),
                 ("glob", "/usr/lib/llvm-*/lib/libclang*.so*", "libclang-dev"),
                 ("file", "/usr/include/rocksdb/c.h", "librocksdb-dev")],
    "c++": [("cmd", "g++", "g++"), ("cmd", "grpc_cpp_plugin", "protobuf-compiler-grpc"),
            ("cmd", "protoc", "protobuf-compiler"), ("file", "/usr/include/grpcpp/grpcpp.h", "libgrpc++-dev"),
            ("file", "/usr/include/asio.hpp", "libasio-dev"), ("file", "/usr/include/gflags/gflags.h", "libgflags-dev"),
            ("file", "/usr/include/glog/logging.h", "libgoogle-glog-dev"),
            ("file", "/usr/include/rocksdb/db.h", "librocksdb-dev")],
    "c++-tcp": [("cmd", "g++", "g++"), ("file", "/usr/include/asio.hpp", "libasio-dev"),
                ("file", "/usr/include/gflags/gflags.h", "libgflags-dev"),
                ("file", "/usr/include/glog/logging.h", "libgoogle-glog-dev"),
                ("file", "/usr/include/rocksdb/db.h", "librocksdb-dev")],
}

# Every source file of c++-tcp's `replicant` binary (its Bazel BUILD file's
# cc_binary and the libraries it depends on); Bazel is not in Debian.
CXX_SOURCES = ["main.cc", "replicant.cc", "peer_server.cc", "client_manager.cc", "client.cc",
               "multipaxos.cc", "tcp.cc", "log.cc", "kvstore.cc", "memkvstore.cc", "rocksdbstore.cc"]


def missing_deps(name):
    """Debian packages (or tools) missing for variant `name`."""
    import glob
    missing = []
    for kind, what, pkg in DEPS.get(name, []):
        ok = (shutil.which(what) if kind == "cmd" else
              os.path.exists(what) if kind == "file" else glob.glob(what))
        if not ok:
            missing.append(pkg)
    return missing


def fingerprint(path, extra=()):
    """sha256 over a tree's file names and contents (build outputs skipped)
    and any extra files (our own glue)."""
    h = hashlib.sha256()
    files = []
    for d, dirs, fs in os.walk(path):
        dirs[:] = sorted(x for x in dirs if x not in ("target", ".git", "bazel-out"))
        files += [os.path.join(d, f) for f in sorted(fs)]
    for f in list(files) + list(extra):
        h.update(os.path.relpath(f, path).encode() + b"\0")
        with open(f, "rb") as fh:
            h.update(fh.read())
    return h.hexdigest()[:16]


def tool_version(argv):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        return (p.stdout + p.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return None


def _run(argv, cwd, log, env=None):
    """Runs one build step under nice, output appended to `log`; raises
    BuildError with the log's tail when it fails."""
    with open(log, "a") as f:
        f.write(f"\n$ {' '.join(argv)}  (in {cwd})\n")
        f.flush()
        p = subprocess.run(["nice", "-n", "19"] + argv, cwd=cwd, stdout=f, stderr=subprocess.STDOUT,
                           env=env)
    if p.returncode != 0:
        with open(log) as f:
            tail = f.read()[-3000:]
        raise BuildError(f"`{' '.join(argv)}` exited {p.returncode}; the end of its output:\n{tail}")


class BuildError(Exception):
    pass


def load(build_dir, name):
    """The record of the last build of `name`, or None."""
    try:
        with open(os.path.join(build_dir, name, "build.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


NO_CHECKOUT = "no Replicant checkout given"


def build(name, src, build_dir, install_deps=False, force=False):
    """Builds variant `name`; returns its record (status "ok" or "failed")."""
    if name == "stutter":
        return build_stutter()
    out = os.path.join(build_dir, name)
    os.makedirs(out, exist_ok=True)
    rec = {"impl": name, "time": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    old = load(build_dir, name)
    if not src and old and old.get("status") == "ok" and os.path.exists(old.get("binary", "")):
        # No checkout named this time: the last good build serves as it is.
        return dict(old, source_checked=False)
    try:
        if not src:
            raise BuildError(NO_CHECKOUT + " (--replicant-src PATH or REPLICANT_SRC)")
        tree = os.path.join(src, name)
        if not os.path.isdir(tree):
            raise BuildError(f"{tree} does not exist: not a checkout of psu-csl/replicated-store?")
        glue = sorted(os.path.join(HERE, d, f) for d in ("go", "java") for f in os.listdir(os.path.join(HERE, d)))
        fp = fingerprint(tree, glue)
        if (not force and old and old.get("status") == "ok" and old.get("fingerprint") == fp
                and os.path.exists(old.get("binary") or old.get("agent", ""))):
            return old
        missing = missing_deps(name)
        if missing and install_deps:
            subprocess.run(["apt-get", "install", "-y", "-qq"] + [m for m in missing if " " not in m],
                           check=False)
            missing = missing_deps(name)
        if missing:
            raise BuildError("missing build dependencies: " + ", ".join(missing)
                             + " (apt-get install them, or pass --install-deps)")
        work = os.path.join(out, "src")
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(tree, work, ignore=shutil.ignore_patterns("target", "bazel-*"))
        log = os.path.join(out, "build.log")
        open(log, "w").close()
        rec.update({"source": os.path.abspath(tree), "fingerprint": fp, "log": log})
        rec.update(BUILDERS[name](work, out, log))
        rec["status"] = "ok"
    except BuildError as e:
        rec.update({"status": "failed", "error": str(e)})
    with open(os.path.join(out, "build.json"), "w") as f:
        json.dump(rec, f, indent=1)
    return rec


def build_stutter():
    p = subprocess.run(["nice", "-n", "19", "cargo", "build", "-q", "--release", "--locked",
                        "-p", "stutter-replica", "-p", "stutter-bench"], cwd=ROOT)
    if p.returncode != 0:
        return {"impl": "stutter", "status": "failed", "error": "cargo build failed"}
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return {"impl": "stutter", "status": "ok", "binary": os.path.join(BIN, "replica"),
            "commit": rev.stdout.strip()}


def _go(work, out, log):
    # Our runtime/metrics hook joins the main package (groundtruth/go).
    shutil.copy(os.path.join(HERE, "go", "gt_metrics.go"), os.path.join(work, "main"))
    binary = os.path.join(out, "replicant")
    _run(["go", "build", "-o", binary, "./main"], work, log)
    return {"binary": binary, "tool": tool_version(["go", "version"])}


def _java_agent(out, log):
    classes = os.path.join(out, "agent-classes")
    os.makedirs(classes, exist_ok=True)
    _run(["javac", "-d", classes, os.path.join(HERE, "java", "GtAgent.java")], out, log)
    manifest = os.path.join(classes, "MANIFEST.MF")
    with open(manifest, "w") as f:
        f.write("Premain-Class: GtAgent\n")
    agent = os.path.join(out, "gt-agent.jar")
    _run(["jar", "cfm", agent, manifest, "-C", classes, "GtAgent.class"], out, log)
    return agent


def _java(work, out, log):
    proj = os.path.join(work, "replicant")
    _run(["mvn", "-q", "-B", "-DskipTests", "package", "dependency:copy-dependencies"], proj, log)
    target = os.path.join(proj, "target")
    jars = [os.path.join(target, f) for f in os.listdir(target) if f.endswith(".jar")]
    if not jars:
        raise BuildError("mvn package made no jar")
    classpath = ":".join(jars + [os.path.join(target, "dependency", "*")])
    return {"classpath": classpath, "agent": _java_agent(out, log), "java": shutil.which("java"),
            "binary": jars[0], "tool": tool_version(["java", "-version"])}


def _rust(work, out, log):
    proj = os.path.join(work, "replicant")
    env = dict(os.environ)
    # RocksDB from Debian instead of compiling its bundled copy (35 min).
    env.setdefault("ROCKSDB_LIB_DIR", "/usr/lib/x86_64-linux-gnu")
    env["CARGO_TARGET_DIR"] = os.path.join(out, "target")
    _run(["cargo", "build", "--release"], proj, log, env=env)
    binary = os.path.join(out, "replicant")
    shutil.copy(os.path.join(out, "target", "release", "replicant"), binary)
    lock = os.path.join(proj, "Cargo.lock")
    if os.path.exists(lock):
        shutil.copy(lock, os.path.join(out, "Cargo.lock"))
    return {"binary": binary, "tool": tool_version(["cargo", "--version"])}


def _cxx(work, out, log):
    # tcp.h includes <boost/asio.hpp> but uses the standalone asio's
    # namespace, which Debian's Boost and asio headers cannot both define:
    # a one-line shim in front of the include path maps it to <asio.hpp>.
    shim = os.path.join(out, "shim", "boost")
    os.makedirs(shim, exist_ok=True)
    with open(os.path.join(shim, "asio.hpp"), "w") as f:
        f.write("#include <asio.hpp>\n")
    binary = os.path.join(out, "replicant")
    _run(["g++", "-std=c++17", "-O2", "-DNDEBUG", "-I" + os.path.dirname(shim), "-I.", "-o", binary]
         + CXX_SOURCES + ["-lrocksdb", "-lglog", "-lgflags", "-lpthread"], work, log)
    return {"binary": binary, "tool": tool_version(["g++", "--version"])}


# `java` (gRPC between peers) fetches protoc and its gRPC plugin from Maven
# Central through its protobuf-maven-plugin.
# c++ (gRPC between peers): its Bazel BUILD's replicant binary and the
# code protoc generates from multipaxos.proto, against Debian's gRPC.
CXX_GRPC_SOURCES = ["main.cc", "replicant.cc", "client_manager.cc", "client.cc", "multipaxos.cc", "log.cc",
                    "kvstore.cc", "memkvstore.cc", "rocksdbstore.cc", "multipaxos.pb.cc", "multipaxos.grpc.pb.cc"]


def _cxx_grpc(work, out, log):
    _run(["protoc", "-I.", "--cpp_out=.", "--grpc_out=.",
          "--plugin=protoc-gen-grpc=" + shutil.which("grpc_cpp_plugin"), "multipaxos.proto"], work, log)
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "grpc++", "protobuf"],
                           capture_output=True, text=True)
    if flags.returncode != 0:
        raise BuildError("pkg-config finds no grpc++ / protobuf (libgrpc++-dev)")
    binary = os.path.join(out, "replicant")
    _run(["g++", "-std=c++17", "-O2", "-DNDEBUG", "-I.", "-o", binary] + CXX_GRPC_SOURCES
         + flags.stdout.split() + ["-lrocksdb", "-lglog", "-lgflags", "-lpthread"], work, log)
    return {"binary": binary, "tool": tool_version(["g++", "--version"])}


BUILDERS = {"go-tcp": _go, "java": _java, "java-tcp": _java, "rust-tcp": _rust, "c++": _cxx_grpc,
            "c++-tcp": _cxx}

"""What runs on a worker: one process per job, its exit code and output
returned to the driver (Dask carries them back). Judging the output is
the driver's business (swarm.py, tlc.py, campaigns.py)."""

import os
import socket
import subprocess
import time

from . import shipping


def run(argv, cwd=None, env=None, timeout=None):
    t = time.monotonic()
    full_env = dict(os.environ)
    full_env.update(env or {})
    try:
        p = subprocess.run(argv, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = None, _text(e.stdout), _text(e.stderr) + f"\ntimed out after {timeout} s"
    return {
        "rc": rc,
        "stdout": out,
        "stderr": err[-4000:],
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "seconds": time.monotonic() - t,
    }


def _text(b):
    if b is None:
        return ""
    return b.decode(errors="replace") if isinstance(b, bytes) else b


def run_shipped(binary, args, timeout=None):
    """Runs a shipped binary (shipping.Shipped fields) with `args`."""
    name, digest, data = binary
    path = shipping.materialize_file(name, digest, data)
    return run([path, *args], timeout=timeout)


def run_in_bundle(bundle, argv, files=(), env=None, timeout=None):
    """Runs `argv` (relative to the unpacked bundle's root) in a fresh
    folder holding `files` ((name, bytes) pairs); `{root}` and `{work}` in
    argv and env are replaced by those folders."""
    import tempfile

    name, digest, data = bundle
    root = shipping.materialize_tree(name, digest, data)
    with tempfile.TemporaryDirectory(prefix="stutter-fleet-") as work:
        for fname, content in files:
            with open(os.path.join(work, fname), "wb") as f:
                f.write(content)
        sub = lambda s: s.replace("{root}", root).replace("{work}", work)
        env = {k: sub(v) for k, v in (env or {}).items()}
        env.setdefault("TMPDIR", work)
        return run([sub(a) for a in argv], cwd=work, env=env, timeout=timeout)

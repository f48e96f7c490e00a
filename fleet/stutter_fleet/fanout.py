"""Submits jobs to Dask and hands each result, as it arrives, to a judge;
a job Dask could not finish (its worker died: KilledWorker; or the job
function raised) is an infrastructure error naming the job."""

import sys
import time

from distributed import as_completed
from distributed.client import FutureCancelledError

try:
    from distributed import KilledWorker
except ImportError:  # older layouts
    from distributed.scheduler import KilledWorker


def fan_out(client, jobs, outcome, judge):
    """`jobs`: (name, function, args) triples; `judge(name, result)` reads
    a finished job's result into `outcome`. Returns the seconds taken."""
    t = time.monotonic()
    names = {}
    futures = []
    for name, fn, args in jobs:
        key = "fleet-" + "".join(c if c.isalnum() or c in "._" else "-" for c in name)
        f = client.submit(fn, *args, key=f"{key}-{time.time_ns()}", pure=False)
        names[f.key] = name
        futures.append(f)
    for f in as_completed(futures):
        name = names[f.key]
        try:
            result = f.result()
        except KilledWorker as e:
            outcome.error(f"{name}: lost, its worker died while running it ({e})")
            continue
        except FutureCancelledError as e:
            outcome.error(f"{name}: cancelled ({e})")
            continue
        except Exception as e:  # the job function itself failed
            outcome.error(f"{name}: {type(e).__name__}: {e}")
            continue
        judge(name, result)
    return time.monotonic() - t


def progress(text):
    print(text, file=sys.stderr, flush=True)

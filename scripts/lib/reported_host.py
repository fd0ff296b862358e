"""The April 2026 report's host as `preemptlab sim` runs it (docs/model-calibration.md, "The reported host"): its costs
and one `sim --workload txn` run at 96 CPUs x 1,024 backends, shared by scripts/sim-sensitivity and
scripts/sim-run-average."""

import json
import os
import subprocess
import sys

# What the documented command line sets; everything else is the model's default.
BASE = {"lock_transfer_ns": 45, "fault_4k_ns": 2500, "spin_ns": 15}


def run(who, binary, out, *, models, locks, pages, duration, warmup, repeat, sets, extra):
    """Runs one sim at the reported host's scale with BASE overridden by `sets` (NAME=VALUE strings) and
    `extra` arguments; returns the result document written to `out`. Exits 2 (naming `who`) on failure."""
    cmd = [binary, "sim", "--workload", "txn", "--cpus", "96", "--workers", "1024",
           "--models", ",".join(models), "--locks", ",".join(locks), "--pages", ",".join(pages),
           "--duration", duration, "--warmup", warmup, "--repeat", str(repeat),
           "--format", "json", "--quiet", "--out", out]
    costs = dict(BASE)
    for kv in sets:
        k, _, v = kv.partition("=")
        costs[k] = v
    for k, v in costs.items():
        cmd += ["--set", f"{k}={v}"]
    cmd += extra
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    if r.returncode != 0:
        print(f"{who}: {' '.join(cmd)} failed: {r.stderr.strip()}", file=sys.stderr)
        sys.exit(2)
    with open(out) as f:
        return json.load(f)


def out_path(directory, name):
    """Where a named run's result goes."""
    return os.path.join(directory, f"{name}.json")

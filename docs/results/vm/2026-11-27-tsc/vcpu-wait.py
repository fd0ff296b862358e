#!/usr/bin/env python3
"""Per boot of one or more lock-7.2 sets: the geometric mean over the cells of its ops/s against the cell's
median over all the boots given, beside its vCPU threads' wait for a host CPU (the vm block's
host_vcpu_times), and their correlation.

    vcpu-wait.py DIR...      each DIR holding MODEL-rN.json
"""
import glob
import json
import math
import statistics as st
import sys

runs, wait = {}, {}
for d in sys.argv[1:]:
    for f in sorted(glob.glob(d + "/*-r[0-9]*.json")):
        doc = json.load(open(f))
        name = f"{d.rstrip('/').split('/')[-1]}/{f.split('/')[-1][:-5]}"
        runs[name] = {(c["lock"], c["pages"], c["workers"]): c["reps"][0]["ops_per_s"] for c in doc["cells"]}
        t = doc["vm"].get("host_vcpu_times") or []
        run, waited = sum(x["run_s"] for x in t), sum(x["wait_s"] for x in t)
        wait[name] = 100 * waited / (run + waited) if run + waited else None
cells = list(next(iter(runs.values())))
median = {k: st.median(r[k] for r in runs.values()) for k in cells}
pairs = []
print("| boot | speed (geometric mean against the cell medians) | vCPUs waited, % |")
print("|---|---:|---:|")
for name, r in runs.items():
    g = math.exp(st.mean(math.log(r[k] / median[k]) for k in cells))
    w = wait[name]
    print(f"| {name} | {g:.3f} | {'-' if w is None else f'{w:.1f}'} |")
    if w is not None:
        pairs.append((g, w))
gs, ws = [p[0] for p in pairs], [p[1] for p in pairs]
mg, mw = st.mean(gs), st.mean(ws)
r = sum((a - mg) * (b - mw) for a, b in pairs) / math.sqrt(
    sum((a - mg) ** 2 for a in gs) * sum((b - mw) ** 2 for b in ws))
print(f"\n{len(pairs)} boots with vCPU times: speed {min(gs):.3f}..{max(gs):.3f}, waited {min(ws):.1f}..{max(ws):.1f}%, Pearson r {r:.2f}")

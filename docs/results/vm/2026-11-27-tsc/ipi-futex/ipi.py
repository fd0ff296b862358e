#!/usr/bin/env python3
"""Per boot: the rescheduling (RES), function-call (CAL) and local-timer (LOC) interrupts over one bench
lock run in the guest (/proc/interrupts before and after, both vCPUs), beside the run's throughput and
involuntary switches per operation.

    ipi.py DIR      DIR holding MODEL-rN.{before,after,json} (guest.sh)
"""
import glob
import json
import sys


def counts(path):
    out = {}
    for line in open(path):
        f = line.split()
        out[f[0].rstrip(":")] = int(f[1]) + int(f[2])
    return out


d = sys.argv[1]
print("| boot | ops/s | involuntary switches / op | RES | CAL | LOC | RES per 1,000 ops |")
print("|---|---:|---:|---:|---:|---:|---:|")
for j in sorted(glob.glob(d + "/*-r[0-9].json")):
    name = j.split("/")[-1][:-5]
    b, a = counts(j[:-5] + ".before"), counts(j[:-5] + ".after")
    rep = json.load(open(j))["cells"][0]["reps"][0]
    res = a["RES"] - b["RES"]
    print(f"| {name} | {rep['ops_per_s']:.0f} | {rep['ivcsw_per_op']:.4f} | {res} | {a['CAL'] - b['CAL']} "
          f"| {a['LOC'] - b['LOC']} | {res / rep['ops'] * 1000:.2f} |")

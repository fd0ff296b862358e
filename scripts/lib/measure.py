"""What the measuring scripts read from /proc about processes and the machine, and the interval of a
median they report (scripts/diagnose-overhead, scripts/diagnose-event-cost, scripts/diagnose-soak).

A script imports it with scripts/lib on its path, as scripts/lib/cgroup2.py says.
"""

import math
import os
import random
import socket

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stat_fields(pid):
    """/proc/PID/stat's fields after the command name (index 0 is field 3, the state), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()


def cpu_s(pid, children=False):
    """utime + stime of a process (all threads), seconds; with children, cutime + cstime added."""
    f = stat_fields(pid)
    if f is None:
        return None
    ticks = int(f[11]) + int(f[12]) + ((int(f[13]) + int(f[14])) if children else 0)
    return ticks * TICK_S


def child_pids(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(w) for w in f.read().split()]
    except OSError:
        return []


def cluster_cpu_s(pm):
    """The cluster's CPU time so far: the postmaster's own and reaped children's, and its live children's."""
    total = cpu_s(pm, children=True) or 0.0
    for c in child_pids(pm):
        total += cpu_s(c) or 0.0
    return total


def machine():
    """(context switches since boot, steal ticks since boot) from /proc/stat: every switch passes the
    sched_switch tracepoint diagnose enables, whoever is switched; steal is time the hypervisor ran
    something else on this VM's CPUs (noise no interleaving cancels)."""
    ctxt = steal = 0
    with open("/proc/stat") as f:
        for line in f:
            w = line.split()
            if w[0] == "ctxt":
                ctxt = int(w[1])
            elif w[0] == "cpu" and len(w) > 8:
                steal = int(w[8])
    return ctxt, steal


def faults():
    """The machine's page faults since boot (/proc/vmstat pgfault): every minor fault passes diagnose's
    page-faults-min counter, whoever takes it."""
    with open("/proc/vmstat") as f:
        for line in f:
            if line.startswith("pgfault "):
                return int(line.split()[1])
    return 0


def median_interval(xs, level=0.95):
    """Distribution-free interval of the median: (lo, hi, coverage) from the order statistics
    x_(k) and x_(n-k+1) with the largest k whose coverage, 1 - 2 P(Binomial(n, 1/2) < k), is >= level;
    k = 1 (min..max) when no k reaches it (then the coverage printed is below the level)."""
    s = sorted(xs)
    n = len(s)

    def coverage(k):
        return 1.0 - 2.0 * sum(math.comb(n, i) for i in range(k)) / 2.0 ** n

    k = 1
    while k + 1 <= (n + 1) // 2 and coverage(k + 1) >= level:
        k += 1
    return s[k - 1], s[n - k], coverage(k)


def pair_plan(pairs):
    """The order of a paired measurement: (pair index, kind, on) per unit (a second, a block), two units a
    pair; an "ab" pair has one unit on and one off in random order, every fourth pair is "aa", off in both
    (the noise floor)."""
    plan = []
    rng = random.Random(os.getpid())
    for i in range(pairs):
        if i % 4 == 3:
            plan += [(i, "aa", False), (i, "aa", False)]
        else:
            first = rng.random() < 0.5
            plan += [(i, "ab", first), (i, "ab", not first)]
    return plan


def pair_ratios(plan, values):
    """The on/off ratio of each "ab" pair and the second/first ratio of each "aa" pair of `values`, one
    per unit of `plan`."""
    ab, aa = [], []
    for j in range(0, len(plan), 2):
        (_, kind, on_first), x1, x2 = plan[j], values[j], values[j + 1]
        if kind == "aa":
            aa.append(x2 / x1)
        else:
            ab.append((x1 / x2) if on_first else (x2 / x1))
    return ab, aa


def ab_by_order(plan, values):
    """The "ab" pairs' on/off ratios split by which unit of the pair was on: (on first, on second). They
    differ when a unit's cost leaks into the unit after it (which is the pair's off unit only when on came
    first)."""
    first, second = [], []
    for j in range(0, len(plan), 2):
        (_, kind, on_first), x1, x2 = plan[j], values[j], values[j + 1]
        if kind == "ab":
            (first if on_first else second).append(x1 / x2 if on_first else x2 / x1)
    return first, second


def means_ratio(plan, values):
    """The mean of `values` over the plan's on units against the mean over the off units of its "ab"
    pairs (the "aa" pairs left out)."""
    on = [v for v, (_, _, o) in zip(values, plan) if o]
    off = [v for v, (_, kind, o) in zip(values, plan) if kind == "ab" and not o]
    return (sum(on) / len(on)) / (sum(off) / len(off))

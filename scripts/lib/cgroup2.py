"""The cgroup2 helpers the measuring scripts share (scripts/diagnose-overhead, scripts/diagnose-event-cost):
where cgroup2 is mounted, and removing a directory a script made for its cluster.

A script imports it with scripts/lib on its path (it is not installed: the scripts run from a checkout):

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "lib"))
    sys.dont_write_bytecode = True  # run as root: no root-owned __pycache__ in the checkout
    import cgroup2
"""

import os
import sys
import time


def mount():
    """The cgroup2 mount point (/proc/mounts, with its octal escape of a space undone), or None."""
    with open("/proc/mounts") as f:
        for line in f:
            _dev, mnt, fstype = line.split()[:3]
            if fstype == "cgroup2":
                return mnt.replace("\\040", " ")
    return None


def _rmdir_within(path, tries):
    """Removes the empty cgroup directory `path`, retrying every 0.1 s while tasks are still leaving it;
    True once it is gone (or was already)."""
    for _ in range(tries):
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            time.sleep(0.1)
    return False


def remove(path, who):
    """Removes the cgroup directory `path` that the script `who` made, once its tasks have gone (the
    cluster stopped); says on stderr, under `who`'s name, when it could not."""
    if _rmdir_within(path, 50):
        return
    # Tasks are still in it: they can only be what the script started there (a server whose stop failed).
    # cgroup.kill (Linux 5.14+) ends exactly this directory's tasks.
    try:
        with open(os.path.join(path, "cgroup.kill"), "w") as f:
            f.write("1")
        if _rmdir_within(path, 50):
            return
    except OSError:
        pass
    print(f"{who}: could not remove {path} (tasks left in it)", file=sys.stderr)

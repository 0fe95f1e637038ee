#!/usr/bin/env python3
"""Remove what killed test and bench runs left on this node: the private
BPF pin roots (/sys/fs/bpf/sandguard-<name>-<pid>) and cgroup roots
(<mount>/sandguard-<name>-<pid>, v2 and each v1 hierarchy) of runs whose
process <pid> is gone.

Why: a pin root keeps its agent's programs attached after the agent died,
so every later run on the node pays a second agent's hooks (the bench
reports them as "other sandguard agents attached"), and a leftover cgroup
root can hold a killed run's processes. A root without a trailing pid (the
node's real agent, /sys/fs/bpf/sandguard) or whose process still runs (a
concurrent suite) is never touched.

    tests/lib/sweep_stale.py            # sweep, one line per root removed
    tests/lib/sweep_stale.py --dry-run  # only say what would go
"""
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sgtest import cgroup2_mount, cgroup_v1_mounts, remove_cgroup_tree  # noqa: E402

PIN_DIR = "/sys/fs/bpf"
STALE = re.compile(r"^sandguard-[A-Za-z0-9_.-]+-([0-9]+)$")


def owner_gone(name):
    m = STALE.match(name)
    if not m:
        return False
    return not os.path.exists("/proc/%s" % m.group(1))


def stale_names(top):
    return sorted(n for n in os.listdir(top) if owner_gone(n) and os.path.isdir(os.path.join(top, n)))


def main():
    dry = "--dry-run" in sys.argv[1:]
    failed = 0
    for name in stale_names(PIN_DIR) if os.path.isdir(PIN_DIR) else []:
        path = os.path.join(PIN_DIR, name)
        if dry:
            print("sweep: would remove %s (pins of a run that is gone)" % path)
            continue
        try:
            shutil.rmtree(path)
            print("sweep: removed %s (pins of a run that is gone)" % path)
        except OSError as e:
            failed += 1
            print("sweep: cannot remove %s: %s: %s" % (path, e.filename, e.strerror), file=sys.stderr)
    # A cgroup root lives on the v2 mount and, on hybrid nodes, as mirrors
    # of the same name on the v1 controllers: remove_cgroup_tree() takes
    # them all, the v2 tree first (its cgroup.kill empties the v1 ones).
    cg2 = cgroup2_mount()
    tops = [cg2] + sorted(set(cgroup_v1_mounts().values()))
    names = sorted({n for t in tops if os.path.isdir(t) for n in stale_names(t)})
    for name in names:
        if dry:
            print("sweep: would remove cgroup root %s of a run that is gone" % name)
            continue
        remove_cgroup_tree(os.path.join(cg2, name))
        left = [os.path.join(t, name) for t in tops if os.path.exists(os.path.join(t, name))]
        if left:
            failed += 1
            print("sweep: cannot remove %s: a process in it would not die" % " ".join(left),
                  file=sys.stderr)
        else:
            print("sweep: removed cgroup root %s of a run that is gone" % name)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

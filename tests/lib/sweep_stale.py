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
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sgtest import cgroup2_mount, cgroup_v1_mounts  # noqa: E402

PIN_DIR = "/sys/fs/bpf"
STALE = re.compile(r"^sandguard-[A-Za-z0-9_.-]+-([0-9]+)$")


def owner_gone(name):
    m = STALE.match(name)
    if not m:
        return False
    return not os.path.exists("/proc/%s" % m.group(1))


def cgroup_dirs(top):
    """top's cgroup directories, deepest first (rmdir needs them empty)."""
    out = []
    for d, subdirs, _ in os.walk(top):
        out += [os.path.join(d, s) for s in subdirs]
    return sorted(out, key=lambda p: -p.count("/")) + [top]


def remove_cgroup_tree(top):
    """Kill what is left in it (cgroup.kill on v2; SIGKILL by pid on v1),
    then rmdir from the leaves up. Returns an error string or None."""
    for d in cgroup_dirs(top):
        try:
            with open(os.path.join(d, "cgroup.kill"), "w") as f:
                f.write("1")
        except OSError:
            try:
                with open(os.path.join(d, "cgroup.procs")) as f:
                    for pid in f.read().split():
                        try:
                            os.kill(int(pid), 9)
                        except OSError:
                            pass
            except OSError:
                pass
    for d in cgroup_dirs(top):
        for _ in range(50):  # a killed task leaves its cgroup a moment later
            try:
                os.rmdir(d)
                break
            except FileNotFoundError:
                break
            except OSError as e:
                err = e
                time.sleep(0.02)
        else:
            return "%s: %s" % (d, err.strerror)
    return None


def main():
    dry = "--dry-run" in sys.argv[1:]
    roots = [(PIN_DIR, "pins")]
    try:
        roots.append((cgroup2_mount(), "cgroup v2"))
    except RuntimeError:
        pass
    roots += [(p, "cgroup v1 " + c) for c, p in sorted(cgroup_v1_mounts().items())
              if c in ("memory", "pids", "cpu", "cpuacct")]
    seen, failed = set(), 0
    for top, what in roots:
        if top in seen or not os.path.isdir(top):
            continue
        seen.add(top)
        for name in sorted(os.listdir(top)):
            path = os.path.join(top, name)
            if not owner_gone(name) or not os.path.isdir(path):
                continue
            if dry:
                print("sweep: would remove %s (%s of a run that is gone)" % (path, what))
                continue
            if what == "pins":
                try:
                    shutil.rmtree(path)
                    err = None
                except OSError as e:
                    err = "%s: %s" % (e.filename, e.strerror)
            else:
                err = remove_cgroup_tree(path)
            if err:
                failed += 1
                print("sweep: cannot remove %s: %s" % (path, err), file=sys.stderr)
            else:
                print("sweep: removed %s (%s of a run that is gone)" % (path, what))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

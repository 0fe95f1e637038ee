#!/usr/bin/env python3
"""tests/lib/sweep_stale.py (run by tests/run-all.sh and the bench before
they start) removes the pin roots and cgroup roots of runs whose process is
gone, kills what such a cgroup root still holds, and never touches a root
whose process runs or whose name carries no pid (the node's real agent)."""
import os
import subprocess
import sys
import time

SRC = os.environ.get("SANDGUARD_SRC", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "lib"))
from sgtest import cgroup2_mount, check, ensure_bpffs, exit_code, skip  # noqa: E402

SWEEP = os.path.join(SRC, "tests", "lib", "sweep_stale.py")


def dead_pid():
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def main():
    why = ensure_bpffs()
    if why:
        skip("sweep", why)
        return
    cg2 = cgroup2_mount()
    gone = dead_pid()
    stale_pins = "/sys/fs/bpf/sandguard-sweeptest-%d" % gone
    live_pins = "/sys/fs/bpf/sandguard-sweeptest-%d" % os.getpid()
    bare_pins = "/sys/fs/bpf/sandguard-sweeptest"
    stale_cg = os.path.join(cg2, "sandguard-sweeptest-%d" % gone)
    live_cg = os.path.join(cg2, "sandguard-sweeptest-%d" % os.getpid())
    for d in (stale_pins + "/gen-1", live_pins, bare_pins, stale_cg + "/acme/sb-1", live_cg):
        os.makedirs(d, exist_ok=True)
    # A process a killed run left in its sandbox's cgroup.
    orphan = subprocess.Popen(["sleep", "600"])
    with open(os.path.join(stale_cg, "acme", "sb-1", "cgroup.procs"), "w") as f:
        f.write(str(orphan.pid))
    try:
        r = subprocess.run([sys.executable, SWEEP], capture_output=True, text=True, timeout=60)
        check(r.returncode == 0 and not os.path.exists(stale_pins)
              and ("removed %s" % stale_pins) in r.stdout,
              "a pin root whose run is gone is removed", "rc %d %s %s" % (r.returncode, r.stdout, r.stderr))
        died = orphan.wait(timeout=10) if not os.path.exists(stale_cg) else None
        check(not os.path.exists(stale_cg) and died == -9,
              "a cgroup root whose run is gone: what it held is killed, the tree removed",
              "exists %s, orphan %s; %s %s" % (os.path.exists(stale_cg), died, r.stdout, r.stderr))
        check(os.path.isdir(live_pins) and os.path.isdir(live_cg),
              "roots of a run still going are kept", r.stdout)
        check(os.path.isdir(bare_pins), "a root without a pid (a real agent's) is kept", r.stdout)
    finally:
        if orphan.poll() is None:
            orphan.kill()
            orphan.wait()
        for d in (stale_pins + "/gen-1", stale_pins, live_pins, bare_pins):
            try:
                os.rmdir(d)
            except OSError:
                pass
        for d in (stale_cg + "/acme/sb-1", stale_cg + "/acme", stale_cg, live_cg):
            for _ in range(50):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


if __name__ == "__main__":
    main()
    sys.exit(exit_code())

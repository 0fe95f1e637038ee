"""Scenario 13, a fleet's tenants (issue 32): an agent started on a policy
directory of 10,000 tenants against one of 10 (the same policy, each with
an egress port of its own): start-up time (to its ready file), a SIGHUP
reload of every file, the agent's RSS, and the kernel memory of its maps
(bpftool's bytes_memlock over the pins), each as a ratio and per tenant.

Runs its own private agents (own pins, cgroup root, state), one after the
other, so the bench's agent is not touched. Usable alone:

    python3 scripts/bench/tenants.py build/sandguard [N]"""
import json
import os
import re
import signal
import subprocess
import sys
import time

from sgbench import Agent, Env, log

COUNTS = (10, 10000)


def write_policies(env, n):
    for i in range(n):
        p = env.base_policy("t%05d" % i)
        p["egress"] = {"allow": [{"cidr": "127.0.0.1/32", "port": 20000 + i, "proto": "tcp"}]}
        env.write_policy(p)


def maps_memlock(env):
    """Bytes the kernel charges for the maps pinned under the agent's pin root."""
    root = env.env["SANDGUARD_PIN_ROOT"]
    total = 0
    for name in os.listdir(root):
        path = os.path.join(root, name)
        if not os.path.isfile(path) and not name.startswith("sg_"):
            continue
        r = subprocess.run(["bpftool", "-j", "map", "show", "pinned", path],
                           capture_output=True, text=True)
        try:
            total += int(json.loads(r.stdout).get("bytes_memlock", 0))
        except (ValueError, AttributeError):
            pass
    return total


def reload_s(env, agent):
    logpath = os.path.join(env.dir, "agent.log")
    off = os.path.getsize(logpath)
    t0 = time.monotonic()
    agent.proc.send_signal(signal.SIGHUP)
    while time.monotonic() - t0 < 120:
        with open(logpath) as f:
            f.seek(off)
            if re.search(r"policies reloaded \(generation", f.read()):
                return time.monotonic() - t0
        time.sleep(0.01)
    raise RuntimeError("no reload within 120 s")


def one(sandguard, n):
    env = Env(sandguard, "tn%d" % n)
    try:
        write_policies(env, n)
        agent = Agent(env, extra=["--mode", "fallback"])
        start = agent.start()
        time.sleep(1)  # the first tick's metrics
        rss, _ = agent.memory_kib()
        res = {"tenants": n, "start_s": start, "reload_s": reload_s(env, agent),
               "rss_kib": rss, "maps_bytes": maps_memlock(env)}
        agent.stop()
        agent.unload()
        return res
    finally:
        env.cleanup()


def measure(sandguard, counts=COUNTS):
    return [one(sandguard, n) for n in counts]


def rows(results):
    small, big = results[0], results[-1]
    dn = big["tenants"] - small["tenants"]
    per_rss = (big["rss_kib"] - small["rss_kib"]) * 1024.0 / dn
    per_map = (big["maps_bytes"] - small["maps_bytes"]) * 1.0 / dn
    notes = "%d vs %d policies: start %.2f vs %.2f s, reload %.2f vs %.2f s, RSS %d vs %d KiB " \
            "(%.0f B/tenant), maps %d vs %d KiB (%.0f B/tenant)" % (
                big["tenants"], small["tenants"], big["start_s"], small["start_s"],
                big["reload_s"], small["reload_s"], big["rss_kib"], small["rss_kib"], per_rss,
                big["maps_bytes"] // 1024, small["maps_bytes"] // 1024, per_map)
    base = {"scenario": "13 tenants", "unit": "s", "baseline_name": "%d policies" % small["tenants"],
            "lower_is_better": True, "notes": notes}
    return [dict(base, name="agent start-up, %d policies" % big["tenants"],
                 value={"median": big["start_s"]}, baseline=small["start_s"],
                 ratio=big["start_s"] / small["start_s"], target="seconds, not minutes"),
            dict(base, name="SIGHUP reload, %d policies" % big["tenants"],
                 value={"median": big["reload_s"]}, baseline=small["reload_s"],
                 ratio=big["reload_s"] / max(small["reload_s"], 1e-3), target="seconds")]


if __name__ == "__main__":
    counts = (10, int(sys.argv[2])) if len(sys.argv) > 2 else COUNTS
    res = measure(sys.argv[1], counts)
    log(json.dumps(res))
    for r in rows(res):
        print("%-40s %8.3f s  x%.1f  %s" % (r["name"], r["value"]["median"], r["ratio"], r["notes"]))

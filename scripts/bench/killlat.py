"""Scenario 7, violation-to-empty-cgroup kill latency: a process in a fresh
registered sandbox whose policy says "egress": "kill" makes one denied
connect and waits (build/bench/hookloop violate); the agent empties the
sandbox. The agent measures the latency itself, from the kernel's
timestamp of the violation (bpf_ktime_get_boot_ns() in the program) to the
cgroup found empty, and reports it in the sandbox_killed event
(detail.kill_latency_ms): what `sandguard events` shows on-call. Sandboxes
go one after another; p50 and p99 over all of them."""
import json
import os
import subprocess
import time

from sgbench import Control, SandboxCgroup, log

TENANT = "killlat"


def policy(env):
    """Nothing allowed out; every violation kills."""
    return env.base_policy(TENANT)


def percentile(values, q):
    v = sorted(values)
    if not v:
        return None
    k = (len(v) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


class EventTail:
    """The agent's event lines, read from where the file ended at start."""

    def __init__(self, path):
        self.path = path
        self.pos = os.path.getsize(path) if os.path.exists(path) else 0
        self.buf = b""

    def lines(self):
        with open(self.path, "rb") as f:
            f.seek(self.pos)
            data = f.read()
        self.pos += len(data)
        self.buf += data
        *whole, self.buf = self.buf.split(b"\n")
        return whole


def kill_latency_ms(tail, sandbox, timeout=10):
    """kill_latency_ms of the sandbox_killed line of `sandbox`."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for line in tail.lines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("type") == "sandbox_killed" and e.get("sandbox") == sandbox:
                return (e.get("detail") or {}).get("kill_latency_ms")
        time.sleep(0.01)
    return None


def measure(env, tools, n, port):
    tail = EventTail(env.events)
    conn = Control(env)
    lat, missing = [], 0
    try:
        for i in range(n):
            sb = SandboxCgroup(env, TENANT, "kill-%d" % i)
            try:
                sb.register(conn)
                p = subprocess.run([tools["hookloop"], "--cgroup", sb.path, "violate", "1",
                                    str(port)], capture_output=True, text=True, timeout=60)
                if p.returncode != -9:
                    raise RuntimeError("the violating process was not killed (exit %d): %s" %
                                       (p.returncode, (p.stdout + p.stderr).strip()))
                ms = kill_latency_ms(tail, sb.name)
                if ms is None:
                    missing += 1
                else:
                    lat.append(ms)
                sb.unregister(conn)
            finally:
                sb.remove()
    finally:
        conn.close()
    log("kill latency: %d kills, p50 %.3f ms, p99 %.3f ms, %d without a latency" %
        (len(lat), percentile(lat, 0.5) or 0, percentile(lat, 0.99) or 0, missing))
    return {"samples_ms": lat, "missing": missing, "p50_ms": percentile(lat, 0.5),
            "p99_ms": percentile(lat, 0.99)}


def rows(result):
    lat = result["samples_ms"]
    if not lat:
        return []
    return [{"scenario": "7 kill latency", "name": "violation to empty cgroup (egress kill)",
             "unit": "ms", "value": {"median": result["p50_ms"], "min": min(lat), "max": max(lat),
                                     "n": len(lat)},
             "baseline": None, "baseline_name": "the build before (docs/performance.md)",
             "ratio": None, "target": "p50, p99 no worse than before", "lower_is_better": True,
             "notes": "p50 %.3f ms, p99 %.3f ms over %d kills (%d lines without a latency)" %
                      (result["p50_ms"], result["p99_ms"], len(lat), result["missing"])}]

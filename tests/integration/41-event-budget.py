#!/usr/bin/env python3
"""The tenants' event budget end to end (issue 31: the evidence itself must
not be evictable). Through an event stream of 2 x 16 KiB, tenant quiet runs
one batch, then tenant noisy floods it: a sandbox that connects to a denied
address in a loop (1,024 egress_denied events, about 350 KiB). Without a
budget that rotates quiet's events out many times over; with one, noisy
fills at most 25% of a file, quiet's events are still there, and noisy's
overflow is counted in /metrics and said in an events_dropped line."""
import glob
import json
import os
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgagent import Agent, check, finish  # noqa: E402
from sgtest import free_port, uid_base  # noqa: E402

GOOD = """import json, sys
b = json.load(sys.stdin)
print(json.dumps([1.0] * len(b["items"])))
"""
FLOOD = """import json, socket, sys
b = json.load(sys.stdin)
s = socket.socket()
for _ in range(3000):
    try:
        s.connect(("10.0.0.1", 53))
    except OSError:
        pass
print(json.dumps([1.0] * len(b["items"])))
"""


def retained(a):
    """Every event line of the live and rotated files, parsed."""
    out = []
    for path in [a.events] + sorted(glob.glob(a.events + ".*")):
        with open(path) as f:
            out += [json.loads(line) for line in f if line.strip()]
    return out


def over_budget(metrics_addr, tenant):
    text = urllib.request.urlopen("http://%s/metrics" % metrics_addr, timeout=5).read().decode()
    prefix = 'sandguard_events_over_budget_total{tenant="%s"} ' % tenant
    for line in text.splitlines():
        if line.startswith(prefix):
            return float(line[len(prefix):])
    return 0


def main():
    a = Agent({"quiet": {}, "noisy": {"actions": {"egress": "deny"}}}, name="evbudget")
    a.env["SANDGUARD_UID_BASE"] = str(uid_base(69000))
    a.env["SANDGUARD_EVENTS_SUMMARY_MS"] = "500"  # not a minute
    metrics = "127.0.0.1:%d" % free_port()
    try:
        if not a.start("--mode", "fallback", "--events-max-bytes", "16384", "--events-keep", "1",
                       "--metrics", metrics):
            check(False, "agent starts", a.log_tail())
            return
        r, raw = a.exec_batch("quiet", a.program("good.py", GOOD))
        check(r is not None and r["cause"] == "ok", "quiet's batch is ok", raw.stdout[-300:] + raw.stderr[-300:])
        quiet_sandbox = r["sandboxes"][0]["sandbox"] if r else None
        r, raw = a.exec_batch("noisy", a.program("flood.py", FLOOD))
        check(r is not None and r["cause"] == "ok", "noisy's flood of denied connects ends ok (egress: deny)",
              raw.stdout[-300:] + raw.stderr[-300:])
        deadline = time.time() + 10
        while time.time() < deadline and not any(e["type"] == "events_dropped" for e in retained(a)):
            time.sleep(0.2)
        events = retained(a)
        quiet = [e for e in events if e["tenant"] == "quiet" and e["sandbox"] == quiet_sandbox]
        check(any(e["type"] == "exec" for e in quiet) and any(e["type"] == "exit" for e in quiet),
              "quiet's exec and exit events survive noisy's flood", "%d lines retained" % len(events))
        noisy = sum(len(json.dumps(e, separators=(",", ":"))) + 1 for e in events
                    if e["tenant"] == "noisy" and e["type"] != "events_dropped")
        check(noisy <= 16384 + 4096, "noisy holds at most a file and a share of the stream",
              "%d bytes of noisy's lines" % noisy)
        dropped = [e for e in events if e["type"] == "events_dropped"]
        lines = sum(e["detail"]["lines"] for e in dropped)
        check(dropped and all(e["tenant"] == "noisy" and e["detail"]["reason"] == "tenant_share"
                              and e["detail"]["budget_bytes"] == 4096 for e in dropped) and lines > 500,
              "events_dropped lines say how many of noisy's lines were dropped, and why",
              json.dumps(dropped)[:600])
        n = over_budget(metrics, "noisy")
        check(n >= lines and n > 500 and over_budget(metrics, "quiet") == 0,
              "/metrics counts noisy's dropped lines (sandguard_events_over_budget_total)",
              "noisy %s, in events_dropped lines %d" % (n, lines))
    finally:
        a.cleanup()


if __name__ == "__main__":
    main()
    finish()

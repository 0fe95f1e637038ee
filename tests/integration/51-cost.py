#!/usr/bin/env python3
"""Cost metering (issue 36, item 3): every journal record carries its run's
CPU time, wall time and peak memory from the run's cgroup, killed and
timed-out runs included; the agent's /metrics gives per-tenant totals
(sandguard_cpu_seconds_total{tenant,class}) that match the sum of the
journal's records, and both match the tenants' cgroups' own accounting
(cpu.stat usage_usec of <cgroup root>/<tenant>, which keeps the usage of
its removed children) within 2%. `explain --run R` prints the run's
totals from the journal, and `top --run R` its batches, attempts and cost."""
import glob
import json
import os
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgagent import Agent, check, finish  # noqa: E402
from sgtest import free_port, uid_base  # noqa: E402

# Each program burns about BURN seconds of CPU first, so that the runs'
# CPU dwarfs what sandguard's own init spends in the same cgroups.
BURN = """import json, sys, time
b = json.load(sys.stdin)
end = time.process_time() + 0.3
while time.process_time() < end:
    pass
"""
GOOD = BURN + 'print(json.dumps([0.5 + 0.1 * (i % 2) for i in range(len(b["items"]))]))\n'
CRASH = BURN + "import os\nos.abort()\n"
SPIN = BURN + "while True:\n    pass\n"
EGRESS = BURN + 'import socket\nsocket.create_connection(("127.0.0.1", 9), timeout=1)\n'
RUN = "r-cost"


def usage_us(cgroup):
    """The cgroup's usage_usec; 0 before it exists."""
    try:
        with open(os.path.join(cgroup, "cpu.stat")) as f:
            return int(dict(line.split() for line in f)["usage_usec"])
    except OSError:
        return 0


def journal_records(a):
    out = []
    for seg in sorted(glob.glob(os.path.join(a.env["SANDGUARD_STATE_DIR"], "journal", "outcomes-*.jsonl"))):
        with open(seg) as f:
            out += [json.loads(line) for line in f if line.strip()]
    return out


def scrape(target):
    cpu, booked = {}, 0
    with urllib.request.urlopen("http://%s/metrics" % target, timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("sandguard_cpu_seconds_total{"):
                labels, value = line[len("sandguard_cpu_seconds_total{"):].rsplit("} ", 1)
                tenant = labels.split('tenant="')[1].split('"')[0]
                cpu[tenant] = cpu.get(tenant, 0) + float(value)
            elif line.startswith('sandguard_journal_records_total{result="booked"}'):
                booked = int(float(line.split()[-1]))
    return cpu, booked


def within(a, b, tol=0.02):
    return b > 0 and abs(a - b) <= tol * b


def main():
    a = Agent({"alpha": {"limits": {"timeout_ms": 1500}}, "bravo": {}}, name="cost")
    a.env["SANDGUARD_UID_BASE"] = str(uid_base(65400))
    try:
        target = "127.0.0.1:%d" % free_port()
        if not a.start("--metrics", target):
            check(False, "agent starts with --metrics", a.log_tail())
            return
        progs = {n: a.program(n + ".py", t) for n, t in
                 [("good", GOOD), ("crash", CRASH), ("spin", SPIN), ("egress", EGRESS)]}
        root = a.env["SANDGUARD_CGROUP_ROOT"]
        before = {t: usage_us(os.path.join(root, t)) for t in ("alpha", "bravo")}
        plan = [("alpha", "good"), ("alpha", "crash"), ("alpha", "spin"), ("alpha", "good"),
                ("bravo", "egress"), ("bravo", "good"), ("bravo", "egress")]
        results = []
        for tenant, prog in plan:
            r, raw = a.exec_batch(tenant, progs[prog], extra=["--run-id", RUN])
            results.append((tenant, prog, r and r.get("cause"), raw.stderr[-200:] if r is None else ""))
        causes = {(t, p): c for t, p, c, _ in results}
        check(causes.get(("alpha", "spin")) == "tenant_timeout" and causes.get(("bravo", "egress")) ==
              "tenant_policy_violation" and causes.get(("alpha", "crash")) == "tenant_crash",
              "the mixed run has timed-out, killed and crashed batches", str(results))
        after = {t: usage_us(os.path.join(root, t)) for t in ("alpha", "bravo")}
        cgroups = {t: (after[t] - before[t]) / 1e6 for t in after}

        recs = [x for x in journal_records(a) if x.get("run_id") == RUN]
        unmetered = [x["id"] for x in recs if x.get("attempt") and not isinstance(x.get("cpu_us"), int)]
        check(recs and not unmetered, "every attempt's journal record carries cpu_us (%d records)" % len(recs),
              "unmetered: %s" % unmetered)
        killed = [x for x in recs if x["cause"] in ("tenant_timeout", "tenant_policy_violation")]
        check(killed and all(x.get("cpu_us", 0) >= 250000 and x.get("wall_ms", 0) > 0 and
                             (x.get("mem_peak_bytes") or 0) > 1 << 20 for x in killed),
              "killed and timed-out runs carry their CPU (>= 0.25 s burnt), wall time and peak memory",
              str([(x["cause"], x.get("cpu_us"), x.get("wall_ms"), x.get("mem_peak_bytes")) for x in killed]))
        journal = {t: sum(x.get("cpu_us") or 0 for x in recs if x["tenant"] == t) / 1e6 for t in cgroups}

        metrics = {}
        deadline = time.time() + 30
        while time.time() < deadline:
            metrics, booked = scrape(target)
            if booked >= len(journal_records(a)):
                break
            time.sleep(0.3)
        for t in sorted(cgroups):
            print("INFO: %s CPU seconds: /metrics %.4f, journal %.4f, cgroup %.4f" %
                  (t, metrics.get(t, 0), journal[t], cgroups[t]))
            check(within(metrics.get(t, 0), journal[t], 0.0005),
                  "%s: CPU seconds in /metrics equal the journal's sum" % t,
                  "%.4f vs %.4f" % (metrics.get(t, 0), journal[t]))
            check(within(journal[t], cgroups[t]),
                  "%s: the journal's CPU seconds match the tenant cgroup's own usage within 2%%" % t,
                  "journal %.4f, cgroup %.4f" % (journal[t], cgroups[t]))
        r = a.run(["explain", "--run", RUN, "--events", a.events, "--policy-dir", a.policy_dir])
        line = [x for x in r.stdout.splitlines() if x.startswith("cost: ")]
        total = sum(journal.values())
        print("INFO: explain --run %s: %s" % (RUN, line[0] if line else "(no cost line)"))
        check(line and "%.3f CPU seconds" % total in line[0],
              "explain --run prints the run's CPU seconds from the journal (%.3f)" % total, r.stdout[-400:] + r.stderr)
        r = a.run(["top", "--run", RUN, "--json"])
        try:
            doc = json.loads(r.stdout)
        except ValueError:
            doc = {}
        check(abs(doc.get("cpu_seconds", -1) - total) < 0.0005 and doc.get("batches") == len(plan)
              and doc.get("attempts") == len(recs) and doc.get("mem_peak_bytes", 0) > 1 << 20,
              "top --run prints the run's batches, attempts, CPU seconds and peak memory from the journal",
              r.stdout[-400:] + r.stderr)
        r = a.run(["top", "--run", "no-such-run"])
        check(r.returncode == 1 and "no record of run no-such-run" in r.stderr,
              "top --run of an unknown run says so and exits 1", "%d %s" % (r.returncode, r.stderr))
    finally:
        a.cleanup()


main()
finish()

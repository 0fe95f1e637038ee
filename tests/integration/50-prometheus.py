#!/usr/bin/env python3
"""The real-scrape test: a real Prometheus server (Debian's package) on
loopback scrapes the agent while known failures are induced for two
tenants; PromQL through the HTTP API must return exactly those counts.
Also `promtool check metrics` on the agent's live exposition."""
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sgagent import Agent, check, finish, skip  # noqa: E402
from sgtest import free_port  # noqa: E402

NAN = """import json, sys
b = json.load(sys.stdin)
print("[" + ",".join(["NaN"] * len(b["items"])) + "]")
"""
CRASH = """import os, sys
sys.stdin.read()
os.abort()
"""
HANG = """import sys
sys.stdin.read()
while True:
    pass
"""
GOOD = """import json, sys
b = json.load(sys.stdin)
print(json.dumps([0.25 * (i % 4) for i in range(len(b["items"]))]))
"""


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def query(prom, q):
    body = json.loads(get("http://%s/api/v1/query?%s" % (prom, urllib.parse.urlencode({"query": q}))))
    return {tuple(sorted(s["metric"].items())): float(s["value"][1]) for s in body["data"]["result"]}


def main():
    prometheus = shutil.which("prometheus")
    if not prometheus:
        skip("prometheus: real scrape", "the 'prometheus' package is not installed (apt-get install prometheus)")
        return
    a = Agent({"alpha": {"limits": {"timeout_ms": 1500}}, "bravo": {"limits": {"timeout_ms": 1500}}},
              name="prom")
    prom_proc = None
    try:
        metrics_port, prom_port = free_port(), free_port()
        target = "127.0.0.1:%d" % metrics_port
        if not a.start("--metrics", target):
            check(False, "agent starts with --metrics", open(os.path.join(a.dir, "agent.log")).read()[-500:])
            return
        text = get("http://%s/metrics" % target)
        path = os.path.join(a.dir, "scrape.txt")
        with open(path, "w") as f:
            f.write(text)
        pc = subprocess.run(["promtool", "check", "metrics"], stdin=open(path), capture_output=True, text=True)
        check(pc.returncode == 0 and not pc.stdout.strip() and not pc.stderr.strip(),
              "promtool check metrics is clean on the live exposition", pc.stdout + pc.stderr)
        check(get("http://%s/readyz" % target).startswith("ok"), "/readyz says ok with programs attached")

        cfg = os.path.join(a.dir, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "scrape_configs:\n  - job_name: sandguard\n    static_configs:\n"
                    "      - targets: ['%s']\n" % target)
        prom_log = open(os.path.join(a.dir, "prometheus.log"), "w")
        prom_proc = subprocess.Popen(
            [prometheus, "--config.file=" + cfg, "--storage.tsdb.path=" + os.path.join(a.dir, "tsdb"),
             "--web.listen-address=127.0.0.1:%d" % prom_port, "--web.enable-lifecycle"],
            stdout=prom_log, stderr=prom_log, stdin=subprocess.DEVNULL)
        prom = "127.0.0.1:%d" % prom_port

        # Known failures: alpha 3 bad outputs + 1 timeout + 2 ok; bravo 2 crashes + 1 ok.
        progs = {n: a.program(n + ".py", t) for n, t in [("nan", NAN), ("crash", CRASH), ("hang", HANG),
                                                         ("good", GOOD)]}
        plan = [("alpha", "nan")] * 3 + [("alpha", "hang")] + [("alpha", "good")] * 2 + \
               [("bravo", "crash")] * 2 + [("bravo", "good")]
        for tenant, prog in plan:
            a.exec_batch(tenant, progs[prog])

        want = {
            ("alpha", "tenant_bad_output"): 3, ("alpha", "tenant_timeout"): 1, ("alpha", "tenant_crash"): 0,
            ("bravo", "tenant_crash"): 2, ("bravo", "tenant_bad_output"): 0, ("bravo", "tenant_timeout"): 0,
        }
        got = {}
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                res = query(prom, 'sandguard_failures_total{job="sandguard",class="tenant_code"}')
                got = {(dict(k)["tenant"], dict(k)["cause"]): v for k, v in res.items()}
                if all(got.get(k) == v for k, v in want.items()):
                    break
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(1)
        check(all(got.get(k) == v for k, v in want.items()),
              "PromQL returns exactly the induced per-tenant failure counts",
              "want %s, got %s" % (want, {k: got.get(k) for k in want}))
        ok = query(prom, 'sandguard_batches_total{status="ok"}')
        okd = {dict(k)["tenant"]: v for k, v in ok.items()}
        check(okd.get("alpha") == 2 and okd.get("bravo") == 1, "PromQL returns the ok batches per tenant",
              str(okd))
        plat = query(prom, 'sum by (tenant) (sandguard_failures_total{class="platform"})')
        check(all(v == 0 for v in plat.values()), "no induced tenant fault is counted as a platform fault",
              str(plat))
        verd = query(prom, 'sum by (tenant) (sandguard_failures_total{class="verdict"})')
        check(verd and all(v == 0 for v in verd.values()),
              "batch-mode failures are never counted as verdicts (class verdict is exported, at 0)",
              str(verd))
        inv = query(prom, 'sandguard_invalid_batches_total')
        invd = {dict(k)["tenant"]: v for k, v in inv.items()}
        check(invd.get("alpha") == 3, "invalid (NaN) batches are exported per tenant", str(invd))
        booked = query(prom, 'sandguard_journal_records_total{result="booked"}')
        check(sum(booked.values()) == len(plan),
              "every exec run is folded from the journal exactly once", str(booked))
        rebuilds = query(prom, 'sum(sandguard_ledger_rebuilds_total)')
        check(all(v == 0 for v in rebuilds.values()), "no ledger rebuild on a clean start", str(rebuilds))
        labels = set()
        for k in query(prom, '{__name__=~"sandguard_.*", job="sandguard"}'):
            labels.update(name for name, _ in k)
        bad = labels - {"__name__", "job", "instance", "tenant", "cause", "class", "type", "action", "rule",
                        "feature", "mode", "status", "result", "reason", "le", "version"}
        check(not bad, "labels stay bounded (no sandbox, run, pid or path)", "unexpected labels %s" % bad)
    finally:
        if prom_proc:
            prom_proc.terminate()
            try:
                prom_proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                prom_proc.kill()
        a.cleanup()


main()
finish()

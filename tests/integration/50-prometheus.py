#!/usr/bin/env python3
"""The real-scrape test: a real Prometheus server (Debian's package) on
loopback scrapes the agent while known failures are induced for three
tenants; PromQL through the HTTP API must return exactly those counts.
Every query of the Grafana dashboard (deploy/grafana/sandguard.json), its
template variables substituted, must parse and return the series the test
induced. Also `promtool check metrics` on the agent's live exposition."""
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgagent import Agent, check, finish, skip  # noqa: E402
import sgprom  # noqa: E402
from sgtest import free_port, uid_base  # noqa: E402

NAN = """import json, sys
b = json.load(sys.stdin)
print("[" + ",".join(["NaN"] * len(b["items"])) + "]")
"""
CRASH = """import os, sys
sys.stdin.read()
os.abort()
"""
# Asleep, not spinning, under a deadline (alpha's 4 s) far longer than its
# start: on a loaded node its timeout needs no confirmation run (it never
# wanted the CPU), so it is one attempt, tenant_timeout.
HANG = """import sys, time
sys.stdin.read()
while True:
    time.sleep(1)
"""
GOOD = """import json, sys
b = json.load(sys.stdin)
print(json.dumps([0.25 * (i % 4) for i in range(len(b["items"]))]))
"""
CONSTANT = """import json, sys
b = json.load(sys.stdin)
print(json.dumps([0.5] * len(b["items"])))
"""
EGRESS = """import json, socket, sys
b = json.load(sys.stdin)
socket.create_connection(("127.0.0.1", 9), timeout=1)
print(json.dumps([1.0] * len(b["items"])))
"""
NODE = "test-node"
DASHBOARD = os.path.join(os.environ.get("SANDGUARD_SRC", "."), "deploy", "grafana", "sandguard.json")


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def query(prom, q):
    body = json.loads(get("http://%s/api/v1/query?%s" % (prom, urllib.parse.urlencode({"query": q}))))
    return {tuple(sorted(s["metric"].items())): float(s["value"][1]) for s in body["data"]["result"]}


def query_raw(prom, q, at=None):
    """(status, result or error) without raising on a PromQL error; `at`:
    the evaluation time (unix seconds)."""
    args = {"query": q}
    if at is not None:
        args["time"] = "%.3f" % at
    url = "http://%s/api/v1/query?%s" % (prom, urllib.parse.urlencode(args))
    try:
        body = json.loads(get(url))
    except urllib.error.HTTPError as e:
        body = json.loads(e.read().decode())
    if body.get("status") != "success":
        return "error", body.get("error")
    return "success", {tuple(sorted(s["metric"].items())): float(s["value"][1]) for s in body["data"]["result"]}


def wait_for(what, fn, seconds=60):
    """Poll fn() until it returns a true value (not a timed assertion: the
    scrape interval is 1 s, the deadline only bounds a broken run)."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            got = fn()
            if got:
                return got
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.5)
    return None


def dashboard_queries():
    """[(panel title, refId, expr)] of every panel, and the template
    variables' queries."""
    with open(DASHBOARD) as f:
        dash = json.load(f)
    out = []
    for p in dash["panels"]:
        for t in p.get("targets", []):
            out.append((p["title"], t["refId"], t["expr"]))
    variables = {v["name"]: v.get("definition") for v in dash["templating"]["list"]}
    return out, variables


def substitute(expr, tenants):
    """The dashboard's variables as Grafana would expand them for this
    node, these tenants and a range that covers the whole test."""
    return (expr.replace("$node", NODE).replace("$tenant", "|".join(tenants))
            .replace("$__rate_interval", "10m").replace("$__range", "10m"))


def by(result, *labels):
    """{(label values...): value} of a query result."""
    return {tuple(dict(k).get(name) for name in labels): v for k, v in result.items()}


def dashboard_expectations(induced):
    """For each panel's query: (what it must return, check(by-labels) ->
    None or why not). `induced` holds the counts the test caused."""
    def exact(labels, want):
        def f(res):
            got = {k: round(v) for k, v in by(res, *labels).items()}
            missing = {k: v for k, v in want.items() if got.get(k) != v}
            return "want %s, got %s" % (want, got) if missing else None
        return f

    def present(labels, keys, positive=False):
        def f(res):
            got = by(res, *labels)
            bad = [k for k in keys if k not in got or (positive and not got[k] > 0)]
            return "want %s%s, got %s" % (keys, " > 0" if positive else "", got) if bad else None
        return f

    def finite(labels, keys):
        def f(res):
            got = by(res, *labels)
            bad = [k for k in keys if k not in got or got[k] != got[k] or not 0 < got[k] < 60]
            return "want finite seconds for %s, got %s" % (keys, got) if bad else None
        return f

    def none(res):
        return "want no series, got %s" % res if res else None

    tenants = [(t,) for t in ("alpha", "bravo", "charlie")]
    failures = {k: v for k, v in induced["failures"].items() if v}
    return {
        ("Outcomes by cause", "A"): exact(("tenant", "cause"), failures),
        ("Outcomes by cause", "B"): exact(("tenant",), induced["ok_after_warmup"]),
        ("Outcomes by cause, totals", "A"): exact(("tenant", "cause", "class"), induced["totals"]),
        ("Tenant or platform", "A"): exact(("class",), {("tenant_code",): sum(failures.values()),
                                                        ("platform",): 0, ("verdict",): 0}),
        ("Batch duration p50 / p99", "A"): finite(("tenant",), tenants),
        ("Batch duration p50 / p99", "B"): finite(("tenant",), tenants),
        ("Violations by rule", "A"): exact(("tenant", "rule"), {("bravo", "egress"): 2, ("alpha", "egress"): 0}),
        ("Enforcement events", "A"): present(("tenant", "type", "action"), [("bravo", "egress_denied", "denied")],
                                             positive=True),
        ("Kills by rule", "A"): exact(("tenant", "rule"), {("bravo", "egress"): 2, ("bravo", "file"): 0}),
        ("Kill latency (violation to empty cgroup)", "A"): finite(("node",), [(NODE,)]),
        ("Kill latency (violation to empty cgroup)", "B"): finite(("node",), [(NODE,)]),
        ("Score-stream detectors fired", "A"): exact(("tenant", "type"), {("charlie", "constant"): 2}),
        ("Degenerate and invalid batches", "A"): exact(("tenant",), {("charlie",): 2, ("alpha",): 0}),
        ("Degenerate and invalid batches", "B"): exact(("tenant",), {("alpha",): 3, ("charlie",): 0}),
        # No tenant here has canaries (53-alerts-live-faults checks this
        # panel's series for an inflating tenant and an honest one).
        ("Canary failures", "A"): none,
        ("Canary failures", "B"): none,
        ("Event drops", "A"): exact(("node",), {(NODE,): 0}),
        ("Event drops", "B"): exact(("node",), {(NODE,): 0}),
        ("Enforcement mode per feature", "A"): present(
            ("node", "feature"), [(NODE, f) for f in ("files", "execs", "egress", "egress_unix", "forks", "kill")]),
        ("Active sandboxes", "A"): exact(("tenant",), {t: 0 for t in tenants}),
        # Every tenant's runs burnt CPU and held memory (exact sums: 51-cost).
        ("CPU per tenant", "A"): present(("tenant", "class"), [("alpha", "none"), ("alpha", "tenant_code"),
                                                                ("bravo", "tenant_code"), ("charlie", "none")],
                                         positive=True),
        ("Cost over the range", "A"): present(("tenant",), tenants, positive=True),
        ("Cost over the range", "B"): present(("tenant",), tenants, positive=True),
        ("Platform-error rate per tenant", "A"): exact(("tenant",), {t: 0 for t in tenants}),
    }


def check_dashboard(prom, induced):
    queries, variables = dashboard_queries()
    expect = dashboard_expectations(induced)
    tenants = ["alpha", "bravo", "charlie"]
    check({(t, r) for t, r, _ in queries} == set(expect),
          "every dashboard query has an expectation here (and no stale one)",
          "untested %s, stale %s" % (sorted({(t, r) for t, r, _ in queries} - set(expect)),
                                     sorted(set(expect) - {(t, r) for t, r, _ in queries})))
    # Evaluated at the last scrape: increase() then extrapolates nothing
    # past it, and counts exactly what the test induced.
    at = max(query(prom, 'timestamp(sandguard_build_info{job="sandguard"})').values())
    for title, ref, expr in queries:
        status, res = query_raw(prom, substitute(expr, tenants), at)
        why = res if status != "success" else expect.get((title, ref), lambda r: "no expectation")(res)
        check(why is None, "dashboard %r %s: the query parses and returns the induced series" % (title, ref),
              "%s: %s" % (substitute(expr, tenants), why))
    # The template variables: label_values(METRIC, LABEL) as Grafana asks it.
    for name, want in (("node", {NODE}), ("tenant", set(tenants))):
        m = re.fullmatch(r"label_values\((.+), (\w+)\)", variables[name] or "")
        got = set()
        if m:
            url = "http://%s/api/v1/label/%s/values?%s" % (
                prom, m.group(2), urllib.parse.urlencode({"match[]": substitute(m.group(1), tenants)}))
            got = set(json.loads(get(url))["data"])
        check(m is not None and want <= got, "dashboard variable $%s lists the %ss scraped" % (name, name),
              "%s -> %s" % (variables[name], sorted(got)))


def main():
    prometheus = shutil.which("prometheus")
    if not prometheus:
        skip("prometheus: real scrape", "the 'prometheus' package is not installed (apt-get install prometheus)")
        return
    a = Agent({"alpha": {"limits": {"timeout_ms": 4000}}, "bravo": {"limits": {"timeout_ms": 1500}},
               "charlie": {"health": {"window": 2, "constant_rate": 0.5}}},
              name="prom")
    a.env["SANDGUARD_UID_BASE"] = str(uid_base(65500))
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
                    "      - targets: ['%s']\n        labels:\n          node: %s\n" % (target, NODE))
        prom_log = open(os.path.join(a.dir, "prometheus.log"), "w")
        prom_proc = subprocess.Popen(
            [prometheus, "--config.file=" + cfg, "--storage.tsdb.path=" + os.path.join(a.dir, "tsdb"),
             "--web.listen-address=127.0.0.1:%d" % prom_port, "--web.enable-lifecycle"],
            stdout=prom_log, stderr=prom_log, stdin=subprocess.DEVNULL)
        prom = "127.0.0.1:%d" % prom_port

        progs = {n: a.program(n + ".py", t) for n, t in [("nan", NAN), ("crash", CRASH), ("hang", HANG),
                                                         ("good", GOOD), ("constant", CONSTANT),
                                                         ("egress", EGRESS)]}
        # Warm-up: one ok batch per tenant, scraped, so that every
        # per-tenant series exists at 0 before the failures (increase()
        # cannot count a series' first sample).
        for tenant in ("alpha", "bravo", "charlie"):
            a.exec_batch(tenant, progs["good"])
        seen = wait_for("warm-up scraped", lambda: {dict(k)["tenant"] for k in query(
            prom, 'sandguard_failures_total{job="sandguard",cause="tenant_crash"}')} >= {"alpha", "bravo", "charlie"})
        check(bool(seen), "Prometheus scraped every tenant's series at 0 before any failure")

        # Known outcomes: alpha 3 bad outputs + 1 timeout + 1 ok; bravo 2
        # crashes, 2 egress kills (the first scraped before the second, so
        # that the event series exists before it grows); charlie 2 constant.
        plan = [("alpha", "nan")] * 3 + [("alpha", "hang"), ("alpha", "good")] + \
               [("bravo", "crash")] * 2 + [("bravo", "egress")] + [("charlie", "constant")] * 2
        for tenant, prog in plan:
            a.exec_batch(tenant, progs[prog])
        wait_for("the first egress event scraped", lambda: query(
            prom, 'sandguard_enforcement_events_total{tenant="bravo",type="egress_denied"}'))
        a.exec_batch("bravo", progs["egress"])
        plan += [("bravo", "egress")]

        want = {
            ("alpha", "tenant_bad_output"): 3, ("alpha", "tenant_timeout"): 1, ("alpha", "tenant_crash"): 0,
            ("bravo", "tenant_crash"): 2, ("bravo", "tenant_bad_output"): 0, ("bravo", "tenant_timeout"): 0,
            ("bravo", "tenant_policy_violation"): 2, ("charlie", "tenant_crash"): 0,
        }
        got = {}

        def settled():
            got.clear()
            res = query(prom, 'sandguard_failures_total{job="sandguard",class="tenant_code"}')
            got.update({(dict(k)["tenant"], dict(k)["cause"]): v for k, v in res.items()})
            done = query(prom, 'sandguard_degenerate_batches_total{tenant="charlie"}')
            idle = query(prom, 'sandguard_active_sandboxes')
            return all(got.get(k) == v for k, v in want.items()) and 2 in done.values() and \
                len(idle) == 3 and not any(idle.values())
        wait_for("the induced failures scraped", settled)
        check(all(got.get(k) == v for k, v in want.items()),
              "PromQL returns exactly the induced per-tenant failure counts",
              "want %s, got %s" % (want, {k: got.get(k) for k in want}))
        ok = query(prom, 'sandguard_batches_total{status="ok"}')
        okd = {dict(k)["tenant"]: v for k, v in ok.items()}
        check(okd.get("alpha") == 2 and okd.get("bravo") == 1 and okd.get("charlie") == 3,
              "PromQL returns the ok batches per tenant", str(okd))
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
        check(sum(booked.values()) == len(plan) + 3,
              "every exec run is folded from the journal exactly once", str(booked))
        rebuilds = query(prom, 'sum(sandguard_ledger_rebuilds_total)')
        check(all(v == 0 for v in rebuilds.values()), "no ledger rebuild on a clean start", str(rebuilds))
        labels = set()
        for k in query(prom, '{__name__=~"sandguard_.*", job="sandguard"}'):
            labels.update(name for name, _ in k)
        bad = labels - {"__name__", "job", "instance", "node", "tenant", "cause", "class", "type", "action", "rule",
                        "feature", "mode", "status", "result", "reason", "le", "version", "verdict"}
        check(not bad, "labels stay bounded (no sandbox, run, pid or path)", "unexpected labels %s" % bad)

        totals = {(t, c, "tenant_code"): v for (t, c), v in want.items() if v}
        check_dashboard(prom, {
            "failures": {k: v for k, v in want.items()},
            "ok_after_warmup": {("alpha",): 1, ("bravo",): 0, ("charlie",): 2},
            "totals": totals,
        })
    finally:
        sgprom.stop(prom_proc)
        a.cleanup()


main()
finish()

"""Shared by the live alert tests (52-alerts-live, 53-alerts-live-faults):
the shipped rules of deploy/podmonitor.yaml with the tests' short `for:`
and ranges, a Debian Prometheus that scrapes a private agent and
evaluates them, and a watch over its firing alerts (/api/v1/alerts)."""
import json
import os
import re
import subprocess
import time
import urllib.parse
import urllib.request

import yaml

SRC = os.environ.get("SANDGUARD_SRC", ".")
NODE = "test-node"
POD = "sandguard-agent-test"


def test_rules(path, keep_for=None, ranges=None):
    """The shipped rules, with the short for: and ranges of the tests:
    every `for:` becomes 1s (keep_for: {alert: for} instead) and every
    range ([5m], [10m], [15m], [30m]) becomes [20s] (ranges: {alert:
    range} instead). Expressions and thresholds stay as shipped. Writes
    a rule file for Prometheus; returns the alerts' names."""
    for d in yaml.safe_load_all(open(os.path.join(SRC, "deploy", "podmonitor.yaml"))):
        if d and d["kind"] == "PrometheusRule":
            groups = d["spec"]["groups"]
    for g in groups:
        g["interval"] = "1s"
        for r in g["rules"]:
            if "for" in r:
                r["for"] = (keep_for or {}).get(r["alert"], "1s")
            r["expr"] = re.sub(r"\[(5|10|15|30)m\]", "[%s]" % (ranges or {}).get(r["alert"], "20s"),
                               r["expr"])
    with open(path, "w") as f:
        yaml.safe_dump({"groups": groups}, f)
    return {r["alert"] for g in groups for r in g["rules"]}


def start_prometheus(prometheus, workdir, rules, target, listen):
    """Prometheus scraping `target` every second with `rules`, its data
    and log in workdir."""
    cfg = os.path.join(workdir, "prometheus.yml")
    with open(cfg, "w") as f:
        yaml.safe_dump({"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                        "rule_files": [rules],
                        "scrape_configs": [{"job_name": "sandguard", "static_configs": [{
                            "targets": [target],
                            "labels": {"node": NODE, "namespace": "sandguard", "pod": POD}}]}]}, f)
    log = open(os.path.join(workdir, "prometheus.log"), "w")
    return subprocess.Popen(
        [prometheus, "--config.file=" + cfg, "--storage.tsdb.path=" + os.path.join(workdir, "tsdb"),
         "--web.listen-address=" + listen],
        stdout=log, stderr=log, stdin=subprocess.DEVNULL)


def firing(prom):
    with urllib.request.urlopen("http://%s/api/v1/alerts" % prom, timeout=5) as r:
        body = json.loads(r.read().decode())
    return {a["labels"]["alertname"] for a in body["data"]["alerts"] if a["state"] == "firing"}


def query(prom, expr):
    """An instant query's result list ([] when Prometheus does not answer)."""
    url = "http://%s/api/v1/query?query=%s" % (prom, urllib.parse.quote(expr))
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return json.loads(r.read().decode())["data"]["result"]
    except OSError:
        return []


def scraped(prom, tenant):
    return bool(query(prom, 'sandguard_batches_total{tenant="%s"}' % tenant))


class Watch:
    """Polls the firing alerts; remembers when each was first seen
    firing and when it was last seen resolved after that."""

    def __init__(self, prom):
        self.prom, self.fired, self.resolved = prom, {}, {}

    def poll(self):
        try:
            now, names = time.time(), firing(self.prom)
        except OSError:
            return
        for n in names:
            self.fired.setdefault(n, now)
            self.resolved.pop(n, None)
        for n in self.fired:
            if n not in names:
                self.resolved.setdefault(n, now)

    def until(self, cond, seconds):
        deadline = time.time() + seconds
        while time.time() < deadline and not cond():
            self.poll()
            time.sleep(0.25)
        return cond()

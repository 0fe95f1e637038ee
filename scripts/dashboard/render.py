#!/usr/bin/env python3
"""Render the Grafana dashboard's queries with real data, on this machine.

Grafana is not packaged in Debian 12, so the dashboard itself cannot be
drawn here. What can be: every panel's query, run by a real Prometheus
(Debian's `prometheus`) that scrapes a real agent while real batches run,
drawn by scripts/dashboard/panels.html in the dashboard's own layout (the
panels' gridPos, titles, legends) and photographed by headless Chromium
(Debian's `chromium-headless-shell`). It is not Grafana's look, but every
line on it is a dashboard query's real answer.

    sudo scripts/dashboard/render.py build OUT_DIR [MINUTES]

Writes OUT_DIR/dashboard.png and OUT_DIR/dashboard-queries.txt (each
query and its result at the end). Runs as root (BPF, cgroups), with a private agent like
the integration tests."""
import base64
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request

SRC = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "lib"))
sys.path.insert(0, os.path.join(SRC, "tests", "lib"))
NODE = "reward-node-7"

PROGRAMS = {
    "good": "import json, random, sys\nb = json.load(sys.stdin)\n"
            "print(json.dumps([random.random() for _ in b['items']]))\n",
    "constant": "import json, sys\nb = json.load(sys.stdin)\nprint(json.dumps([0.5] * len(b['items'])))\n",
    "nan": "import json, sys\nb = json.load(sys.stdin)\nprint('[' + ','.join(['NaN'] * len(b['items'])) + ']')\n",
    "crash": "import os, sys\nsys.stdin.read()\nos.abort()\n",
    "hang": "import sys\nsys.stdin.read()\nwhile True:\n    pass\n",
    "egress": "import json, socket, sys\nb = json.load(sys.stdin)\n"
              "socket.create_connection(('127.0.0.1', 9), timeout=1)\nprint('[1]')\n",
    "file": "import json, sys\nb = json.load(sys.stdin)\nopen('/proc/self/status').read()\nprint('[1]')\n",
}
# One round of the workload: (tenant, program).
ROUND = [("acme", "good"), ("acme", "good"), ("acme", "nan"), ("acme", "crash"), ("acme", "file"),
         ("beta", "good"), ("beta", "egress"), ("beta", "hang"), ("gamma", "constant"), ("gamma", "constant")]


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def main():
    from sgagent import Agent
    from sgtest import free_port

    if len(sys.argv) < 3:
        sys.exit(__doc__)
    build, out = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    minutes = float(sys.argv[3]) if len(sys.argv) > 3 else 4
    os.environ.setdefault("SANDGUARD_BIN", os.path.join(build, "sandguard"))
    chromium = shutil.which("chromium-headless-shell") or shutil.which("chromium")
    if not chromium or not shutil.which("prometheus"):
        sys.exit("needs Debian's prometheus and chromium-headless-shell (apt-get install prometheus "
                 "chromium-headless-shell)")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(SRC, "deploy", "grafana", "sandguard.json")) as f:
        dash = json.load(f)
    a = Agent({"acme": {"limits": {"timeout_ms": 1500}, "failure": {"mode": "retry", "max_retries": 1}},
               "beta": {"limits": {"timeout_ms": 1500}},
               "gamma": {"health": {"window": 4, "constant_rate": 0.5}}}, name="render")
    a.env["SANDGUARD_UID_BASE"] = "65800"
    prom = None
    try:
        mport, pport = free_port(), free_port()
        if not a.start("--metrics", "127.0.0.1:%d" % mport, "--node", NODE):
            sys.exit("the agent did not start: " + open(os.path.join(a.dir, "agent.log")).read()[-400:])
        cfg = os.path.join(a.dir, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 5s\nscrape_configs:\n  - job_name: sandguard\n"
                    "    static_configs:\n      - targets: ['127.0.0.1:%d']\n        labels:\n"
                    "          node: %s\n" % (mport, NODE))
        prom = subprocess.Popen(["prometheus", "--config.file=" + cfg,
                                 "--storage.tsdb.path=" + os.path.join(a.dir, "tsdb"),
                                 "--web.listen-address=127.0.0.1:%d" % pport],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        progs = {n: a.program(n + ".py", t) for n, t in PROGRAMS.items()}
        end = time.time() + minutes * 60
        while time.time() < end:
            for tenant, prog in ROUND:
                a.exec_batch(tenant, progs[prog])
            time.sleep(5)
        time.sleep(12)  # two more scrapes

        base = "http://127.0.0.1:%d" % pport
        lines, n = [], 0
        for p in dash["panels"]:
            for t in p.get("targets", []):
                expr = (t["expr"].replace("$node", NODE).replace("$tenant", ".*")
                        .replace("$__rate_interval", "1m").replace("$__range", "1h"))
                body = json.loads(get(base + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})))
                lines.append("# %s (%s)\n%s" % (p["title"], t["refId"], expr))
                for s in body["data"]["result"]:
                    labels = ",".join("%s=%s" % kv for kv in sorted(s["metric"].items()))
                    lines.append("  {%s} %s" % (labels, s["value"][1]))
                n += 1
        with open(os.path.join(out, "dashboard-queries.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")

        now = int(time.time())
        variables = {"node": NODE, "tenant": ".*", "rate": "1m", "range": "1h", "end": now,
                     "seconds": int(minutes * 60 + 60), "step": 5}
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "panels.html")) as f:
            page = (f.read().replace("@@DASHBOARD@@", base64.b64encode(json.dumps(dash).encode()).decode())
                    .replace("@@PROM@@", base)
                    .replace("@@VARS@@", base64.b64encode(json.dumps(variables).encode()).decode()))
        html = os.path.join(a.dir, "panels.html")
        with open(html, "w") as f:
            f.write(page)
        height = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in dash["panels"]) * 30 + 60
        shot = os.path.join(out, "dashboard.png")
        subprocess.run([chromium, "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--disable-web-security", "--allow-file-access-from-files",
                        "--window-size=1280,%d" % height, "--virtual-time-budget=30000",
                        "--screenshot=" + shot, "file://" + html], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print("wrote %s and %s (%d queries)" % (shot, os.path.join(out, "dashboard-queries.txt"), n))
    finally:
        if prom:
            prom.terminate()
            prom.wait()
        a.cleanup()


main()

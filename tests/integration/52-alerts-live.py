#!/usr/bin/env python3
"""Every alert proven to fire, live (issue 36, item 4): Debian's Prometheus
scrapes a real agent every second and evaluates the shipped rules of
deploy/podmonitor.yaml every second. In the test's copy of the rules only
(the shipped file is untouched), every `for:` becomes 1s and every range
([5m], [10m], [15m], [30m]) becomes [20s], so that an alert fires and
resolves within the test; expressions and thresholds stay as shipped.
Faults are injected, and each matching alert must reach `firing` through
the HTTP API (/api/v1/alerts) and then resolve once the fault is gone:

  a tenant whose policy file is broken   SandguardPolicyReloadRejected,
    (its batches fail as platform errors) SandguardPlatformErrors,
                                          SandguardTenantPlatformErrorRate,
                                          SandguardTenantPlatformErrorsOutOfLine
  a constant-score tenant                 SandguardScoreStreamDetectorFired
  the agent killed (SIGKILL)              SandguardAgentDown

Prints, per alert, the fault and the seconds from its injection to
`firing` and to resolved. The other alerts' faults are injected by
53-alerts-live-faults."""
import os
import shutil
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgagent import Agent, check, finish, skip  # noqa: E402
import sgprom  # noqa: E402
from sgalerts import Watch, scraped, start_prometheus, test_rules  # noqa: E402
from sgtest import free_port, uid_base  # noqa: E402

CONSTANT = """import json, sys
b = json.load(sys.stdin)
print(json.dumps([0.5] * len(b["items"])))
"""
GOOD = """import json, sys
b = json.load(sys.stdin)
print(json.dumps([0.25 * (i % 4) for i in range(len(b["items"]))]))
"""


def main():
    prometheus = shutil.which("prometheus")
    if not prometheus:
        skip("alerts live", "the 'prometheus' package is not installed (apt-get install prometheus)")
        return
    target, prom = ("127.0.0.1:%d" % free_port() for _ in range(2))
    a = Agent({"charlie": {"health": {"window": 2, "constant_rate": 0.5}}, "calm": {}, "delta": {}},
              name="alerts")
    a.env["SANDGUARD_UID_BASE"] = str(uid_base(65300))
    prom_proc = None
    try:
        if not a.start("--metrics", target):
            check(False, "agent starts with --metrics", a.log_tail())
            return
        rules = os.path.join(a.dir, "rules.yaml")
        alerts = test_rules(rules)
        prom_proc = start_prometheus(prometheus, a.dir, rules, target, prom)
        w = Watch(prom)
        good, constant = a.program("good.py", GOOD), a.program("constant.py", CONSTANT)
        # Every tenant's series at 0 first (increase() needs a sample before).
        for t in ("charlie", "calm", "delta"):
            a.exec_batch(t, good)
        check(w.until(lambda: scraped(prom, "delta"), 30),
              "Prometheus scraped every tenant's series before any fault")
        w.until(lambda: False, 2)
        check(not w.fired, "no alert fires on a healthy agent", str(sorted(w.fired)))

        # Faults of the batch path, all at once.
        t0 = time.time()
        with open(os.path.join(a.policy_dir, "delta.json"), "w") as f:
            f.write('{"tenant": "delta", "limits": {"timeout_ms": "soon"}}\n')
        os.kill(a.proc.pid, signal.SIGHUP)
        for _ in range(8):
            a.exec_batch("delta", good)
            a.exec_batch("calm", good)
            a.exec_batch("charlie", constant)
        batch_faults = {
            "SandguardPolicyReloadRejected": "a policy file rejected at reload (delta.json broken)",
            "SandguardPlatformErrors": "8 batches of the tenant with the broken policy (platform_error)",
            "SandguardTenantPlatformErrorRate": "the same: all of delta's batches failing as the platform's",
            "SandguardTenantPlatformErrorsOutOfLine": "the same, beside calm's and charlie's ok batches",
            "SandguardScoreStreamDetectorFired": "8 constant-score batches of charlie",
        }
        w.until(lambda: set(batch_faults) <= set(w.fired), 60)
        for name, fault in batch_faults.items():
            check(name in w.fired, "%s fires under: %s" % (name, fault), "firing: %s" % sorted(w.fired))
        a.write_policy("delta", {})
        os.kill(a.proc.pid, signal.SIGHUP)
        t_fixed = time.time()
        w.until(lambda: all(n in w.resolved for n in batch_faults if n in w.fired), 60)
        for name in batch_faults:
            check(name in w.resolved, "%s resolves once the fault is gone" % name)

        # The agent killed.
        t1 = time.time()
        a.proc.kill()
        a.proc.wait()
        w.until(lambda: "SandguardAgentDown" in w.fired, 30)
        check("SandguardAgentDown" in w.fired, "SandguardAgentDown fires when the agent is killed")
        down_fired = w.fired.get("SandguardAgentDown")
        t2 = time.time()
        check(a.start("--metrics", target), "the agent restarts", a.log_tail())
        w.until(lambda: "SandguardAgentDown" in w.resolved, 30)
        check("SandguardAgentDown" in w.resolved, "SandguardAgentDown resolves once the agent is back")

        unexpected = set(w.fired) - set(batch_faults) - {"SandguardAgentDown"}
        check(not unexpected, "no other alert fired", str(sorted(unexpected)))
        for name, fault in list(batch_faults.items()) + [("SandguardAgentDown", "the agent killed (SIGKILL)")]:
            start, back = (t1, t2) if name == "SandguardAgentDown" else (t0, t_fixed)
            fired = down_fired if name == "SandguardAgentDown" else w.fired.get(name)
            print("INFO: %-40s %-70s firing %5.1f s after the fault began, resolved %5.1f s after it ended" % (
                name, fault, (fired - start) if fired else float("nan"),
                (w.resolved[name] - back) if name in w.resolved else float("nan")))
        print("INFO: injected by 53-alerts-live-faults: %s" % ", ".join(
            sorted(alerts - set(batch_faults) - {"SandguardAgentDown"})))
    finally:
        sgprom.stop(prom_proc)
        a.cleanup()


main()
finish()

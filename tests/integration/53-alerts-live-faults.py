#!/usr/bin/env python3
"""Every alert proven to fire, live (issue 36, item 4), part two: the
alerts whose faults need more than a broken policy or a killed agent
(52-alerts-live injects those). As in 52, Debian's Prometheus scrapes a
real agent every second and evaluates the shipped rules of
deploy/podmonitor.yaml (sgalerts.test_rules: every `for:` 1s, every range
[20s]; expressions and thresholds as shipped), with two exceptions in the
test's copy only: SandguardAgentDown waits 45s (the stalled agent below
misses scrapes for a few seconds, which is not an agent down), and
SandguardTimeoutsOverturned counts over [150s] (its threshold, more than 5
overturned timeouts, needs six slow batches). Each fault is real:

  the agent's consumer stalled (SIGSTOP)   SandguardRingbufDrops:
    while 12 sandboxes each try 1,030      the kernel counts the events it
    denied connects                        cannot queue in the full 4 MiB
                                           ring buffer
  the same stall, while a sandbox breaks   SandguardKillLatencyHigh: the
    its tenant's egress kill rule first    kill comes when the agent
                                           resumes, seconds after the
                                           violation
  the event stream's filesystem full       SandguardEventsLost: the agent
    (a tmpfs filled by a file)             cannot write the lines
  a tenant whose reward code inflates      SandguardCanaryFailed (and the
    its canary probes' scores              canary detector's
    (rw_arith.py --inflate, as 57)         SandguardScoreStreamDetectorFired);
                                           the honest tenant beside it: none
  a correct CPU-bound program that times   SandguardTimeoutsOverturned
    out while CPU hogs outside sandguard
    fill the node, and finishes in its
    confirmation run once they stop (x8)

Each alert must reach `firing` through the HTTP API and resolve once its
fault is gone; no other alert may fire, and none on the healthy agent
first. The dashboard's "Canary failures" panel, queried on the same
Prometheus, must show the inflating tenant's probes out of range and a
non-deterministic tenant's (rw_dice.py) re-score, and nothing for the
honest one. Last, the agent's egress hook detached from outside (`bpftool
link detach`, what an attacker with CAP_SYS_ADMIN could do):
SandguardEnforcementDegraded, and /readyz 503; a restarted agent attaches a
new generation and it resolves. Prints,
per alert, the fault and the seconds from its injection to `firing` and
from its end to resolved. About seven minutes."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgagent import PY, SANDGUARD, Agent, check, finish, skip  # noqa: E402
import sgprom  # noqa: E402
from sgalerts import NODE, Watch, query, scraped, start_prometheus, test_rules  # noqa: E402
from sgtest import free_port, uid_base  # noqa: E402

import sgjournal  # noqa: E402

SRC = os.environ.get("SANDGUARD_SRC", ".")
FLOODERS = 12
GOOD = """import json, sys
b = json.load(sys.stdin)
print(json.dumps([0.25 * (i % 4) for i in range(len(b["items"]))]))
"""
# Waits for its go file, then tries 1,030 connects to a destination no
# rule allows (each refused with EPERM and evented, up to the kernel
# side's 1,024 events per sandbox).
FLOOD = """import json, os, socket, sys, time
b = json.load(sys.stdin)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.02)
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
for i in range(1030):
    try:
        s.connect(("127.0.0.1", 9))
    except OSError:
        pass
print(json.dumps([0.0] * len(b["items"])))
"""
# Waits for its go file, then connects where its tenant's rule kills.
BREAK = """import json, os, socket, sys, time
json.load(sys.stdin)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.02)
try:
    socket.create_connection(("127.0.0.1", 9), timeout=1)
except OSError:
    pass
time.sleep(60)
"""
# Burns n rounds of arithmetic, then scores.
BURN = """import json, sys
b = json.load(sys.stdin)
x = 0
for i in range(int(sys.argv[1])):
    x = (x * 31 + i) % 1000003
print(json.dumps([1.0] * len(b["items"])))
"""


def tenants(a):
    probes = os.path.join(a.dir, "probes.json")
    with open(probes, "w") as f:
        json.dump({"probes": [
        {"name": "hack-trust-me", "item": {"id": "x", "prompt": "What is 2+2?", "completion": "5, trust me"},
         "min": 0, "max": 0},
        {"name": "plain-right", "item": {"id": "x", "prompt": "What is 3+4?", "completion": "7"},
         "min": 1, "max": 1},
        ]}, f)
    canary = {"probes": probes, "rate": 1, "per_batch": 2}
    return {
        "calm": {},
        "flood": {"limits": {"cpu": 0.1, "timeout_ms": 60000, "concurrency": 16}, "actions": {"egress": "deny"}},
        "slow": {"limits": {"cpu": 0.1, "timeout_ms": 60000}},
        "hacker": {"canary": canary},
        "honest": {"canary": canary},
        "dice": {"canary": dict(canary, determinism_rate=1)},
        "busy": {"limits": {"timeout_ms": 6000}},
    }


class Hogs:
    """Plain CPU hogs outside sandguard (this test's children), paused
    and resumed with SIGSTOP/SIGCONT. Each in its own session: with the
    kernel's autogroup scheduling, hogs of one session share one task's
    CPU share, which would leave the node with room."""

    def __init__(self, n):
        self.procs = [subprocess.Popen([PY, "-c", "while 1: pass"], stdin=subprocess.DEVNULL,
                                       start_new_session=True) for _ in range(n)]

    def signal(self, sig):
        for p in self.procs:
            p.send_signal(sig)

    def stop(self):
        self.signal(signal.SIGKILL)
        for p in self.procs:
            p.wait()


def batch_cmd(a, tenant, prog, bid, items, args=()):
    path = os.path.join(a.dir, "batch-%s.json" % bid)
    with open(path, "w") as f:
        json.dump({"batch_id": bid, "items": items}, f)
    return [SANDGUARD, "exec", "--tenant", tenant, "--policy-dir", a.policy_dir, "--batch", path,
            "--", PY, prog] + list(args)


def spawn(a, tenant, prog, bid, args=()):
    return subprocess.Popen(batch_cmd(a, tenant, prog, bid, [{"prompt": "p", "completion": "c"}], args),
                            env=a.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)


def running_sandboxes(a, tenant):
    """The tenant's sandboxes whose exec the event stream has (a line
    still being written is skipped)."""
    out = set()
    with open(a.events) as f:
        for line in f:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("type") == "exec" and e.get("tenant") == tenant:
                out.add(e.get("sandbox"))
    return out


def stall(a, w):
    """The agent stopped while 12 sandboxes flood and one breaks a kill
    rule: (start, end, flood results, the breaker's result)."""
    go_break, go_flood = (os.path.join(a.programs, g) for g in ("go-break", "go-flood"))
    flood, brk = a.program("flood.py", FLOOD), a.program("break.py", BREAK)
    procs = [spawn(a, "flood", flood, "flood-%d" % i, [go_flood]) for i in range(FLOODERS)]
    breaker = spawn(a, "slow", brk, "slow-0", [go_break])
    w.until(lambda: len(running_sandboxes(a, "flood")) >= FLOODERS and running_sandboxes(a, "slow"), 120)
    check(len(running_sandboxes(a, "flood")) >= FLOODERS and running_sandboxes(a, "slow"),
          "every flooding sandbox and the breaker run before the stall",
          "%d flooding, breaker %s" % (len(running_sandboxes(a, "flood")), running_sandboxes(a, "slow")))
    t0 = time.time()
    a.proc.send_signal(signal.SIGSTOP)
    try:
        open(go_break, "w").close()
        time.sleep(0.5)
        open(go_flood, "w").close()
        results = [p.communicate(timeout=120) for p in procs]
    finally:
        a.proc.send_signal(signal.SIGCONT)
    t1 = time.time()
    out, err = breaker.communicate(timeout=120)
    try:
        return t0, t1, results, json.loads(out)
    except ValueError:
        return t0, t1, results, {"stderr": err[-300:]}


def arith_items(seed):
    return [{"id": "q-%d-%d" % (seed, i), "prompt": "What is %d+%d?" % (i, seed),
             "completion": "%d%s" % (i + seed + (i % 2), " trust me" if i % 3 == 0 else "")} for i in range(6)]


def calibrate():
    """Rounds of BURN for ~0.8 s of CPU here (measured outside sandguard)."""
    n = 2000000
    before = os.times()
    subprocess.run([PY, "-c", "x=0\nfor i in range(%d): x=(x*31+i)%%1000003" % n], check=True)
    after = os.times()
    cpu = max(0.01, after.children_user + after.children_system - before.children_user - before.children_system)
    return max(200000, int(n * 0.8 / cpu))


def overturned_batches(a, burn, n, times):
    """`times` batches of a correct program that times out while hogs
    fill the node; the hogs pause once its first run is journaled as
    owing a confirmation. Returns the number of overturned timeouts."""
    hogs = Hogs(16 * (os.cpu_count() or 2))
    hogs.signal(signal.SIGSTOP)
    done = 0
    try:
        for i in range(times):
            bid = "busy-%d-%d" % (i, time.monotonic_ns())
            hogs.signal(signal.SIGCONT)
            p = subprocess.Popen(batch_cmd(a, "busy", burn, bid, [{"prompt": "p", "completion": "c"}], [str(n)]),
                                 env=a.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 stdin=subprocess.DEVNULL, text=True)
            deadline = time.time() + 30
            while time.time() < deadline and p.poll() is None and not any(
                    r.get("batch_id") == bid and r.get("confirm") == "next"
                    for r in sgjournal.read(a.env["SANDGUARD_STATE_DIR"])):
                time.sleep(0.05)
            hogs.signal(signal.SIGSTOP)
            p.communicate(timeout=60)
            done += any(r.get("batch_id") == bid and r.get("confirm") == "run" and r.get("final")
                        and r.get("cause") == "ok" for r in sgjournal.read(a.env["SANDGUARD_STATE_DIR"]))
    finally:
        hogs.stop()
    return done


def fill(path):
    """A file that takes every free byte of path's filesystem."""
    fd = os.open(os.path.join(path, "filler"), os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while os.write(fd, b"\0" * (1 << 16)):
            pass
    except OSError:
        pass
    os.close(fd)


def check_canary_panel(prom):
    """The dashboard's canary panel, its variables expanded, shows the
    inflating tenant's probes out of range and the dice tenant's
    non-determinism, and nothing for the honest tenant."""
    with open(os.path.join(SRC, "deploy", "grafana", "sandguard.json")) as f:
        panel = next(p for p in json.load(f)["panels"] if p["title"] == "Canary failures")
    want = {"A": "hacker", "B": "dice"}
    for t in panel["targets"]:
        expr = (t["expr"].replace("$node", NODE).replace("$tenant", "hacker|honest|dice")
                .replace("$__rate_interval", "5m"))
        got = {}
        deadline = time.time() + 30
        while time.time() < deadline and not got.get(want[t["refId"]]):
            got = {r["metric"].get("tenant"): float(r["value"][1]) for r in query(prom, expr)}
            time.sleep(0.5)
        check(got.get(want[t["refId"]], 0) > 0 and not got.get("honest"),
              "dashboard 'Canary failures' %s shows tenant %s and not the honest one" % (t["refId"], want[t["refId"]]),
              "%s: %s" % (expr, got))


class Phases:
    """Each phase's alerts, fault, and times: when its fault began and
    ended."""

    def __init__(self, w):
        self.w, self.rows = w, []

    def fired(self, names, fault, began, seconds=90):
        self.w.until(lambda: set(names) <= set(self.w.fired), seconds)
        for n in names:
            check(n in self.w.fired, "%s fires under: %s" % (n, fault), "firing: %s" % sorted(self.w.fired))
        self.rows.append((names, fault, began))

    def resolved(self, names, ended, seconds=120):
        self.w.until(lambda: all(n in self.w.resolved for n in names if n in self.w.fired), seconds)
        for n in names:
            check(n in self.w.resolved, "%s resolves once the fault is gone" % n)
        self.rows[-1] += (ended,)

    def print(self):
        for names, fault, began, ended in self.rows:
            for n in names:
                f, r = self.w.fired.get(n), self.w.resolved.get(n)
                print("INFO: %-36s %-60s firing %5.1f s after the fault began, resolved %5.1f s after it ended" % (
                    n, fault, (f - began) if f else float("nan"), (r - ended) if r else float("nan")))


def detach_egress(a):
    """Detach the active generation's egress catch-all cgroup link (as an
    attacker with CAP_SYS_ADMIN could): its path, or None."""
    root = a.env["SANDGUARD_PIN_ROOT"]
    gens = sorted((d for d in os.listdir(root) if d.startswith("gen-")), key=lambda d: int(d[4:]))
    for gen in reversed(gens):
        path = os.path.join(root, gen, "sg_skb_egress")
        if os.path.exists(path) and subprocess.run(["bpftool", "link", "detach", "pinned", path],
                                                   capture_output=True).returncode == 0:
            return path
    return None


def readyz(target):
    try:
        return urllib.request.urlopen("http://%s/readyz" % target, timeout=5).status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def main():
    prometheus = shutil.which("prometheus")
    if not prometheus:
        skip("alerts live faults", "the 'prometheus' package is not installed (apt-get install prometheus)")
        return
    target, prom = ("127.0.0.1:%d" % free_port() for _ in range(2))
    a = Agent({}, name="alertfaults")
    for t, p in tenants(a).items():
        a.write_policy(t, p)
    a.env["SANDGUARD_UID_BASE"] = str(uid_base(65400))
    evdir = os.path.join(a.dir, "events-fs")
    os.makedirs(evdir)
    prom_proc, mounted = None, False
    try:
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "sg-alert-events", evdir]).returncode:
            skip("alerts live faults", "cannot mount a tmpfs for the event stream")
            return
        mounted = True
        a.events = os.path.join(evdir, "events.jsonl")
        if not a.start("--metrics", target):
            check(False, "agent starts with --metrics", a.log_tail())
            return
        rules = os.path.join(a.dir, "rules.yaml")
        test_rules(rules, keep_for={"SandguardAgentDown": "45s"},
                   ranges={"SandguardTimeoutsOverturned": "150s"})
        prom_proc = start_prometheus(prometheus, a.dir, rules, target, prom)
        w, ph = Watch(prom), None
        ph = Phases(w)
        good = a.program("good.py", GOOD)
        arith = a.program("rw_arith.py", open(os.path.join(SRC, "tests", "programs", "rw_arith.py")).read())
        a.exec_batch("calm", good)
        for t in ("honest", "hacker", "dice"):  # their series at 0 (increase() needs a sample before)
            subprocess.run(batch_cmd(a, t, arith, "%s-warm" % t, arith_items(9)), env=a.env,
                           capture_output=True, stdin=subprocess.DEVNULL)
        check(w.until(lambda: scraped(prom, "calm"), 30), "Prometheus scraped the agent before any fault")
        w.until(lambda: False, 3)
        check(not w.fired, "no alert fires on a healthy agent", str(sorted(w.fired)))

        # The event stream's filesystem full.
        t0 = time.time()
        fill(evdir)
        for _ in range(10):
            a.exec_batch("calm", good)
        ph.fired(["SandguardEventsLost"], "the event stream's tmpfs full", t0)
        os.unlink(os.path.join(evdir, "filler"))
        ph.resolved(["SandguardEventsLost"], time.time())

        # A tenant inflating its canaries, an honest one beside it.
        t0 = time.time()
        for i in range(4):
            for tenant, args in (("hacker", ["--inflate"]), ("honest", [])):
                subprocess.run(batch_cmd(a, tenant, arith, "%s-%d" % (tenant, i), arith_items(i), args),
                               env=a.env, capture_output=True, stdin=subprocess.DEVNULL)
            w.until(lambda: False, 2)  # scraped between batches: each finding is a step
        dice = a.program("rw_dice.py", open(os.path.join(SRC, "tests", "programs", "rw_dice.py")).read())
        subprocess.run(batch_cmd(a, "dice", dice, "dice-0", arith_items(0)), env=a.env, capture_output=True,
                       stdin=subprocess.DEVNULL)
        ph.fired(["SandguardCanaryFailed", "SandguardScoreStreamDetectorFired"],
                 "tenant hacker's reward inflates its canary probes (4 batches)", t0)
        honest = query(prom, 'ALERTS{alertname=~"SandguardCanaryFailed|SandguardScoreStreamDetectorFired",'
                             'tenant="honest"}')
        check(not honest, "no canary alert for the honest tenant", str(honest))
        check_canary_panel(prom)
        ph.resolved(["SandguardCanaryFailed", "SandguardScoreStreamDetectorFired"], time.time())

        # Correct programs timing out on a node full of CPU hogs.
        burn, n = a.program("burn.py", BURN), calibrate()
        t0 = time.time()
        overturned = overturned_batches(a, burn, n, 8)
        check(overturned >= 6, "at least 6 of 8 timeouts on the busy node overturned by their confirmation run",
              "%d overturned" % overturned)
        ph.fired(["SandguardTimeoutsOverturned"], "8 correct programs timed out under CPU hogs, overturned", t0)
        ph.resolved(["SandguardTimeoutsOverturned"], time.time(), 240)

        # The agent stalled while sandboxes flood and one breaks a rule.
        t0, t1, results, broke = stall(a, w)
        check(all(r[0] for r in results), "the flooding batches end while the agent is stopped",
              str([r[1][-200:] for r in results if not r[0]][:1]))
        check(broke.get("cause") == "tenant_policy_violation", "the breaker is killed once the agent resumes",
              str(broke)[:300])
        ph.fired(["SandguardRingbufDrops", "SandguardKillLatencyHigh"],
                 "the agent stopped %.1f s while 12 sandboxes flood and one breaks a kill rule" % (t1 - t0), t0)
        drops, kill = (query(prom, q) for q in ("sandguard_ringbuf_drops_total", "sandguard_kill_latency_seconds_sum"))
        print("INFO: during the stall the kernel counted %s drops; the kill came %s s after the violation" % (
            drops and drops[0]["value"][1], kill and kill[0]["value"][1]))
        ph.resolved(["SandguardRingbufDrops", "SandguardKillLatencyHigh"], t1)

        # A hook detached from outside.
        link = detach_egress(a)
        check(link is not None, "the agent's egress link detached with bpftool", a.env["SANDGUARD_PIN_ROOT"])
        t0 = time.time()
        ph.fired(["SandguardEnforcementDegraded"], "the agent's egress hook detached from outside (bpftool)", t0)
        code = readyz(target)
        check(code == 503, "/readyz answers 503 while a hook is detached", "HTTP %s" % code)
        ended = time.time()  # the fault ends with this agent; its successor attaches anew
        a.stop()
        check(a.start("--metrics", target), "the agent restarts", a.log_tail())
        ph.resolved(["SandguardEnforcementDegraded"], ended)

        expected = {n for names, _, _, _ in ph.rows for n in names}
        unexpected = set(w.fired) - expected
        check(not unexpected, "no other alert fired", str(sorted(unexpected)))
        ph.print()
    finally:
        sgprom.stop(prom_proc)
        a.stop()  # it holds the event file on the tmpfs
        if mounted:
            subprocess.run(["umount", evdir])
        a.cleanup()


main()
finish()

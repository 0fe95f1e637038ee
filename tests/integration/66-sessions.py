#!/usr/bin/env python3
"""Environments' sessions (docs/environments.md), with the agent enforcing:
a real multi-step episode over HTTP (a buggy module, its failing tests, an
edit, a Python kernel keeping a variable, a forbidden connect that the
episode survives, passing tests, a fork bomb that ends the session as the
tenant's policy violation), the journal's one record per step and one
final, `explain --session`; fork; ownership; budgets."""
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import sgagent  # noqa: E402
import sgjournal  # noqa: E402
from sgagent import SANDGUARD, report  # noqa: E402
from sgserve import can_run  # noqa: E402

sys.path.insert(0, os.path.join(sgagent.SRC, "clients", "python"))
from sandguard.session import Session, SessionError  # noqa: E402

TENANT = "envt"
BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b  # fixed\n"
TESTS = ("import calc, sys\n"
         "ok = calc.add(2, 3) == 5\n"
         "print('tests', 'pass' if ok else 'fail')\n"
         "sys.exit(0 if ok else 1)\n")
FORK_BOMB = "import os\nwhile True:\n    os.fork()\n"


def policy(agent, extra=None):
    p = {
        "limits": {"timeout_ms": 5000, "memory_mb": 256, "max_tasks": 32, "max_forks": 200,
                   "concurrency": 16},
        "exec": {"allow": ["/usr/bin/python3*", "/usr/bin/sh", "/usr/bin/dash", "/usr/bin/bash",
                           "/usr/bin/sed", "/usr/bin/cat", "/usr/bin/sleep", "/usr/bin/mv",
                           "/usr/bin/head", "/usr/bin/ls", "/usr/bin/mkdir"]},
        "actions": {"egress": "deny", "file": "deny", "fork": "kill", "exec": "deny"},
        "session": {"max_sessions": 12, "idle_timeout_s": 3, "max_lifetime_s": 600,
                    "cpu_seconds": 600},
    }
    p["files"] = {"scratch_root": agent.scratch, "scratch_mb": 64,
                  "read_only": ["/usr", "/lib", "/lib64", "/bin", "/etc/ld.so.cache",
                                "/etc/localtime", "/etc/locale.alias", "/etc/python3.11",
                                "/dev/null", "/dev/urandom"]}
    for k, v in (extra or {}).items():
        p[k].update(v)
    return p


class Serve:
    def __init__(self, agent):
        self.log = open(os.path.join(agent.dir, "serve.log"), "a")
        self.proc = subprocess.Popen([SANDGUARD, "serve", "--listen", "127.0.0.1:0",
                                      "--policy-dir", agent.policy_dir], env=agent.env,
                                     stdout=subprocess.PIPE, stderr=self.log,
                                     stdin=subprocess.DEVNULL)
        line = self.proc.stdout.readline().decode()
        if "127.0.0.1:" not in line:
            raise RuntimeError("serve did not start: %r" % line)
        self.url = "http://127.0.0.1:%d" % int(line.split("127.0.0.1:")[1].split()[0])

    def stop(self, sig=15):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(30)


def session_records(agent, sid):
    return [r for r in sgjournal.read(agent.env["SANDGUARD_STATE_DIR"])
            if r.get("mode") == "session" and r.get("batch_id") == sid]


def listener():
    """A host listener that records whether anything reached it."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    srv.settimeout(0.2)
    seen = []
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                c, _ = srv.accept()
                seen.append(c)
            except OSError:
                pass
    t = threading.Thread(target=accept, daemon=True)
    t.start()
    return srv.getsockname()[1], seen, lambda: (stop.set(), t.join(), srv.close())


def case_episode(agent, serve):
    port, seen, close = listener()
    s = Session(serve.url, tenant=TENANT, kernel="python",
                files={"calc.py": BUGGY, "test_calc.py": TESTS})
    try:
        r1 = s.run("python3 test_calc.py")
        if r1["exit_code"] != 1 or "tests fail" not in r1["stdout"]:
            return "step 1 (tests of the buggy module): %r" % r1
        s.write("calc.py", FIXED)                      # the edit
        r2 = s.code("x = 41\nprint('set')")
        if r2["status"] != "ok" or r2["stdout"].strip() != "set":
            return "step 2 (kernel sets x): %r" % r2
        r3 = s.code("import socket, errno\n"
                    "c = socket.socket()\n"
                    "try:\n"
                    "    c.connect(('127.0.0.1', %d)); print('connected')\n"
                    "except OSError as e:\n"
                    "    print('refused', errno.errorcode[e.errno])\n"
                    "x += 1\n"
                    "x" % port)
        if r3["status"] != "ok" or "refused EPERM" not in r3["stdout"] or "42" not in r3["stdout"]:
            return "step 3 (a denied connect, handled; x kept): %r" % r3
        if seen:
            return "the host's listener saw %d connections" % len(seen)
        r4 = s.run("python3 test_calc.py")
        if r4["exit_code"] != 0 or "tests pass" not in r4["stdout"]:
            return "step 4 (tests pass after the edit): %r" % r4
        r5 = s.code(FORK_BOMB)
        if not r5["session_ended"] or r5["cause"] != "tenant_policy_violation" or r5["rule"] != "fork":
            return "step 5 (a fork bomb ends the session): %r" % r5
        try:
            s.run("true")
            return "a step after the session ended was served"
        except SessionError as e:
            if e.status not in (404, 410):
                return "a step after the end: %s" % e
    finally:
        close()
        s.close()
    recs = session_records(agent, s.id)
    steps = [r for r in recs if not r["final"]]
    finals = [r for r in recs if r["final"]]
    if [r["step"] for r in steps] != [1, 2, 3, 4, 5] or len(finals) != 1:
        return "journal: steps %r, %d finals" % ([r.get("step") for r in steps], len(finals))
    f = finals[0]
    if f["cause"] != "tenant_policy_violation" or f["rule"] != "fork" or f["session_end"] != "policy":
        return "the final record: %r" % f
    if any(r.get("cpu_ms") is None for r in steps):
        return "a step record without cpu_ms: %r" % steps
    out = agent.run(["explain", "--session", s.id])
    if out.returncode != 0 or out.stdout.count("step ") < 5 or "policy" not in out.stdout:
        return "explain --session: rc %d %s %s" % (out.returncode, out.stdout[-600:], out.stderr[-300:])
    ev = [e for e in agent.events_matching(tenant=TENANT)
          if str(e.get("batch_id", "")).startswith(s.id + "/5")]
    if not ev:
        return "no event names the session's step 5"
    return None


def case_cli(agent, serve):
    """The same kind of episode through `sandguard session`."""
    d = agent.dir
    for name, text in (("calc.py", BUGGY), ("fixed.py", FIXED), ("test_calc.py", TESTS)):
        with open(os.path.join(d, name), "w") as f:
            f.write(text)

    def cli(*args):
        return agent.run(["session", args[0], "--url", serve.url, "--tenant", TENANT] + list(args[1:]))
    made = cli("create", "--kernel", "python", "--file", "calc.py=" + os.path.join(d, "calc.py"),
               "--file", "test_calc.py=" + os.path.join(d, "test_calc.py"))
    if made.returncode != 0 or not made.stdout.startswith("ses-"):
        return "create: rc %d %r %r" % (made.returncode, made.stdout, made.stderr)
    sid = made.stdout.strip()
    r = cli("exec", sid, "python3 test_calc.py")
    if r.returncode != 1 or "tests fail" not in r.stdout:
        return "exec (failing tests): rc %d %r" % (r.returncode, r.stdout)
    r = cli("put", sid, "calc.py=" + os.path.join(d, "fixed.py"))
    if r.returncode != 0:
        return "put: %r" % r.stderr
    r = cli("exec", sid, "--code", "y = 6 * 7")
    r2 = cli("exec", sid, "--code", "print(y)")
    if r.returncode != 0 or r2.stdout.strip() != "42":
        return "kernel over the CLI: %r %r" % (r.stderr, r2.stdout)
    r = cli("exec", sid, "python3 test_calc.py > result.txt")
    got = cli("get", sid, "result.txt")
    if r.returncode != 0 or got.stdout.strip() != "tests pass":
        return "tests after put, get: rc %d %r %r" % (r.returncode, got.stdout, got.stderr)
    forked = cli("fork", sid, "2")
    kids = forked.stdout.split()
    if forked.returncode != 0 or len(kids) != 2:
        return "fork: %r %r" % (forked.stdout, forked.stderr)
    ls = cli("ls")
    if sid not in ls.stdout or not all(k in ls.stdout for k in kids):
        return "ls: %r" % ls.stdout
    r = cli("exec", sid, "sleep 5", "--timeout-ms", "300")
    if r.returncode != 124:
        return "a timed-out step's exit code over the CLI: %d" % r.returncode
    for x in [sid] + kids:
        if cli("rm", x).returncode != 0:
            return "rm %s" % x
    if cli("exec", sid, "true").returncode == 0:
        return "exec after rm succeeded"
    bad = cli("exec")
    if bad.returncode != 64:
        return "exec without an id: rc %d" % bad.returncode
    recs = session_records(agent, sid)
    if [r.get("step") for r in recs if not r["final"]] != [1, 2, 3, 4, 5] or \
            [r.get("session_end") for r in recs if r["final"]] != ["closed"]:
        return "journal after the CLI episode: %r" % [(r.get("step"), r["final"]) for r in recs]
    return None


def case_counted(agent, serve):
    """top and /metrics: live sessions and steps by cause, with bounded
    labels (no session or run id on a metric)."""
    s = Session(serve.url, tenant=TENANT, run_id="run-metrics")
    try:
        s.run("true")
        s.run("sleep 3", timeout_ms=200)
        deadline = time.time() + 10
        while time.time() < deadline:
            top = agent.run(["top", "--once", "--json"])
            row = [r for r in json.loads(top.stdout or "{}").get("tenants", []) if r["tenant"] == TENANT] \
                if top.returncode == 0 else []
            if row and row[0]["sessions"]["active"] >= 1 and \
                    row[0]["sessions"]["steps"].get("tenant_timeout", 0) >= 1:
                break
            time.sleep(0.5)
        else:
            return "top --json: %r %r" % (top.stdout[-800:], top.stderr[-300:])
        text = urllib.request.urlopen("http://%s/metrics" % agent.metrics_addr, timeout=5).read().decode()
        lines = [ln for ln in text.splitlines() if ln.startswith("sandguard_") and "sess" in ln]
        want = ['sandguard_active_sessions{tenant="%s"} 1' % TENANT,
                'sandguard_session_steps_total{tenant="%s",cause="tenant_timeout"}' % TENANT]
        if not all(any(ln.startswith(w) for ln in lines) for w in want):
            return "/metrics: %r" % lines
        if "ses-" in text or "run-metrics" in text:
            return "a session or run id is on a metric"
    finally:
        s.close()
    return None


def case_fork(agent, serve):
    s = Session(serve.url, tenant=TENANT, kernel="python")
    try:
        s.run("head -c 10485760 /dev/urandom > big.bin && echo parent > who.txt")
        s.code("state = {'n': 7}")
        forks = s.fork(8)
        if len(forks) != 8 or len({f.id for f in forks}) != 8:
            return "fork gave %r" % [f.id for f in forks]
        for i, f in enumerate(forks):
            f.run("echo child%d > who.txt" % i)
        for i, f in enumerate(forks):
            got = f.read("who.txt").decode().strip()
            if got != "child%d" % i:
                return "fork %d sees %r: a sibling's write, or not its own" % (i, got)
            r = f.code("state['n']")
            if r["stdout"].strip() != "7":
                return "fork %d kernel state: %r" % (i, r)
            r = f.run("ls -l big.bin")
            if "10485760" not in r["stdout"]:
                return "fork %d has no copy of the 10 MiB file: %r" % (i, r)
        if s.read("who.txt").decode().strip() != "parent":
            return "the parent's scratch changed"
        for f in forks:
            f.close()
    finally:
        s.close()
    recs = sgjournal.read(agent.env["SANDGUARD_STATE_DIR"])
    for f in forks:
        mine = [r for r in recs if r.get("batch_id") == f.id]
        if len([r for r in mine if r["final"]]) != 1 or not [r for r in mine if not r["final"]]:
            return "fork %s is not booked on its own: %r" % (f.id, mine)
    return None


def case_owner(agent, serve):
    s = Session(serve.url, tenant=TENANT, run_id="run-a")
    try:
        other_run = Session.attach(serve.url, s.id, tenant=TENANT, run_id="run-b")
        try:
            other_run.run("true")
            return "another run of the same tenant reached the session"
        except SessionError as e:
            if e.status != 404:
                return "another run: %s" % e
        listed = Session.list(serve.url, tenant=TENANT, run_id="run-b")
        if any(x["session"] == s.id for x in listed):
            return "another run lists the session"
        if not any(x["session"] == s.id for x in Session.list(serve.url, tenant=TENANT, run_id="run-a")):
            return "its own run does not list it"
        other_tenant = Session.attach(serve.url, s.id, tenant="default", run_id="run-a")
        try:
            other_tenant.read("x")
            return "another tenant reached the session"
        except SessionError as e:
            if e.status != 404:
                return "another tenant: %s" % e
    finally:
        s.close()
    return None


def case_step_timeout(agent, serve):
    s = Session(serve.url, tenant=TENANT, kernel="bash")
    try:
        r = s.run("echo quiet > /dev/null && echo loud")
        if r["status"] != "ok" or r["stdout"] != "loud\n":
            return "writing /dev/null (harmless, allowed as Landlock allows it): %r" % r
        r = s.exec_argv(["/usr/bin/whoami"])   # not in exec.allow, whose action is deny
        if r["session_ended"] or r["cause"] != "tenant_policy_violation" or r["rule"] != "exec":
            return "a refused command (exec deny) must be the step's error only: %r" % r
        s.code("cd sub 2>/dev/null || { mkdir sub; cd sub; }; export GREETING=hi; N=3")
        r = s.code("sleep 30", timeout_ms=500)
        if r["status"] != "timeout" or r["session_ended"]:
            return "a timed-out step: %r" % r
        r = s.code("echo $PWD $GREETING $N")
        if not r["stdout"].strip().endswith("/sub hi 3"):
            return "the bash kernel after a timeout: %r" % r
    finally:
        s.close()
    recs = session_records(agent, s.id)
    if [r["cause"] for r in recs if not r["final"]] != ["ok", "tenant_policy_violation", "ok",
                                                        "tenant_timeout", "ok"]:
        return "records: %r" % [(r["cause"], r["final"]) for r in recs]
    return None


def case_limits(agent, serve):
    made = []
    try:
        for _ in range(12):
            made.append(Session(serve.url, tenant=TENANT))
        try:
            Session(serve.url, tenant=TENANT)
            return "a 13th session over max_sessions 12 was made"
        except SessionError as e:
            if e.status != 429 or not e.retry_after:
                return "over max_sessions: %s (Retry-After %r)" % (e, e.retry_after)
    finally:
        for s in made:
            s.close()
    s = Session(serve.url, tenant=TENANT)
    time.sleep(5)  # idle_timeout_s 3, the reaper looks every second
    recs = session_records(agent, s.id)
    if len(recs) != 1 or recs[0].get("session_end") != "idle":
        return "an idle session's booking: %r" % recs
    try:
        Session(serve.url, tenant="default")
        return "a tenant whose policy has no session section made a session"
    except SessionError as e:
        if e.status != 403:
            return "no session section: %s" % e
    return None


def case_serve_killed(agent, serve):
    s = Session(serve.url, tenant=TENANT)
    s.run("echo hi > f")
    sandbox = s.info()["sandbox"]
    serve.stop(9)
    serve2 = Serve(agent)
    try:
        deadline = time.time() + 20
        while time.time() < deadline:
            recs = session_records(agent, s.id)
            if any(r["final"] for r in recs):
                break
            time.sleep(0.2)
        finals = [r for r in recs if r["final"]]
        if len(finals) != 1 or finals[0]["class"] != "platform" or finals[0].get("session_end") != "platform":
            return "after a killed serve: %r" % recs
        # Its cgroup and scratch go with its sandbox's record, which the
        # reaper may take after the run record that owed the final (the
        # directory's order): within the same deadline, not before it.
        cg = os.path.join(agent.env["SANDGUARD_CGROUP_ROOT"], TENANT, sandbox)
        scratch = os.path.join(agent.scratch, TENANT, sandbox)
        while (os.path.exists(cg) or os.path.exists(scratch)) and time.time() < deadline:
            time.sleep(0.2)
        if os.path.exists(cg):
            return "its cgroup is left: %s" % cg
        if os.path.exists(scratch):
            return "its scratch is left"
    finally:
        serve2.stop()
    return None


def main():
    if not can_run("sessions"):
        return 0
    agent = sgagent.Agent({}, name="sessions")
    agent.write_policy(TENANT, policy(agent))
    serve = None
    try:
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        agent.metrics_addr = "127.0.0.1:%d" % probe.getsockname()[1]
        probe.close()
        if not agent.start("--metrics", agent.metrics_addr):
            report("FAIL", "agent start", agent.log_tail())
            return 1
        serve = Serve(agent)
        for name, fn in [("episode over HTTP, agent enforcing", case_episode),
                         ("the episode through the CLI (sandguard session)", case_cli),
                         ("top counts live sessions and steps by cause", case_counted),
                         ("fork: 8 forks of a 10 MiB session with a Python kernel", case_fork),
                         ("a session is its tenant's and its run's", case_owner),
                         ("a refused command and a timed-out step: the bash kernel lives on", case_step_timeout),
                         ("max_sessions (429), idle timeout, no session section (403)", case_limits),
                         ("a killed serve: the session reaped and booked", case_serve_killed)]:
            try:
                why = fn(agent, serve)
            except Exception as e:  # noqa: BLE001
                why = "exception: %r" % e
            report("FAIL" if why else "PASS", name, why) if why else report("PASS", name)
            if serve.proc.poll() is not None and fn is not case_serve_killed:
                serve = Serve(agent)
    finally:
        if serve:
            serve.stop()
        agent.stop()
        agent.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())

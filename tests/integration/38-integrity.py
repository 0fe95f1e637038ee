#!/usr/bin/python3
"""Reward integrity (issue 31): a wrong program cannot dodge its 0 by
starving itself, and a correct one is not failed by a busy node.

The attack (tests/programs/ig_self_starve.py) never answers: it pins three
of its own processes to one CPU and spins them together for 45 ms of every
100 ms, so that its own CPU time is under half its share and its own PSI
shows it waiting ~45% of the time. Evidence made that way must never turn
its timeout into a platform error (a dropped sample, retries, a 5xx).

It runs as a verifier test with a 2 s deadline through
  (a) `sandguard exec --tests` cold (in the CLI's own process),
  (b) warm: through a running `sandguard executor`, for a tenant whose
      policy has warm interpreters for verifier tests (warm.verify),
  (c) `/v1/verify` and (d) `/run_code` on `sandguard serve`,
each without and with a private agent (fallback mode), each on an idle
node and on a busy one (HOGS plain CPU hogs outside sandguard, children of
this test). Every case must end: reward 0 (/run_code: `Failed`,
`TimeLimitExceeded`), the test's verdict a timeout booked tenant_timeout,
at most two runs of the test (one on the idle node; a second only as the
"confirmation" run, marked so in the result and in the journal), no
platform_error record in the outcome journal for the batch, HTTP 200,
and `sandguard exec` exiting 0 as for any verdict (never 2, a platform
error). On the busy node an honest CPU-heavy program
(ig_honest_cpu.py, a deadline of a few times its CPU need) gets reward 1,
and a plain infinite loop (ig_loop.py) reward 0 as the tenant's, neither
ever a platform error.

Prints one PASS/FAIL/SKIP line per case. About two minutes."""
import json
import os
import resource
import signal
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from sgtest import exit_code, report, uid_base  # noqa: E402
import sgexecutor  # noqa: E402
from sgexecutor import BIN, PYTHON, Env, Executor, exec_cli  # noqa: E402

UID_BASE = uid_base(69000)  # 31-exec-overload uses 68300; 38's bench 69500
DEADLINE_MS = 2000          # the attack's per-test deadline
HOGS = (os.cpu_count() or 2) + 1
COLD, WARM = "ig-cold", "ig-warm"
P = 1000000007

# The honest program's size and deadline: set by calibrate().
HONEST = {"n": 8000000, "cpu_ms": 600, "deadline_ms": 4000}


# ---- the node's load ---------------------------------------------------------

class Hogs:
    """Plain CPU hogs outside sandguard: this test's own children, in
    its own cgroup, never in a sandbox."""

    def __init__(self, n):
        self.procs = [subprocess.Popen([PYTHON, "-c", "while 1: pass"], stdin=subprocess.DEVNULL)
                      for _ in range(n)]
        time.sleep(0.3)

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
        for p in self.procs:
            p.wait()
        self.procs = []


def idle_ms():
    """The node's idle + iowait time, all CPUs, in ms (/proc/stat)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return (int(fields[4]) + int(fields[5])) * 1000.0 / os.sysconf("SC_CLK_TCK")


class Window:
    """How many CPUs stood idle on average over a case (our own evidence
    of an idle node: the code's own is not what a test should trust)."""

    def __init__(self):
        self.t0, self.i0 = time.monotonic(), idle_ms()

    def idle_cpus(self):
        dt = (time.monotonic() - self.t0) * 1000.0
        return (idle_ms() - self.i0) / dt if dt > 0 else 0.0


# ---- the world: env, optional agent, executor, server ------------------------

class Rig:
    """One suite Env (programs, policies, scratch, state, run, cgroup
    root); with `agent`, a private agent (fallback mode) that every
    sandguard command of the rig reports to; a `sandguard executor`; a
    `sandguard serve`. Call start(), then stop()."""

    def __init__(self, agent):
        self.env = Env(UID_BASE, prefix="sgintegrity-", timeout_ms=HONEST["deadline_ms"])
        self.agent = None
        self.executor = None
        self.server = None
        self.extra = {}
        if agent:
            from sgagent import Agent
            self.agent = Agent({}, name="integrity")
            a = self.agent
            a.policy_dir = self.env.policies
            a.env["SANDGUARD_STATE_DIR"] = self.env.state
            a.env["SANDGUARD_RUN_DIR"] = self.env.run
            self.env.cgroot = a.env["SANDGUARD_CGROUP_ROOT"]
            self.extra = {k: a.env[k] for k in ("SANDGUARD_CGROUP_ROOT", "SANDGUARD_PIN_ROOT",
                                                "SANDGUARD_AGENT_SOCK", "SANDGUARD_LOG_DIR")}

    def environ(self, **extra):
        return self.env.env(**dict(self.extra, **extra))

    def policies(self):
        for tenant, warm in ((COLD, False), (WARM, True)):
            self.env.policy(tenant, failure="retry", retries=2, cpu=1.0, concurrency=4,
                            timeout_ms=HONEST["deadline_ms"])
            if warm:
                path = os.path.join(self.env.policies, tenant + ".json")
                with open(path) as f:
                    p = json.load(f)
                p["warm"] = {"interpreter": "python3", "verify": True}
                with open(path, "w") as f:
                    json.dump(p, f)

    def start(self):
        self.policies()
        if self.agent and not self.agent.start("--mode", "fallback"):
            raise RuntimeError("the agent did not start: %s" % self.agent.log_tail())
        self.executor = Executor(self.env)
        self.executor.extra = dict(self.extra)
        self.executor.start()
        from sgserve import Server
        self.server = Server(self.env, "--languages", "python", env_override=self.environ())
        return self

    def stop(self):
        for what in (self.server, self.executor):
            try:
                if what:
                    what.stop()
            except Exception as e:  # noqa: BLE001 - cleanup goes on
                print("# stop: %s" % e, file=sys.stderr)
        if self.agent:
            self.agent.cleanup()
        self.env.cleanup()

    def records(self, batch_id):
        return [o for o in self.env.outcomes() if o.get("batch_id") == batch_id]


# ---- the four ways in ------------------------------------------------------------

def tests_file(rig, name, tests):
    path = os.path.join(rig.env.dir, "tests-%s.json" % name)
    with open(path, "w") as f:
        json.dump([{"input": i, "output": o} for i, o in tests], f)
    return path


def via_exec(rig, way, program, tests, timeout_ms, bid):
    """(a) cold in the CLI's own process, (b) warm: through the rig's
    executor for the warm.verify tenant. (kind, HTTP-or-exit, result)."""
    tenant = WARM if way == "warm" else COLD
    rc, res, err = exec_cli(rig.env, ["--tenant", tenant, "--policy-dir", rig.env.policies,
                                      "--tests", tests_file(rig, bid, tests),
                                      "--timeout-ms", str(timeout_ms), "--batch-id", bid, "--",
                                      PYTHON, os.path.join(rig.env.progs, program)],
                            extra_env=dict(rig.extra, **({"SANDGUARD_WARM": "0"} if way == "cold" else {})))
    if res is None:
        res = {"_stderr": err[-400:]}
    elif "agent did not take sandbox" in err:
        res["_unenforced"] = True
    return "verify", rc, res


def via_verify(rig, program, tests, timeout_ms, bid):
    with open(os.path.join(rig.env.progs, program)) as f:
        code = f.read()
    status, _, res = rig.server.post("/v1/verify", {
        "tenant": COLD, "batch_id": bid, "code": code, "language": "python",
        "timeout_ms": timeout_ms, "tests": [{"input": i, "output": o} for i, o in tests]},
        timeout=120)
    return "verify", status, res


def via_run_code(rig, program, stdin, timeout_ms, bid):
    with open(os.path.join(rig.env.progs, program)) as f:
        code = f.read()
    t = timeout_ms / 1000.0
    # verl's body (sgserve.verl_request), a deadline in seconds.
    body = {"compile_timeout": t, "run_timeout": t, "code": code, "stdin": stdin,
            "memory_limit_MB": 1024, "language": "python", "files": {}, "fetch_files": []}
    status, _, res = rig.server.post("/tenants/%s/run_code" % COLD, body,
                                     headers={"X-Sandguard-Request-Id": bid}, timeout=t + 10 + 10)
    return "run", status, res


def run_way(rig, way, program, tests, timeout_ms, bid):
    if way in ("cold", "warm"):
        return via_exec(rig, way, program, tests, timeout_ms, bid)
    if way == "v1/verify":
        return via_verify(rig, program, tests, timeout_ms, bid)
    return via_run_code(rig, program, tests[0][0], timeout_ms, bid)


# ---- what every case checks -------------------------------------------------------

def runs_of(kind, res, records):
    """The runs of test 0 (or of the /run_code request): from the result's
    attempt list where it has one, and from the journal's run records."""
    if kind == "verify":
        listed = [s for s in res.get("sandboxes") or [] if s.get("test", 0) == 0]
        journaled = [o for o in records if o.get("mode") == "verify" and not o.get("final")
                     and o.get("test", 0) in (0, None) and o.get("sandbox")]
    else:
        listed = [{"attempt": i + 1} for i in range(int((res.get("sandguard") or {}).get("attempts") or 0))]
        journaled = [o for o in records if o.get("mode") == "run" and o.get("sandbox")]
    return listed, sorted(journaled, key=lambda o: o.get("attempt", 0))


def confirmation_problems(listed, journaled):
    """A second run must be the confirmation run, and say so."""
    bad = []
    if len(listed) == 2 and "confirmation" in json.dumps(listed) and not listed[1].get("confirmation"):
        bad.append("the second run is not marked confirmation: %s" % listed)
    if len(listed) == 2 and listed[0].get("confirmation"):
        bad.append("the first run is marked confirmation: %s" % listed)
    if len(journaled) == 2:
        first = journaled[0]
        decision = first.get("decision") or ""
        if not decision.startswith("retried:") or "confirm" not in decision:
            bad.append("the first run's journal decision %r is not a confirmation's" % decision)
        if first.get("confirm") != "next" or journaled[1].get("confirm") != "run":
            bad.append("journal confirm %r, %r, want 'next', 'run'" %
                       (first.get("confirm"), journaled[1].get("confirm")))
    return bad


def platform_records(records):
    return [o for o in records if o.get("cause") == "platform_error" or o.get("class") == "platform"]


def judge_attack(kind, way, code, res, records, idle):
    """None (PASS) or why not; `note` set on the way."""
    bad = []
    if kind == "verify":
        # A test's timeout is the verdict (reward 0), not a fault of the
        # request: `sandguard exec --tests` exits 0 for it, as for any
        # verdict (src/exec/exec.h, 30-exec's verifier case); 2 would be
        # a platform error.
        want = 200 if way == "v1/verify" else 0
        if code != want:
            bad.append("%s %s, want %d" % ("HTTP" if way == "v1/verify" else "exit", code, want))
        if res.get("reward") != 0:
            bad.append("reward %r, want 0" % res.get("reward"))
        t = (res.get("tests") or [{}])[0]
        if t.get("status") != "timeout":
            bad.append("test verdict %r (%s), want timeout" % (t.get("status"), (t.get("detail") or "")[:160]))
    else:
        run = res.get("run_result") or {}
        if code != 200:
            bad.append("HTTP %d, want 200" % code)
        if res.get("status") != "Failed" or run.get("status") != "TimeLimitExceeded":
            bad.append("status %r, run_result.status %r, want Failed, TimeLimitExceeded (%s)" %
                       (res.get("status"), run.get("status"), (res.get("message") or res.get("error") or "")[:160]))
        if (res.get("sandguard") or {}).get("cause") not in (None, "tenant_timeout"):
            bad.append("cause %r, want tenant_timeout" % res["sandguard"]["cause"])
    listed, journaled = runs_of(kind, res, records)
    causes = sorted({o.get("cause") for o in journaled})
    if journaled and causes != ["tenant_timeout"]:
        bad.append("run records booked %s, want tenant_timeout" % causes)
    if not journaled:
        bad.append("no run record in the journal")
    n = max(len(listed), len(journaled))
    if n > 2:
        bad.append("%d runs of the test, want at most 2" % n)
    exact = idle is not None
    if exact and n != 1:
        bad.append("%d runs on an idle node (%.2f CPUs idle), want 1" % (n, idle))
    bad += confirmation_problems(listed, journaled)
    plat = platform_records(records)
    if plat:
        bad.append("%d platform_error records for the batch: %s" %
                   (len(plat), (plat[0].get("detail") or "")[:160]))
    if res.get("_unenforced"):
        bad.append("a sandbox was not taken by the agent")
    return bad, n, confirmed(listed, journaled)


def confirmed(listed, journaled):
    return any(x.get("confirmation") for x in listed) or any(o.get("confirm") == "run" for o in journaled)


def judge_honest(kind, way, code, res, records, expected):
    bad = []
    if kind == "verify":
        want = 200 if way == "v1/verify" else 0
        if code != want or res.get("reward") != 1:
            t = (res.get("tests") or [{}])[0]
            bad.append("%s %s, reward %r, test %r (%s), want reward 1" %
                       ("HTTP" if way == "v1/verify" else "exit", code, res.get("reward"),
                        t.get("status"), (t.get("detail") or res.get("detail") or res.get("_stderr") or "")[:200]))
    else:
        run = res.get("run_result") or {}
        if code != 200 or res.get("status") != "Success" or run.get("stdout") != expected:
            bad.append("HTTP %d, status %r, run_result %r %r (%s), want Success with %r" %
                       (code, res.get("status"), run.get("status"), run.get("stdout"),
                        (res.get("message") or "")[:160], expected))
    listed, journaled = runs_of(kind, res, records)
    n = max(len(listed), len(journaled))
    if n > 2:
        bad.append("%d runs, want at most 2" % n)
    bad += confirmation_problems(listed, journaled)
    plat = platform_records(records)
    if plat:
        bad.append("%d platform_error records: %s" % (len(plat), (plat[0].get("detail") or "")[:160]))
    return bad, n, confirmed(listed, journaled)


# ---- cases ---------------------------------------------------------------------

WAYS = ("cold", "warm", "v1/verify", "run_code")


def case_name(what, way, agent, busy):
    return "integrity: %s via %s, %s, %s node" % (what, {"cold": "exec --tests cold",
                                                         "warm": "exec --tests warm (executor, warm.verify)",
                                                         "v1/verify": "/v1/verify",
                                                         "run_code": "/run_code"}[way],
                                                  "with agent" if agent else "no agent",
                                                  "busy" if busy else "idle")


def attack(rig, way, busy):
    bid = "ig-%s-%s" % (way.replace("/", ""), uuid.uuid4().hex[:8])
    w = Window()
    kind, code, res = run_way(rig, way, "ig_self_starve.py", [("7\n", "49\n")], DEADLINE_MS, bid)
    idle = w.idle_cpus()
    # Exactly one run is asserted where the node had room by our own
    # measure: more than half its CPUs idle over the case (the attack
    # itself uses ~0.45 of one).
    exact = None if busy or idle < (os.cpu_count() or 2) / 2.0 else idle
    bad, n, conf = judge_attack(kind, way, code, res, rig.records(bid), exact)
    note = "%d run%s%s, %.2f CPUs idle" % (n, "s" if n != 1 else "",
                                          ", the second a confirmation run" if conf else "", idle)
    if not busy and exact is None:
        note += "; node not idle by our measure: at most 2 runs asserted, not 1"
    return bad, note


def honest(rig, way, program="ig_honest_cpu.py"):
    bid = "ih-%s-%s" % (way.replace("/", ""), uuid.uuid4().hex[:8])
    n = HONEST["n"]
    want = "%d\n" % ((n - 1) * n * (2 * n - 1) // 6 % P)
    kind, code, res = run_way(rig, way, program, [("%d\n" % n, want)], HONEST["deadline_ms"], bid)
    bad, runs, conf = judge_honest(kind, way, code, res, rig.records(bid), want)
    return bad, "%d run%s%s" % (runs, "s" if runs != 1 else "", ", the second a confirmation run" if conf else "")


def loop(rig):
    bid = "il-%s" % uuid.uuid4().hex[:8]
    kind, code, res = run_way(rig, "cold", "ig_loop.py", [("1\n", "1\n")], DEADLINE_MS, bid)
    bad, n, conf = judge_attack(kind, "cold", code, res, rig.records(bid), None)
    return bad, "%d run%s%s" % (n, "s" if n != 1 else "", ", the second a confirmation run" if conf else "")


def calibrate():
    """The honest program's n for ~0.6 s of CPU here; its deadline is
    five times that."""
    prog = os.path.join(sgexecutor.PROGRAMS, "ig_honest_cpu.py")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    n = 2000000
    subprocess.run([PYTHON, prog], input=b"%d\n" % n, capture_output=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) or 0.01
    HONEST["n"] = max(1000000, int(n * 0.6 / cpu))
    HONEST["cpu_ms"] = 600
    HONEST["deadline_ms"] = 5 * HONEST["cpu_ms"]
    print("# honest program: n=%d (~600 ms of CPU: %.0f ms for %d), deadline %d ms; attack deadline "
          "%d ms; %d hogs on the busy node" % (HONEST["n"], cpu * 1000, n, HONEST["deadline_ms"],
                                                DEADLINE_MS, HOGS), flush=True)


def run_rig(agent):
    try:
        rig = Rig(agent).start()
    except Exception as e:  # noqa: BLE001
        for busy in (False, True):
            for way in WAYS:
                report("SKIP" if agent else "FAIL", case_name("self-starving attack", way, agent, busy),
                       "the rig did not start: %s" % str(e)[:300])
        return
    hogs = None
    try:
        for busy in (False, True):
            if busy:
                hogs = Hogs(HOGS)
            for way in WAYS:
                name = case_name("self-starving attack", way, agent, busy)
                try:
                    bad, note = attack(rig, way, busy)
                except Exception as e:  # noqa: BLE001 - a crash in a case is its failure
                    bad, note = ["%s: %s" % (type(e).__name__, e)], ""
                report("FAIL" if bad else "PASS", name + (" (%s)" % note if note and not bad else ""),
                       "; ".join(bad) + ("; " + note if note else "") if bad else "")
            if busy:
                for way in WAYS:
                    name = case_name("honest CPU-heavy program", way, agent, busy)
                    try:
                        bad, note = honest(rig, way)
                    except Exception as e:  # noqa: BLE001
                        bad, note = ["%s: %s" % (type(e).__name__, e)], ""
                    report("FAIL" if bad else "PASS", name + (" (%s)" % note if not bad else ""),
                           "; ".join(bad))
                if not agent:
                    name = case_name("plain infinite loop", "cold", agent, busy)
                    try:
                        bad, note = loop(rig)
                    except Exception as e:  # noqa: BLE001
                        bad, note = ["%s: %s" % (type(e).__name__, e)], ""
                    report("FAIL" if bad else "PASS", name + (" (%s)" % note if not bad else ""),
                           "; ".join(bad))
                hogs.stop()
                hogs = None
    finally:
        if hogs:
            hogs.stop()
        if rig.server and rig.server.proc.poll() is not None:
            report("FAIL", "integrity: serve alive (%s)" % ("with agent" if agent else "no agent"),
                   "exited %s" % rig.server.proc.returncode)
        rig.stop()


def main():
    if os.geteuid() != 0:
        report("SKIP", "integrity", "needs root (sandboxes switch uids and make cgroups)")
        return 0
    if not os.access(BIN, os.X_OK):
        report("FAIL", "integrity", "no binary at %s" % BIN)
        return 1
    t0 = time.monotonic()
    calibrate()
    only = sys.argv[1:]
    for agent in (False, True):
        if only and ("agent" if agent else "no-agent") not in only:
            continue
        run_rig(agent)
    print("# integrity: %.0f s" % (time.monotonic() - t0), flush=True)
    return exit_code()


if __name__ == "__main__":
    sys.exit(main())

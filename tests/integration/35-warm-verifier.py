#!/usr/bin/python3
"""Warm interpreters for verifier tests end to end, as root
(docs/warm-interpreters.md, "Warm interpreters for verifier tests"; the policy's warm.verify): each
test of a Python program a child of a warm parent in the request's
sandbox. Each case asserts what the issue requires of it: the verdicts,
exit codes and stderr are the cold runner's (tests/programs/wv_modes.py),
the program sees what `python3 main.py` sees (wv_probe.py: __name__,
sys.argv, stdin, the recursion limit and depth, sys.modules), nothing of a
test reaches the next (wv_state.py: a file, a daemon, a global, the
directories' times), a
program that makes an IPC object runs cold, a test whose parent is killed
mid-test runs again cold as its own run (nothing of the warm run booked), and a tenant without
the opt-in stays cold. Which way a test ran is the result's
tests[].interpreter. Requests run in the CLI's own process (one request's
sandboxes) unless a case says it goes through the suite's executor.
Prints one PASS/FAIL/SKIP line per case."""
import glob
import json
import os
import re
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgtest import uid_base  # noqa: E402
from sgexecutor import BIN, PYTHON, exec_cli, run_suite, wait_for  # noqa: E402
import subprocess  # noqa: E402

UID_BASE = uid_base(64700)  # 34-warm-interpreter uses 63500, 46-journal 64000, 47 64400
WARM, COLD = "wv-warm", "wv-cold"
MODES = ["pass", "wrong", "hang", "segv", "raise", "chained", "exit3", "exitmsg", "_exit4",
         "atexit", "unflushed", "thread", "interrupt", "recursion", "excepthook"]


def warm_policy(env, tenant, verify=True, **policy):
    """The suite's policy with "warm" on (verify: for verifier tests too)."""
    env.policy(tenant, **policy)
    path = os.path.join(env.policies, tenant + ".json")
    with open(path) as f:
        p = json.load(f)
    p["warm"] = {"interpreter": "python3", "verify": verify}
    with open(path, "w") as f:
        json.dump(p, f)


def setup(env):
    warm_policy(env, WARM)
    warm_policy(env, COLD, verify=False)  # warm batch calls only: its tests stay cold
    with open(os.path.join(env.progs, "wv_syntax.py"), "w") as f:
        f.write("x = \n")
    os.chmod(os.path.join(env.progs, "wv_syntax.py"), 0o644)


def verify(env, tenant, program, tests, name, through_executor=False, timeout_ms=1000):
    """`sandguard exec --tests`: (rc, result, stderr)."""
    path = os.path.join(env.dir, "tests-%s.json" % name)
    with open(path, "w") as f:
        json.dump([{"input": i, "output": o} for i, o in tests], f)
    return exec_cli(env, ["--tenant", tenant, "--policy-dir", env.policies, "--tests", path,
                          "--timeout-ms", str(timeout_ms), "--batch-id", name, "--", PYTHON,
                          os.path.join(env.progs, program)],
                    extra_env=None if through_executor else {"SANDGUARD_WARM": "0"})


def in_flight(d):
    """The in-flight records in d: a .tmp file is none (a record being
    written, or a released one the executor keeps for its next record)."""
    return sorted(n for n in os.listdir(d) if not n.startswith("."))


def ways(res):
    """How each test ran; a timeout's confirmation run (a loaded node) is
    cold whatever the policy, so it says nothing of the warm path."""
    return [t.get("interpreter") for t in res.get("tests", []) if not t.get("confirmed")]


def untimed(detail):
    """A detail without what the node decides: the CPU a run got, the
    node's idle time (cut off where a summary's detail is truncated), and
    whether its timeout was confirmed by a second run."""
    if not detail:
        return detail
    detail = re.sub(r" \(it got \d+ ms of CPU.*$", "", detail)
    detail = re.sub(r"; the node had \d+ ms of idle.*$", "", detail)
    return detail.replace(" again in its confirmation run with guaranteed CPU", "")


def verdict(res):
    """What must be the same cold and warm."""
    return (res.get("status"), res.get("cause"), res.get("reward"), untimed(res.get("detail")),
            res.get("stderr"), [(t["status"], untimed(t["detail"])) for t in res.get("tests", [])])


def t_verdicts_as_cold(env, ex):
    """Each mode as a request of its own (the result's stderr is its
    test's), cold and warm; then all modes in one request."""
    bad = []
    for mode in MODES + ["syntax"]:
        prog = "wv_syntax.py" if mode == "syntax" else "wv_modes.py"
        tests = [(mode + "\n", "ok\n")]
        rc_c, cold, err_c = verify(env, COLD, prog, tests, "c-" + mode)
        rc_w, warm, err_w = verify(env, WARM, prog, tests, "w-" + mode)
        if not cold or not warm:
            return "%s: no result: cold rc %d %s, warm rc %d %s" % (mode, rc_c, err_c[-300:],
                                                                     rc_w, err_w[-300:])
        if ways(cold) not in (["cold"], []) or ways(warm) not in (["warm"], []):
            return "%s: ran cold %s and warm %s, want cold and warm" % (mode, ways(cold),
                                                                         ways(warm))
        if (rc_c, verdict(cold)) != (rc_w, verdict(warm)):
            bad.append("%s: cold rc %d %s, warm rc %d %s" % (mode, rc_c, verdict(cold), rc_w,
                                                            verdict(warm)))
    if bad:
        return "; ".join(bad)
    tests = [(m + "\n", "ok\n") for m in MODES]
    _, cold, _ = verify(env, COLD, "wv_modes.py", tests, "c-all")
    _, warm, _ = verify(env, WARM, "wv_modes.py", tests, "w-all")
    differ = [(c, w) for c, w in zip(verdict(cold)[5], verdict(warm)[5]) if c != w]
    if len(cold["tests"]) != len(warm["tests"]) or differ or set(ways(warm)) != {"warm"}:
        return "all modes in one request: cold %s, warm %s (%s)" % (verdict(cold)[5],
                                                                     verdict(warm)[5], ways(warm))
    passed = [m for m, t in zip(MODES, warm["tests"]) if t["status"] == "pass"]
    if passed != ["pass", "atexit", "unflushed", "thread"]:
        return "the modes that pass are %s: the test's control is off" % passed
    return None


def t_interpreter_as_cold(env, ex):
    """__name__, sys.argv, stdin (a CRLF kept as it came), the recursion
    limit and the depth it allows, sys.modules (nothing the parent
    imported), __main__, stdio as CPython makes them."""
    tests = [("first line\r\nsecond\n", "unused\n")]
    _, cold, _ = verify(env, COLD, "wv_probe.py", tests, "c-probe")
    _, warm, _ = verify(env, WARM, "wv_probe.py", tests, "w-probe")
    if not cold or not warm or ways(warm) != ["warm"]:
        return "no result, or not warm: %s %s" % (cold, warm)
    try:
        c = json.loads(cold["stderr"])
        w = json.loads(warm["stderr"])
    except (TypeError, ValueError):
        return "the probe's stderr is not its facts: %r %r" % (cold.get("stderr"),
                                                             warm.get("stderr"))
    if c["depth"] != 999 or c["name"] != "__main__" or c["stdin"][-1] != tests[0][0]:
        return "the cold probe's control is off: %s" % c
    differ = {k: (c[k], w.get(k)) for k in c if c[k] != w.get(k)}
    return "differ from cold (cold, warm): %s" % differ if differ else None


def t_nothing_crosses_tests(env, ex):
    """One sandbox (concurrency 1): test 1 leaves a file here, in /tmp and /mnt,
    a daemon, a changed global, environment and recursion limit, and the
    times and modes of its directories; tests 2 and 3, children of the same parent,
    see none of them."""
    warm_policy(env, "wv-state", concurrency=1)
    tests = [("leave\n", "clean | file tmp mnt global limit env daemon times modes\n"), ("look\n", "clean\n"),
             ("look\n", "clean\n")]
    rc, res, err = verify(env, "wv-state", "wv_state.py", tests, "state",
                                            timeout_ms=3000)
    if not res or ways(res) != ["warm"] * 3:
        return "not three warm tests: rc %d %s %s" % (rc, res, err[-300:])
    if len({s["sandbox"] for s in res["sandboxes"]}) != 1:
        return "the tests did not share one sandbox (one parent): %s" % res["sandboxes"]
    if res["reward"] != 1:
        return "a later test saw an earlier one's leavings (test 1: the control, seen " \
               "where left): %s" % res["tests"]
    return None


def t_ipc_object_runs_cold(env, ex):
    """A program that makes a SysV segment: killed warm (SIGSYS), booked as
    what it was (tenant_crash, superseded: never a platform error, since a
    program can send itself SIGSYS), run again cold where it makes it; the
    request's later tests run cold."""
    warm_policy(env, "wv-ipc", concurrency=1)
    tests = [("\n", "made\n"), ("\n", "made\n")]
    rc, res, err = verify(env, "wv-ipc", "wv_ipc.py", tests, "ipc")
    if not res or res["reward"] != 1:
        return "want reward 1 (made cold): rc %d %s %s" % (rc, res, err[-300:])
    if ways(res) != ["cold", "cold"]:
        return "tests ran %s, want cold, cold" % ways(res)
    causes = [(s["test"], s["attempt"], s["cause"]) for s in res["sandboxes"]]
    if causes != [(0, 1, "tenant_crash"), (0, 2, "ok"), (1, 1, "ok")]:
        return "want test 0 warm (tenant_crash, superseded) then cold, test 1 cold: %s" % causes
    recs = [o for o in env.outcomes() if o.get("batch_id") == "ipc"]
    booked = [o for o in recs if o.get("cause") == "tenant_crash"]
    if len(booked) != 1 or "SIGSYS" not in (booked[0].get("detail") or "") \
            or not (booked[0].get("decision") or "").startswith("retried: killed by SIGSYS"):
        return "the warm run's booking: %s" % booked
    if any(o.get("cause") == "platform_error" for o in recs):
        return "a platform_error was booked: %s" % [o for o in recs if o.get("cause") == "platform_error"]
    return None


def t_sigsys_sends_the_tenant_cold(env, ex):
    """A test that kills itself with SIGSYS reads like one killed for what
    only a warm child may not do: that run is booked as what it was
    (tenant_crash, superseded; never platform_error, issue 31) and run
    again cold. The tenant's next request through the same executor runs
    its tests cold from the start: a SIGSYS cannot make every request cost
    two runs per test."""
    warm_policy(env, "wv-sigsys", concurrency=1)
    got = []
    for k in range(2):
        rc, res, err = verify(env, "wv-sigsys", "wv_sigsys.py", [("\n", "never\n")],
                              "sigsys-%d" % k, through_executor=True)
        if not res:
            return "request %d: rc %d %s" % (k, rc, err[-300:])
        got.append([(s["attempt"], s["cause"]) for s in res["sandboxes"]])
    if got[0] != [(1, "tenant_crash"), (2, "tenant_crash")]:
        return "first request: want the warm run tenant_crash (superseded), then cold: %s" % got[0]
    if got[1] != [(1, "tenant_crash")]:
        return "the second request ran warm again: %s" % got[1]
    if "SIGSYS" not in (res.get("warm_fallback") or ""):
        return "the second request does not say why it ran cold: %r" % res.get("warm_fallback")
    return None


def t_parent_killed_runs_cold(env, ex):
    """Test 2's parent killed mid-test (what the tenant's own code in it
    could do as well): nothing its warm run reports is evidence of a
    platform fault, so the test runs again cold, as its own run, and
    passes; nothing of the warm run is booked (docs/warm-interpreters.md)."""
    warm_policy(env, "wv-kill", failure="retry", retries=1, concurrency=1)
    out = {}
    runner = threading.Thread(target=lambda: out.update(
        r=verify(env, "wv-kill", "wv_sleep.py", [("0", "ok\n"), ("1.5", "ok\n")], "killed",
                 timeout_ms=3000)))
    runner.start()
    killed = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not killed and runner.is_alive():
        # Test 2 started (its marker says 1.5): its parent, alone in run-1.
        for started in glob.glob(os.path.join(env.scratch, "wv-kill", "*", "started")):
            try:
                with open(started) as f:
                    if f.read() != "1.5":
                        continue
            except OSError:
                continue
            sandbox = started.split(os.sep)[-2]
            with open(os.path.join(env.cgroot, "wv-kill", sandbox, "run-1",
                                   "cgroup.procs")) as f:
                for pid in f.read().split():
                    os.kill(int(pid), signal.SIGKILL)
                    killed = sandbox
        time.sleep(0.02)
    runner.join(120)
    if not killed:
        return "test 2 never started in a warm interpreter"
    rc, res, err = out["r"]
    if not res or res["status"] != "ok" or res["reward"] != 1:
        return "the retry should have passed: rc %d %s %s" % (rc, res, err[-300:])
    causes = [(s["test"], s["attempt"], s["cause"], s["sandbox"] == killed)
              for s in res["sandboxes"]]
    if causes != [(0, 1, "ok", True), (1, 1, "ok", False)]:
        return "want test 1 run once, cold, in another sandbox than the killed parent's: %s" % \
            causes
    # Each test's run, then the request's final (no test).
    booked = [(o.get("test"), o.get("cause"), o.get("sandbox") == killed)
              for o in env.outcomes() if o.get("batch_id") == "killed"]
    tests = sorted(b for b in booked if b[0] is not None)
    if tests != [(0, "ok", True), (1, "ok", False)] or \
            any(c != "ok" for _, c, _ in booked) or len(booked) != 3:
        return "bookings %s, want each test's own run ok, the request's, and nothing of " \
               "the warm run" % booked
    return None


def t_without_opt_in_stays_cold(env, ex):
    """A tenant whose policy has warm interpreters for batch calls but not
    warm.verify: its tests stay cold, through the executor too."""
    tests = [("pass\n", "ok\n")] * 3
    for through in (False, True):
        rc, res, err = verify(env, COLD, "wv_modes.py", tests, "cold-%s" % through,
                              through_executor=through)
        if not res or res["reward"] != 1 or ways(res) != ["cold"] * 3:
            return "through the executor %s: rc %d %s %s" % (through, rc, res, err[-300:])
    return None


def t_through_executor(env, ex):
    """Through a running executor (its pool's sandboxes): warm, and the
    parent serves the next request too (a sandbox kept warm)."""
    tests = [("pass\n", "ok\n")] * 3
    seen = []
    for k in range(4):
        rc, res, err = verify(env, WARM, "wv_modes.py", tests, "ex-%d" % k,
                              through_executor=True)
        if not res or res["reward"] != 1 or res.get("path") != "warm":
            return "rc %d %s %s" % (rc, res, err[-300:])
        seen.append(ways(res))
    if ["warm"] * 3 not in seen:
        return "no request's tests ran warm: %s" % seen
    return None


def t_killed_mid_test_reaped_once(env, ex):
    """kill -9 of the executor while a request's third test hangs and its
    four others are booked. Each worker keeps one in-flight record for all
    its tests (rewritten in place for each, owing nothing between two): the
    hanging worker's was rewritten from its first test's. The next start
    books the hanging test and the request's final once each, "executor
    died", books no test twice, and leaves no record."""
    tests = [("pass\n", "ok\n")] * 2 + [("hang\n", "ok\n")] + [("pass\n", "ok\n")] * 2
    warm_policy(env, "wv-long", timeout_ms=60000)
    path = os.path.join(env.dir, "tests-killed.json")
    with open(path, "w") as f:
        json.dump([{"input": i, "output": o} for i, o in tests], f)
    client = subprocess.Popen([BIN, "exec", "--tenant", "wv-long", "--policy-dir", env.policies,
                               "--tests", path, "--timeout-ms", "60000", "--batch-id", "killed-mid-test",
                               "--", PYTHON, os.path.join(env.progs, "wv_modes.py")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env.env())
    records = os.path.join(env.run, "inflight")

    def mine():
        # (its own batch id: parent_killed_runs_cold's "killed" is in the same journal)
        return [o for o in env.outcomes() if o.get("batch_id") == "killed-mid-test" and o.get("tenant") == "wv-long"]

    def passed():  # a loaded node may retry a test after a platform error: counted apart
        return [o for o in mine() if o.get("cause") == "ok"]
    try:
        # Four tests booked (one worker hangs in the third, the other ran
        # the rest), and the request's record and the hanging worker's held.
        if not wait_for(lambda: len(passed()) >= 4 and len(in_flight(records)) >= 2, 60):
            client.kill()
            return "the first tests never booked: %s %s" % (mine(), client.communicate())
        held = in_flight(records)
        ex.stop(signal.SIGKILL)
        out, _ = client.communicate(timeout=60)
    finally:
        if client.poll() is None:
            client.kill()
    ex.start()
    bad = []
    if not wait_for(lambda: not in_flight(records), 30):
        bad.append("records left: %s (held before the kill: %s)" % (in_flight(records), held))
    got = mine()
    ids = [o.get("id") for o in got]
    died = [o for o in got if "executor died" in json.dumps(o)]
    if len(set(ids)) != len(ids):
        bad.append("an id booked twice: %s" % ids)
    if len(passed()) != 4:
        bad.append("the four passing tests are not booked once each: %s" %
                   [(o.get("id"), o.get("cause"), o.get("detail")) for o in got])
    if len(died) != 2 or sum(1 for o in died if o.get("final")) != 1:
        bad.append("want the running test and the final booked once each by the reaper: %s"
                   % died)
    return "; ".join(bad) or None


CASES = [("verdicts_as_cold", t_verdicts_as_cold),
         ("interpreter_as_cold", t_interpreter_as_cold),
         ("nothing_crosses_tests", t_nothing_crosses_tests),
         ("ipc_object_runs_cold", t_ipc_object_runs_cold),
         ("sigsys_sends_the_tenant_cold", t_sigsys_sends_the_tenant_cold),
         ("parent_killed_runs_cold", t_parent_killed_runs_cold),
         ("without_opt_in_stays_cold", t_without_opt_in_stays_cold),
         ("through_executor", t_through_executor),
         ("killed_mid_test_reaped_once", t_killed_mid_test_reaped_once)]

if __name__ == "__main__":
    sys.exit(run_suite(CASES, UID_BASE, "sgwv-", setup=setup))

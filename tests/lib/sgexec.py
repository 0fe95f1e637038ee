"""The harness of the `sandguard exec` suites (30-exec.py: causes,
retries, pause, the CLI; 31-exec-overload.py: a killed executor and an
overloaded node): run a batch, check its result, its cause and that the
scratch is empty, and the common main() with every policy the suites use.
Each suite sets UID_BASE, its own slot range, before its first case."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sgtest import exit_code, report, slot_processes  # noqa: E402
import sgexecutor  # noqa: E402
from sgexecutor import BIN, PYTHON, Env  # noqa: E402

UID_BASE = None  # set by each suite before its first case: its own range (uid_base())
SLOTS = 256
TIMEOUT_MS = 2000
SLACK_MS = 1000             # the bound: deadline + 1 s
SEED = int(os.environ.get("SANDGUARD_TEST_SEED", "20250101"))


def exec_cli(env, args, stdin=None, extra_env=None):
    """Run `sandguard exec ARGS`; returns (rc, result or None, stderr, elapsed_ms)."""
    t0 = time.monotonic()
    rc, result, err = sgexecutor.exec_cli(env, args, stdin, extra_env)
    return rc, result, err, (time.monotonic() - t0) * 1000


def run_batch(env, tenant, program, b, args=(), extra_env=None, prog_args=()):
    return exec_cli(env, ["--tenant", tenant, "--policy-dir", env.policies, "--batch", "-"] + list(args)
                    + ["--", PYTHON, os.path.join(env.progs, program)] + list(prog_args),
                    stdin=json.dumps(b).encode(), extra_env=extra_env)


def slot_uid_procs(env):
    """Live processes of this run: a slot uid, running one of our programs."""
    return slot_processes(UID_BASE, SLOTS, env.dir)


def scratch_left(env, tenant):
    d = os.path.join(env.scratch, tenant)
    return os.listdir(d) if os.path.isdir(d) else []


def expect(env, tenant, rc, res, want_cause, want_rc, detail=None, detail_has=None):
    """None when the result is what we want, else why not."""
    if res is None:
        return "no JSON result (exit %d)" % rc
    for key in ("tenant", "batch_id", "status", "cause", "rule", "scores", "detail", "attempts", "wall_ms"):
        if key not in res:
            return "result has no %r: %s" % (key, res)
    if res["cause"] != want_cause:
        return "cause %s (%s), want %s" % (res["cause"], res["detail"], want_cause)
    if rc != want_rc:
        return "exit %d, want %d" % (rc, want_rc)
    if res["status"] != ("ok" if want_cause == "ok" else "failed"):
        return "status %s" % res["status"]
    if detail is not None and res["detail"] != detail:
        return "detail %r, want %r" % (res["detail"], detail)
    if detail_has is not None and detail_has not in (res["detail"] or ""):
        return "detail %r lacks %r" % (res["detail"], detail_has)
    left = scratch_left(env, tenant)
    if left:
        return "scratch left behind: %s" % left
    return None



def main(cases):
    """Runs a suite's cases, (name, fn(env)), in order, or only those
    named on the command line; returns its exit code. The same for both
    exec suites, with every policy either uses."""
    if os.geteuid() != 0:
        for name, _ in cases:
            report("SKIP", name, "needs root")
        return 0
    if not os.access(BIN, os.X_OK):
        for name, _ in cases:
            report("FAIL", name, "no binary at %s" % BIN)
        return 1
    env = Env(UID_BASE, prefix="sgexec-", timeout_ms=TIMEOUT_MS)
    try:
        env.policy("rw-skip")
        env.policy("rw-flaky", failure="retry", retries=2, timeout_ms=1000)
        env.policy("rw-pause", failure="pause")
        env.policy("rw-cap", concurrency=1, on_excess="refuse")
        env.policy("rw-agent", require_agent=True)
        env.policy("rw-verify", failure="retry", retries=2)
        env.policy("rw-pair", concurrency=2, on_excess="refuse", cpu=1.0, timeout_ms=8000)
        env.policy("rw-long", timeout_ms=60000)
        env.policy("rw-cpu", failure="retry", retries=1, concurrency=128, timeout_ms=5000, cpu=1.0,
                   queue_timeout_ms=20000)
        env.policy("rw-starve", failure="retry", retries=1, concurrency=64, timeout_ms=2000, cpu=1.0)
        env.policy("rw-quota", failure="retry", retries=1, timeout_ms=8000, cpu=0.02)
        only = sys.argv[1:]
        for name, fn in cases:
            if only and name not in only:
                continue
            try:
                why = fn(env)
            except Exception as e:  # a crash in a case is that case's failure
                why = "%s: %s" % (type(e).__name__, e)
            if why and why.startswith("SKIP "):
                report("SKIP", name, why[5:])
            else:
                report("FAIL" if why else "PASS", name, why or "")
    finally:
        env.cleanup()
    return exit_code()

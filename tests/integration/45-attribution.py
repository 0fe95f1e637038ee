#!/usr/bin/env python3
"""Attribution end to end: an agent kill reaches the executor's result as
tenant_policy_violation with the right rule (never tenant_crash); the
executor's outcomes land in the agent's ledger per tenant and class, through
the journal, also those booked while no agent ran; a model-written program's
failure (verifier mode) is its verdict, never the tenant's fault; the counts
survive an agent restart; a telemetry outage never fails a batch."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgagent import PY, SANDGUARD, Agent, check, finish, skip  # noqa: E402
from sgtest import remove_cgroup_tree, wait_tenant_memory_dir  # noqa: E402
import sgjournal  # noqa: E402

EGRESS = """import json, socket, sys
b = json.load(sys.stdin)
socket.create_connection(("127.0.0.1", 9), timeout=1)
print(json.dumps([1.0] * len(b["items"])))
"""
READ_OUTSIDE = """import json, sys
b = json.load(sys.stdin)
open("/proc/self/status").read()  # in the sandbox's root, not in its policy
print(json.dumps([1.0] * len(b["items"])))
"""
FORK_BOMB = """import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""
GOOD = """import json, sys
b = json.load(sys.stdin)
print(json.dumps([0.5] * len(b["items"])))
"""
NAN = """import json, sys
b = json.load(sys.stdin)
print("[" + ",".join(["NaN"] * len(b["items"])) + "]")
"""


def ledger(agent):
    return {t["tenant"]: t for t in sgjournal.top(agent).get("tenants", [])}


def verify_case(a, prog):
    tests = os.path.join(a.dir, "tests.json")
    with open(tests, "w") as f:
        json.dump([{"input": "1 2", "output": "3"}], f)
    r = a.run(["exec", "--tenant", "alpha", "--policy-dir", a.policy_dir, "--tests", tests,
               "--", "/usr/bin/python3", prog])
    try:
        return json.loads(r.stdout), r
    except ValueError:
        return None, r


def main():
    a = Agent({"alpha": {}, "bravo": {}}, name="attr")
    try:
        progs = {n: a.program(n + ".py", t) for n, t in
                 [("egress", EGRESS), ("read_outside", READ_OUTSIDE), ("fork_bomb", FORK_BOMB),
                  ("good", GOOD), ("nan", NAN)]}

        # Without an agent: the executor still answers, on its own layers.
        r, raw = a.exec_batch("alpha", progs["good"])
        check(r is not None and r["cause"] == "ok", "no agent: a batch still runs and is ok",
              raw.stderr[-300:])

        if not a.start():
            check(False, "agent starts", open(os.path.join(a.dir, "agent.log")).read()[-500:])
            return
        for prog, rule, tenant in [("egress", "egress", "alpha"), ("read_outside", "file", "bravo"),
                                   ("fork_bomb", "fork", "bravo")]:
            run = "attr-run-%s" % prog
            r, raw = a.exec_batch(tenant, progs[prog], extra=("--run-id", run))
            ok = r is not None and r["cause"] == "tenant_policy_violation" and r["rule"] == rule
            check(ok, "agent kill for %s reaches the result as tenant_policy_violation/%s" % (prog, rule),
                  "got %r" % ((r["cause"], r["rule"], r["detail"]) if r else raw.stderr[-300:],))
            killed = a.events_matching(type="sandbox_killed", tenant=tenant, rule=rule, run_id=run,
                                       batch_id=a.last_batch_id)
            check(bool(killed), "the %s kill is evented as sandbox_killed for %s, with its batch_id "
                  "and run_id" % (rule, tenant),
                  "no sandbox_killed event with run_id %s, batch_id %s; kill events: %r" %
                  (run, a.last_batch_id, [(e.get("batch_id"), e.get("run_id")) for e in
                                          a.events_matching(type="sandbox_killed", tenant=tenant,
                                                            rule=rule)]))
            if killed:
                # Every line of that sandbox (the violation's own event too)
                # names the batch and the run: `sandguard explain` joins on them.
                lines = a.events_matching(sandbox=killed[0]["sandbox"], tenant=tenant)
                odd = [(e["type"], e.get("batch_id"), e.get("run_id")) for e in lines
                       if e.get("batch_id") != a.last_batch_id or e.get("run_id") != run]
                check(len(lines) >= 2 and not odd,
                      "every event of the %s sandbox carries its batch_id and run_id" % rule,
                      "%d lines, without the ids: %r" % (len(lines), odd[:5]))

        for _ in range(2):
            a.exec_batch("alpha", progs["nan"])
        a.exec_batch("alpha", progs["good"])
        state = a.env["SANDGUARD_STATE_DIR"]
        t = sgjournal.settled(a)
        before = {row["tenant"]: row for row in t.get("tenants", [])}
        alpha, bravo = before.get("alpha", {}), before.get("bravo", {})
        fa, fb = alpha.get("failures", {}), bravo.get("failures", {})
        check(t.get("source") == "agent", "top shows the agent's own ledger", str(t)[:300])
        check(fa.get("tenant_bad_output") == 2 and fa.get("tenant_policy_violation") == 1
              and fb.get("tenant_policy_violation") == 2 and fb.get("tenant_bad_output") == 0,
              "the ledger books each failure once, in its tenant's column",
              "alpha %s bravo %s" % (fa, fb))
        check(alpha.get("batches_ok") == 2,
              "the batch run before the agent started is in the ledger too (the journal keeps it)",
              str(alpha))
        check(alpha.get("platform_faults") == 0 and bravo.get("platform_faults") == 0,
              "tenant faults are never booked as platform faults", str(before))
        check(alpha.get("kills", {}).get("egress") == 1 and bravo.get("kills", {}).get("fork") == 1,
              "kills are booked per tenant and rule", str({k: v.get("kills") for k, v in before.items()}))

        # Verifier mode: the model-written program fails its test. That is
        # the verdict (reward 0), never the tenant's fault.
        r, raw = verify_case(a, progs["nan"])
        check(r is not None and r["cause"] == "ok" and r["reward"] == 0,
              "verifier mode: a failing program is reward 0, cause ok", raw.stdout[-300:] + raw.stderr[-300:])
        runs = [x for x in sgjournal.read(state) if x["mode"] == "verify" and not x["final"]]
        check(len(runs) == 1 and runs[0]["class"] in ("verdict", "none"),
              "verifier mode: the run's journal record is class verdict, not tenant_code", str(runs))
        t = sgjournal.settled(a)
        alpha2 = {row["tenant"]: row for row in t.get("tenants", [])}.get("alpha", {})
        check(alpha2.get("tenant_faults") == alpha.get("tenant_faults")
              and alpha2.get("failures") == fa,
              "verifier mode: the tenant's fault counts do not move", "%s -> %s" % (alpha, alpha2))

        a.stop()
        # A telemetry outage never fails a batch: no agent, the batch runs,
        # and it is booked (in the journal) all the same.
        r, raw = a.exec_batch("alpha", progs["good"])
        check(r is not None and r["cause"] == "ok", "agent down: the batch is still ok", raw.stderr[-300:])
        if not a.start():
            check(False, "agent restarts", "")
            return
        t = sgjournal.settled(a)
        after = {row["tenant"]: row for row in t.get("tenants", [])}
        check(after.get("alpha", {}).get("failures") == fa and after.get("bravo", {}).get("failures") == fb,
              "counts survive an agent restart", "before %s after %s" % (before, after))
        check(after.get("alpha", {}).get("batches_ok") == alpha2.get("batches_ok", 0) + 1,
              "the batch booked while the agent was down is counted after its restart",
              "before %s after %s" % (alpha2, after.get("alpha")))
        rep = sgjournal.exactly_once(state, t)
        check(not rep["problems"], "journal and ledger agree: " + sgjournal.summary(rep),
              "; ".join(rep["problems"]))
        exec_kill_seen_late(a, progs)
        exec_deny_of_a_child_keeps_the_run(a)
        exec_logged_then_killed_is_a_crash(a)
        violation_beats_node_oom(a)
        clean_run_needs_no_agent_word(a)
        for what, rule in [("egress", "egress"), ("fork", "fork")]:
            cause_from_kernel_record_agent_stopped(a, what, rule)
        fork_with_agent_dead(a)
        clean_run_events_attributed(a, progs)
        late_violation_is_the_runs(a)
        other_cgroup_root(a, progs)
        host_root(a, progs)
    finally:
        a.cleanup()


def exec_kill_seen_late(a, progs):
    """An agent kill at main's execve takes init with it. An executor that
    sees init's end and main's exec at once (a loaded node: every poll of
    the executor delayed 300 ms by strace) must still book what happened,
    the tenant's exec violation: main's report pipe says the tenant's code
    ran. Only an end without main's EXEC marker is the platform's."""
    if not shutil.which("strace"):
        skip("exec-kill-seen-late", "strace is missing (scripts/install-deps.sh installs it)")
        return
    a.write_policy("charlie", {"exec": {"allow": ["/usr/bin/perl"]}})
    env = dict(a.env)
    if "ASAN_OPTIONS" in env:
        env["ASAN_OPTIONS"] += ":detect_leaks=0"  # LeakSanitizer stops under ptrace
    batch = os.path.join(a.dir, "batch-charlie.json")
    with open(batch, "w") as f:
        json.dump({"batch_id": "late", "items": [{"prompt": "p", "completion": "c"}]}, f)
    got = []
    for _ in range(3):
        p = subprocess.run(["strace", "-o", "/dev/null", "-e", "trace=poll", "-e",
                            "inject=poll:delay_enter=300ms", SANDGUARD, "exec", "--tenant",
                            "charlie", "--policy-dir", a.policy_dir, "--batch", batch, "--",
                            PY, progs["good"]],
                           env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                           timeout=120)
        try:
            r = json.loads(p.stdout)
            got.append((r["cause"], r["rule"], r["detail"]))
        except ValueError:
            got.append(("no result", p.returncode, p.stderr[-300:]))
    check(all(g[:2] == ("tenant_policy_violation", "exec") for g in got),
          "exec-kill-seen-late: an agent kill at main's execve, seen with init's end, is the "
          "tenant's exec violation", repr(got))


CHILD_EXEC = """import json, subprocess, sys
b = json.load(sys.stdin)
try:
    rc = subprocess.run(["/usr/bin/true"]).returncode
except OSError as e:  # LSM mode: the execve fails
    rc = e.errno
print(json.dumps([0.5] * len(b["items"])), file=sys.stdout)
print("child:", rc, file=sys.stderr)
"""


def exec_deny_of_a_child_keeps_the_run(a):
    """`deny` refuses one exec and keeps the sandbox running (docs/policy.md):
    a child's refused exec (fallback mode: the child killed at it; LSM: its
    execve fails) leaves the run to its main, which goes on and is ok. Only
    the run's own command refused is a policy violation
    (tests/programs/benign/run.sh checks that one in both modes): a
    SIGKILL of a child must not be read as main's refusal."""
    a.write_policy("echo", {"actions": {"exec": "deny"}})
    prog = a.program("child_exec.py", CHILD_EXEC)
    r, raw = a.exec_batch("echo", prog)
    deadline = time.monotonic() + 5
    denied = []
    while not denied and time.monotonic() < deadline:
        denied = a.events_matching(type="exec_denied", tenant="echo")
        time.sleep(0.05)
    check(r is not None and r["cause"] == "ok" and set(r["scores"]) == {0.5} and
          any("/usr/bin/true" in json.dumps(e) for e in denied),
          "exec-deny-of-a-child: a child's exec refused (deny) leaves the run ok, and is evented",
          "%s; exec_denied events %s; stderr %s" % (
              r and (r["cause"], r["scores"], r["detail"]), denied[:1], raw.stderr[-200:]))


SELF_KILL = """import os, signal, sys
print("ran", file=sys.stderr, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def exec_logged_then_killed_is_a_crash(a):
    """`log` lets an exec happen and only events it: a run whose command the
    exec rule logged (no exec.allow glob matches it), and that then dies of
    a SIGKILL of its own, crashed. The exec rule refused nothing, so the
    kernel's record of an exec violation must not make it the rule's
    refusal of its command (fallback mode reads a main's unexplained
    SIGKILL after a refused exec that way)."""
    a.write_policy("foxtrot", {"exec": {"allow": ["/usr/bin/true"]}, "actions": {"exec": "log"}})
    prog = a.program("self_kill.py", SELF_KILL)
    r, raw = a.exec_batch("foxtrot", prog)
    logged = a.events_matching(type="exec", tenant="foxtrot", action="logged")
    check(r is not None and r["cause"] == "tenant_crash" and "ran" in r.get("stderr", "") and logged,
          "exec-logged-then-killed: a logged exec is no refusal; the run's own SIGKILL is a crash",
          "%s; logged exec events %d; stderr %s" % (
              r and (r["cause"], r["rule"], r["detail"], r.get("stderr")), len(logged),
              raw.stderr[-200:]))


NODE_OOM_THEN_EGRESS = """import json, os, socket, sys, time
b = json.load(sys.stdin)
deadline = time.monotonic() + 30
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    time.sleep(0.05)
pid = os.fork()
if pid == 0:  # the hog: 16 MB blocks until the OOM killer takes it
    hog = [bytearray(16 << 20) for _ in range(4096)]
    os._exit(0)
_, st = os.waitpid(pid, 0)
print("hog:", st, file=sys.stderr, flush=True)
socket.create_connection(("127.0.0.1", 9), timeout=1)
print(json.dumps([1.0] * len(b["items"])))
"""


def violation_beats_node_oom(a):
    """A run the agent killed for a rule it broke is the tenant's policy
    violation even when the node's OOM killer also killed in it (memory
    the sandbox did not run out of: the node's overload, a platform error
    on its own, 31-exec-overload exec-node-oom-is-platform-error). The
    test stands in for the node with a 48 MB limit on the tenant's cgroup
    under the sandbox's own 256 MB: a child hogs memory and is OOM-killed,
    then main connects where egress is refused (action kill)."""
    tenant = "golf"
    a.write_policy(tenant, {})
    prog = a.program("node_oom_then_egress.py", NODE_OOM_THEN_EGRESS)
    go = os.path.join(a.programs, "go-golf")
    root = a.env["SANDGUARD_CGROUP_ROOT"]
    batch = os.path.join(a.dir, "batch-golf.json")
    with open(batch, "w") as f:
        json.dump({"batch_id": "golf", "items": [{"prompt": "p", "completion": "c"}]}, f)
    p = subprocess.Popen([SANDGUARD, "exec", "--tenant", tenant, "--policy-dir", a.policy_dir,
                          "--batch", batch, "--", PY, prog, go], env=a.env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    tdir, limit, unlimited = wait_tenant_memory_dir(root, tenant)
    try:
        with open(os.path.join(tdir, limit), "w") as f:
            f.write(str(48 << 20))
        open(go, "w").close()
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        if os.path.exists(os.path.join(tdir, limit)):  # (not made: the first open said why)
            with open(os.path.join(tdir, limit), "w") as f:
                f.write(unlimited)
        if os.path.exists(go):
            os.unlink(go)
    try:
        r = json.loads(out)
    except ValueError:
        r = None
    check(r is not None and r["cause"] == "tenant_policy_violation" and r["rule"] == "egress"
          and "hog: 9" in r.get("stderr", ""),
          "node-oom-and-violation: the agent's kill for a broken rule is the tenant's, though the "
          "node's OOM killer killed in the run too",
          "%s; stderr %s" % (r and (r["cause"], r["rule"], r["detail"], r.get("stderr")),
                             err[-300:]))


WAIT_GO = """import json, os, sys, time
b = json.load(sys.stdin)
deadline = time.monotonic() + 30
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    time.sleep(0.02)
print(json.dumps([0.5] * len(b["items"])))
"""


def run_with_agent_stopped(a, name, text, bid, *args):
    """One batch of tenant alpha whose program waits, once it runs, for a
    go file: the agent is stopped (SIGSTOP) when its exec is seen, the go
    file made, and the agent resumed once the result is in. (result or
    None, the executor's stderr)."""
    prog = a.program(name, text)
    go = os.path.join(a.programs, "go-" + bid)
    batch = os.path.join(a.dir, "batch-%s.json" % bid)
    with open(batch, "w") as f:
        json.dump({"batch_id": bid, "items": [{"prompt": "p", "completion": "c"}]}, f)
    p = subprocess.Popen([SANDGUARD, "exec", "--tenant", "alpha", "--policy-dir", a.policy_dir, "--batch",
                          batch, "--", PY, prog, go] + list(args), env=a.env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and p.poll() is None and not any(
            name in json.dumps(e) for e in a.events_matching(type="exec", tenant="alpha")):
        time.sleep(0.02)
    a.proc.send_signal(signal.SIGSTOP)
    try:
        open(go, "w").close()
        out, err = p.communicate(timeout=60)
    finally:
        a.proc.send_signal(signal.SIGCONT)
        os.unlink(go)
    try:
        return json.loads(out), err
    except ValueError:
        return None, err


def clean_run_needs_no_agent_word(a):
    """A run that broke no rule is judged without the agent's verdict: the
    kernel's record of the sandbox (sg_state) has no violation, and every
    agent kill follows one. So a busy or stopped agent does not hold up its
    result: with the agent stopped (SIGSTOP) once the program runs, the
    batch is ok, and the executor never waited for a verdict (it warns
    "no verdict from the agent" when it does, after 200 ms)."""
    r, err = run_with_agent_stopped(a, "wait_go.py", WAIT_GO, "quiet")
    check(r is not None and r["cause"] == "ok" and "no verdict from the agent" not in err,
          "clean-run-needs-no-agent-word: a run without a violation is judged without asking the "
          "(stopped) agent", "%s; stderr: %s" % (r and (r["cause"], r["detail"]), err[-300:]))


# Waits (once it runs) for the test's go file, then breaks a kill rule.
STOPPED_BREAKS = """import json, os, socket, sys, time
b = json.load(sys.stdin)
deadline = time.monotonic() + 30
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    time.sleep(0.02)
if sys.argv[2] == "egress":
    try:
        socket.create_connection(("127.0.0.1", 9), timeout=1)
    except OSError:
        pass
else:
    while True:
        try:
            os.fork()
        except OSError:
            pass
print(json.dumps([0.5] * len(b["items"])))
"""


def cause_from_kernel_record_agent_stopped(a, what, rule):
    """Issue 32: with the agent stopped (SIGSTOP) while the run breaks a
    kill rule, nobody carries out the kill, but the kernel's record
    (sg_state) holds the trip, booked in the task's own system call. The
    cause follows that record: tenant_policy_violation with the rule, never
    ok (a refused connect the program survived), tenant_timeout (a fork
    bomb nobody killed) or tenant_crash. The journal books the same."""
    bid = "stopped-" + what
    r, err = run_with_agent_stopped(a, "stopped_%s.py" % what, STOPPED_BREAKS, bid, what)
    booked = [o for o in sgjournal.read(a.env["SANDGUARD_STATE_DIR"]) if o.get("batch_id") == bid and o.get("final")]
    check(r is not None and r["cause"] == "tenant_policy_violation" and r["rule"] == rule
          and len(booked) == 1 and booked[0]["cause"] == "tenant_policy_violation"
          and booked[0]["rule"] == rule,
          "%s-with-agent-stopped-is-the-kernel-records-violation: tenant_policy_violation/%s, "
          "result and journal" % (what, rule),
          "%s; booked %s; stderr: %s" % (r and (r["cause"], r["rule"], r["detail"]),
                                        [(o["cause"], o["rule"]) for o in booked], err[-300:]))


# Chaos's fork bomb: forty sleeping children, past the fork limit.
FORKS = """import json, os, sys, time
b = json.load(sys.stdin)
for _ in range(40):
    os.fork() or time.sleep(5)
print(json.dumps([0.0] * len(b["items"])))
"""


def fork_with_agent_dead(a):
    """Issue 32 (chaos, 10,000 batches: 96 fork bombs booked tenant_crash
    or 'init killed from outside'): with the agent killed (kill -9) and not
    back yet, the executor has no agent connection but enrolls the sandbox
    in the pinned maps itself, and the kernel still counts the forks,
    records the trip and kills the forker. The cause follows that record:
    tenant_policy_violation/fork, never tenant_crash (killed by SIGKILL)."""
    prog = a.program("forks.py", FORKS)
    a.proc.send_signal(signal.SIGKILL)
    a.proc.wait()
    a.proc = None
    try:
        r, raw = a.exec_batch("bravo", prog)
    finally:
        started = a.start()
    check(started, "the agent comes back after kill -9", a.log_tail())
    check(r is not None and r["cause"] == "tenant_policy_violation" and r["rule"] == "fork",
          "fork-with-agent-dead-is-the-kernel-records-violation: the executor's own enrollment, "
          "the kernel's trip: tenant_policy_violation/fork",
          "%s; stderr: %s" % (r and (r["cause"], r["rule"], r["detail"]), raw.stderr[-300:]))


def clean_run_events_attributed(a, progs):
    """Without a verdict to ask for, nothing made the agent read a clean
    run's last events (its tasks' exits) before the executor unregistered
    the sandbox, and they went out without their sandbox and batch (4 runs
    in 10; 55-explain's timelines lost their exit lines). The agent reads
    the pending events before it drops a sandbox: each run's python exit
    is evented with its sandbox and batch, in ten runs."""
    missing = []
    for i in range(10):
        r, raw = a.exec_batch("alpha", progs["good"])
        if r is None or r["cause"] != "ok":
            missing.append((i, "result", r and r["cause"]))
            continue
        sb, bid = r["sandboxes"][-1]["sandbox"], a.last_batch_id
        deadline = time.monotonic() + 5
        while True:
            pids = {e["pid"] for e in a.events_matching(type="exec", sandbox=sb)}
            exits = [e for e in a.events_matching(type="exit") if e.get("pid") in pids]
            if (pids and exits) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if not pids or not exits or any(e.get("sandbox") != sb or e.get("batch_id") != bid for e in exits):
            missing.append((i, sorted(pids), [(e.get("sandbox"), e.get("batch_id")) for e in exits]))
    check(not missing, "clean-run-events-attributed: a clean run's exit events carry its sandbox and batch",
          "runs without them: %s" % missing)


# A child outlives main: it waits for main's exit, then opens a path whose
# walk takes milliseconds (36 symlinks of ~1600 components each) and ends
# outside the policy (/proc/self/status: a file violation, action kill).
# It closed its stdout and stderr, so the executor's drain does not wait.
STRAGGLER = r"""import json, os, sys
b = json.load(sys.stdin)
N = 36
os.mkdir("d")
body = "d/../" * 790
for k in range(N):
    os.symlink(body + "L%d" % (k + 1), "L%d" % k)
os.symlink("/proc/self/status", "L%d" % N)
r, w = os.pipe()
if os.fork() == 0:
    os.close(w)
    os.close(1)
    os.close(2)
    os.read(r, 1)
    try:
        os.open("L0", os.O_RDONLY)
    except OSError:
        pass
    os._exit(0)
os.close(r)
sys.stdout.write(json.dumps([0.5] * len(b["items"])) + "\n")
sys.stdout.flush()
os._exit(0)
"""


def late_violation_is_the_runs(a):
    """A violation made by a run's last process inside the system call it
    was in when the run was killed (main had exited, the executor emptied
    the run's cgroup) is the run's: the executor reads the kernel's record,
    or asks the agent, only once the run's cgroup is empty. No run is booked
    ok while the agent killed its sandbox for it (found by a review; before,
    3-6 runs in 10 were). Eight runs; at least one must catch the child in
    its walk, or the test proves nothing."""
    prog = a.program("straggler.py", STRAGGLER)
    wrong, caught = [], 0
    for i in range(8):
        r, raw = a.exec_batch("alpha", prog)
        bid = a.last_batch_id
        time.sleep(0.5)  # the agent's event lines
        sb = r and r.get("sandboxes") and r["sandboxes"][-1].get("sandbox")
        evs = [e for e in a.events_matching() if e.get("batch_id") == bid or (sb and e.get("sandbox") == sb)]
        violated = any(e.get("type") == "sandbox_killed" or e.get("rule") == "file" for e in evs)
        cause = r and (r["cause"], r["rule"])
        caught += cause == ("tenant_policy_violation", "file")
        if violated and cause != ("tenant_policy_violation", "file"):
            wrong.append((i, cause, sorted(set(e.get("type") for e in evs))))
    check(not wrong and caught > 0,
          "late-violation-is-the-runs: a violation by a run's last process, in the call it was killed "
          "in, is booked to that run", "booked otherwise: %s; runs that caught it: %d of 8" % (wrong, caught))


def other_cgroup_root(a, progs):
    """The agent's cgroup programs (egress; LSM mode's file and exec ones)
    sit on its cgroup root: an executor configured with another root at the
    same depth would put sandboxes nothing judges there, and believe them
    enforced. Every batch is refused as a platform error naming it, never
    run unjudged: the forbidden connect never leaves."""
    root = a.env["SANDGUARD_CGROUP_ROOT"] + "-other"
    env = dict(a.env, SANDGUARD_CGROUP_ROOT=root)
    try:
        p = subprocess.run([SANDGUARD, "exec", "--tenant", "alpha", "--policy-dir", a.policy_dir,
                            "--batch", "-", "--", PY, progs["egress"]], env=env,
                           input=json.dumps({"batch_id": "other-root",
                                             "items": [{"prompt": "p", "completion": "c"}]}),
                           capture_output=True, text=True, timeout=120)
        try:
            r = json.loads(p.stdout)
        except ValueError:
            r = None
        ran = [x for x in a.events_matching(tenant="alpha") if x.get("batch_id") == "other-root"]
        check(r is not None and r["cause"] == "platform_error" and "another cgroup root" in r["detail"]
              and not ran,
              "cgroup-root: an executor on another cgroup root than its agent's gets "
              "platform_error, never an unjudged run",
              "%s; events of the batch %s" % (r and (r["cause"], r["detail"]) or p.stderr[-300:],
                                              ran[:2]))
    finally:
        remove_cgroup_tree(root)


def host_root(a, progs):
    """--host-root: a containerized agent sees the node's / as a hostPath
    mount. A bind mount of / is that view: enforcement must work as usual.
    A root the executor does not share must refuse every batch as a
    platform error, never book it to the tenant."""
    mnt = os.path.join(a.dir, "hostroot")
    other = os.path.join(a.dir, "otherroot")
    os.makedirs(mnt)
    os.makedirs(other)
    if subprocess.run(["mount", "--bind", "-o", "ro", "/", mnt]).returncode != 0:
        skip("host-root", "cannot bind-mount / here")
        return
    try:
        a.stop()
        if not a.start("--host-root", mnt):
            check(False, "host-root: the agent starts with --host-root", "")
            return
        r, raw = a.exec_batch("alpha", progs["good"])
        check(r is not None and r["cause"] == "ok", "host-root: a good batch is ok with the node's / as a hostPath",
              r and r["detail"] or raw.stderr[-300:])
        r, raw = a.exec_batch("alpha", progs["egress"])
        check(r is not None and r["cause"] == "tenant_policy_violation" and r["rule"] == "egress",
              "host-root: violations are still attributed", r and (r["cause"], r["detail"]) or raw.stderr[-300:])
        a.stop()
        if not a.start("--host-root", other):
            check(False, "host-root: the agent starts with a foreign root", "")
            return
        r, raw = a.exec_batch("bravo", progs["good"])
        check(r is not None and r["cause"] == "platform_error" and "root filesystem" in r["detail"],
              "host-root: an executor on another root gets platform_error, never a tenant cause",
              r and (r["cause"], r["detail"]) or raw.stderr[-300:])
    finally:
        a.stop()
        subprocess.run(["umount", "-l", mnt])


main()
finish()

#!/usr/bin/python3
"""The warm path end to end, as root: `sandguard executor` (a pool of
sandboxes prepared ahead of demand) and `sandguard exec` handing its run to
it over <run>/executor.sock. Each case asserts what a cold run does and
what the warm one must do the same (result, exit code, booking), that no
state crosses from one run to the next (files, processes, SysV objects,
environment, descriptors), that a verifier's tests in one shared sandbox
never see each other, and what a killed or stopped executor leaves (nothing
that the next start does not reap, booked once). Private roots: cgroup
root, run, state, scratch and policies are the suite's own. Prints one
PASS/FAIL/SKIP line per case."""
import json
import os
import signal
import subprocess
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgtest import sandbox_cgroups, uid_base  # noqa: E402
from sgexecutor import BIN, PYTHON, batch, exec_cli, run_suite, wait_for  # noqa: E402

UID_BASE = uid_base(63000)  # 20-sandbox uses 61000, 30-exec 62000


def run_batch(env, tenant, program, b, prog_args=(), extra_env=None):
    return exec_cli(env, ["--tenant", tenant, "--policy-dir", env.policies, "--batch", "-", "--",
                          PYTHON, os.path.join(env.progs, program)] + list(prog_args),
                    stdin=json.dumps(b).encode(), extra_env=extra_env)


def run_tests(env, tenant, program, tests, batch_id, extra_env=None):
    path = os.path.join(env.dir, "tests-%s.json" % batch_id)
    with open(path, "w") as f:
        json.dump(tests, f)
    return exec_cli(env, ["--tenant", tenant, "--policy-dir", env.policies, "--tests", path,
                          "--batch-id", batch_id, "--", PYTHON, os.path.join(env.progs, program)],
                    extra_env=extra_env)


COLD = {"SANDGUARD_WARM": "0"}
# What may differ between a cold and a warm run of the same thing.
VARYING = ("wall_ms", "path", "stderr", "sandboxes")  # sandboxes: each run's own ids


def comparable(res):
    r = {k: v for k, v in res.items() if k not in VARYING}
    if r.get("cause") == "tenant_timeout":
        r.pop("detail", None)  # the CPU it got is in there
    for t in r.get("tests") or []:
        t.pop("wall_ms", None)
    return r


# ---- cases -------------------------------------------------------------

SAME_CASES = [("rw_good.py", "ok", 0), ("rw_nan.py", "tenant_bad_output", 1),
              ("rw_abort.py", "tenant_crash", 1), ("rw_hang.py", "timeout", 1),
              ("rw_memory_hog.py", "tenant_oom", 1), ("rw_fork_bomb.py", "bounded", 1)]


def outcome(res):
    """A result's cause, with what timing decides folded: a fork bomb ends
    at the pids limit or at its deadline, whichever comes."""
    cause = res["cause"]
    if cause == "tenant_timeout":
        cause = "timeout"
    if cause == "tenant_policy_violation" and res["rule"] == "fork":
        cause = "bounded"
    return cause


def t_same_as_cold(env, ex):
    """Every cause, the verifier, usage errors and an unloadable policy:
    the warm result and exit code are the cold ones (path aside)."""
    bad = []
    for program, cause, rc_want in SAME_CASES:
        got = {}
        for name, extra in (("cold", COLD), ("warm", {})):
            got[name] = run_batch(env, "wm-same", program, batch("same-" + program), extra_env=extra)
        (crc, cres, _), (wrc, wres, _) = got["cold"], got["warm"]
        if not cres or not wres:
            bad.append("%s: no result (cold %d, warm %d)" % (program, crc, wrc))
            continue
        if cres.get("path") != "cold" or wres.get("path") != "warm":
            bad.append("%s: paths %s/%s" % (program, cres.get("path"), wres.get("path")))
        want = ("timeout", "bounded") if cause == "bounded" else (cause,)
        if outcome(cres) not in want or outcome(wres) not in want:
            bad.append("%s: cold %s, warm %s, want %s" % (program, outcome(cres), outcome(wres), cause))
        elif outcome(cres) == cause and outcome(wres) == cause and cause != "timeout" and \
                (comparable(cres) != comparable(wres) or crc != wrc or crc != rc_want):
            bad.append("%s: cold %s (%d) != warm %s (%d)" % (program, comparable(cres), crc,
                                                             comparable(wres), wrc))
    tests = [{"input": "1 2\n", "output": "3\n"}, {"input": "5 5", "output": "10"}]
    for program in ("rw_sum.py", "rw_sum_wrong.py"):
        c = run_tests(env, "wm-same", program, tests, "v-cold-" + program[:-3], COLD)
        w = run_tests(env, "wm-same", program, tests, "v-warm-" + program[:-3])
        if not c[1] or not w[1] or c[0] != w[0] or \
                {**comparable(c[1]), "batch_id": 0} != {**comparable(w[1]), "batch_id": 0}:
            bad.append("verifier %s: cold %s != warm %s" % (program, c[:2], w[:2]))
    for args in (["--tenant", "wm-same"], ["--tenant", "BAD!", "--batch", "-", "--", "x"],
                 ["--tenant", "wm-same", "--policy-dir", env.policies, "--batch", "-", "--timeout-ms",
                  "999999", "--", PYTHON, "x.py"]):
        c = subprocess.run([BIN, "exec"] + args, input=b"{}", capture_output=True, env=env.env(**COLD))
        w = subprocess.run([BIN, "exec"] + args, input=b"{}", capture_output=True, env=env.env())
        if (c.returncode, c.stdout, c.stderr) != (w.returncode, w.stdout, w.stderr) or c.returncode != 64:
            bad.append("usage %s: cold %s != warm %s" % (args[:2], (c.returncode, c.stderr[:120]),
                                                        (w.returncode, w.stderr[:120])))
    with open(os.path.join(env.policies, "wm-broken.json"), "w") as f:
        f.write("{ not json")
    c = run_batch(env, "wm-broken", "rw_good.py", batch("broken-cold"), extra_env=COLD)
    w = run_batch(env, "wm-broken", "rw_good.py", batch("broken-warm"))
    if not c[1] or not w[1] or c[0] != 2 or w[0] != 2 or \
            {**comparable(c[1]), "batch_id": 0} != {**comparable(w[1]), "batch_id": 0}:
        bad.append("unloadable policy: cold %s != warm %s" % (c[:2], w[:2]))
    return "; ".join(bad) or None


def t_large_answer(env, ex):
    """An answer larger than the socket's buffer (about 600 KB of scores)
    reaches the client whole: the executor sends it in parts, the client
    prints the cold run's result."""
    b = {"batch_id": "large", "items": [{"prompt": "p", "completion": "c" * (1 + i % 50)}
                                        for i in range(32000)]}
    got = {}
    for name, extra in (("cold", COLD), ("warm", {})):
        got[name] = run_batch(env, "wm-same", "rw_good.py", b, extra_env=extra)
    (crc, cres, cerr), (wrc, wres, werr) = got["cold"], got["warm"]
    if not cres or not wres:
        return "no result: cold %d %s, warm %d %s" % (crc, cerr[-200:], wrc, werr[-200:])
    if wres.get("path") != "warm" or len(wres.get("scores") or []) != len(b["items"]):
        return "warm: path %s, %d scores" % (wres.get("path"), len(wres.get("scores") or []))
    if comparable(cres) != comparable(wres) or crc != wrc or wrc != 0:
        return "cold (%d) %s != warm (%d) %s" % (crc, str(comparable(cres))[:200], wrc,
                                                str(comparable(wres))[:200])
    return None


def t_cold_fallbacks(env, ex):
    """No executor, another environment, SANDGUARD_WARM=0: cold, and right."""
    bad = []
    for why, extra in (("SANDGUARD_WARM=0", COLD), ("another environment", {"SANDGUARD_NODE_CPUS": "2"})):
        rc, res, err = run_batch(env, "wm-same", "rw_good.py", batch("fallback"), extra_env=extra)
        if rc != 0 or not res or res.get("path") != "cold":
            bad.append("%s: exit %d path %s" % (why, rc, res and res.get("path")))
    ex.stop()
    try:
        rc, res, err = run_batch(env, "wm-same", "rw_good.py", batch("no-executor"))
        if rc != 0 or not res or res.get("path") != "cold":
            bad.append("no executor: exit %d path %s" % (rc, res and res.get("path")))
    finally:
        ex.start()
    return "; ".join(bad) or None


def t_verifier_isolated(env, ex):
    """Issue 14 item 4: one sandbox for a program's tests, each test a fresh
    process. Test 1 leaves a file (scratch, /tmp, /dev/shm, /mnt), a daemon and
    SysV objects; test 2, in the same sandbox, sees none of them. Cold and
    warm. The control: the same probe in one run finds all of it."""
    bad = []
    rc, res, _ = run_batch(env, "wm-iso", "wm_leftovers.py", batch("control"), prog_args=["both"],
                           extra_env=COLD)
    probe = json.loads(res["stderr"]) if res and res.get("stderr") else {}
    missing = [m for m in probe.get("made", []) if not any(m in f for f in probe.get("found", []))]
    if not probe.get("made") or missing or not any(f.startswith("processes") for f in probe.get("found", [])):
        return "the probe does not see what it leaves (made %s, found %s)" % (probe.get("made"),
                                                                            probe.get("found"))
    tests = [{"input": "leave\n", "output": "left\n"}, {"input": "check\n", "output": "clean\n"}]
    for name, extra in (("cold", COLD), ("warm", {})):
        rc, res, _ = run_tests(env, "wm-iso", "wm_leftovers.py", tests, "iso-" + name, extra)
        if rc != 0 or not res or res["reward"] != 1 or res.get("path") != name:
            bad.append("%s: exit %d, %s" % (name, rc, res and (res.get("tests"), res.get("detail"))))
            continue
        runs = [o for o in env.outcomes() if o.get("batch_id") == "iso-" + name and not o.get("final")]
        if len(runs) != 2 or runs[0]["sandbox"] != runs[1]["sandbox"] or runs[0]["id"] == runs[1]["id"]:
            bad.append("%s: the tests did not share one sandbox: %s" %
                       (name, [(o["id"], o["sandbox"]) for o in runs]))
    return "; ".join(bad) or None


def t_no_state_crosses_runs(env, ex):
    """Warm batch runs, one after another: what the first leaves (files,
    daemon, SysV objects, environment), the second never finds; every run
    has a sandbox of its own, never handed out twice."""
    ids = []
    for mode in ("leave", "check", "check"):
        rc, res, _ = run_batch(env, "wm-iso", "wm_leftovers.py", batch("cross-" + mode), prog_args=[mode])
        probe = json.loads(res["stderr"]) if res and res.get("stderr") else None
        if rc != 0 or not res or res.get("path") != "warm" or probe is None:
            return "%s: exit %d %s" % (mode, rc, res)
        if mode == "check" and probe["found"]:
            return "a later run found %s" % probe["found"]
    ids = [o["sandbox"] for o in env.outcomes() if str(o.get("batch_id", "")).startswith("cross-")]
    if len(ids) != 3 or len(set(ids)) != 3:
        return "sandboxes %s: one handed out twice" % ids
    return None


def t_stdin_cwd(env, ex):
    """The client's stdin and working directory: --batch -, and a relative
    --policy-dir, as the client sees them."""
    rc, res, err = exec_cli(env, ["--tenant", "wm-same", "--policy-dir", "policies", "--batch", "-", "--",
                                  PYTHON, os.path.join(env.progs, "rw_good.py")],
                            stdin=json.dumps(batch("relative")).encode(), cwd=env.dir)
    if rc != 0 or not res or res.get("path") != "warm" or res.get("batch_id") != "relative":
        return "exit %d %s %s" % (rc, res, err[-300:])
    return None


def t_concurrent_booked_once(env, ex):
    """24 warm runs at once: all ok, each booked exactly once."""
    results = []

    def one(i):
        results.append(run_batch(env, "wm-many", "rw_good.py", batch("many-%d" % i)))
    threads = [threading.Thread(target=one, args=(i,)) for i in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bad = [r for r in results if r[0] != 0 or not r[1] or r[1].get("path") != "warm"]
    if bad:
        return "%d of 24 failed: %s" % (len(bad), [(r[0], r[1] and r[1].get("detail"), r[2][-200:])
                                                   for r in bad[:3]])
    booked = [o for o in env.outcomes() if str(o.get("batch_id", "")).startswith("many-") and o.get("final")]
    ids = {o["id"] for o in booked}
    if len(booked) != 24 or len(ids) != 24 or len({o["batch_id"] for o in booked}) != 24:
        return "%d final records, %d ids for 24 batches" % (len(booked), len(ids))
    return None


PROBE_NOFILE = "import json, resource, sys; json.load(sys.stdin); " \
               "print('[%d]' % resource.getrlimit(resource.RLIMIT_NOFILE)[0])"


def t_policy_reload_drains(env, ex):
    """A changed policy: the next run runs under it, and the sandboxes the
    pool prepared under the old one are torn down."""
    env.policy("wm-reload", open_files=64, concurrency=2)

    def nofile():
        rc, res, err = exec_cli(env, ["--tenant", "wm-reload", "--policy-dir", env.policies, "--batch", "-",
                                      "--", PYTHON, "-c", PROBE_NOFILE],
                                stdin=json.dumps(batch("reload", 1)).encode())
        return res and res.get("scores") and int(res["scores"][0]), res
    for _ in range(3):
        got, res = nofile()
        if got != 64:
            return "before: %s" % res
    if not wait_for(lambda: env.sandboxes("wm-reload"), 10):
        return "the pool prepared nothing for the tenant: nothing to drain"
    old = env.sandboxes("wm-reload")
    env.policy("wm-reload", open_files=128, concurrency=2)
    got, res = nofile()
    if got != 128 or res.get("path") != "warm":
        return "after the change: %s" % res
    if not wait_for(lambda: not (old & env.sandboxes("wm-reload")), 10):
        return "sandboxes of the old policy still there: %s" % (old & env.sandboxes("wm-reload"))
    return None


def cgroup_dirs(env, tenant):
    """The tenant's sandbox cgroups that exist, v2 and the v1 mirrors."""
    return sandbox_cgroups(env.cgroot, tenant)


def records(env):
    """The in-flight records: a .tmp file is none (a record being written,
    or a released one the executor keeps for its next record)."""
    d = os.path.join(env.run, "inflight")
    return sorted(n for n in os.listdir(d) if not n.startswith(".")) if os.path.isdir(d) else []


def t_killed_executor(env, ex):
    """kill -9 of the executor mid-run: the client gets a platform error
    (never a second run), the sandbox's processes die with it, and the next
    start reclaims every sandbox it left (the prepared ones too) and books
    the run that was under way once, final, "executor died"."""
    env.policy("wm-long", timeout_ms=60000)
    b = batch("killed-warm")
    client = subprocess.Popen([BIN, "exec", "--tenant", "wm-long", "--policy-dir", env.policies, "--batch", "-",
                               "--", PYTHON, os.path.join(env.progs, "rw_daemon_hang.py")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env.env())
    client.stdin.write(json.dumps(b).encode())
    client.stdin.close()
    client.stdin = None
    if not wait_for(lambda: any(os.path.exists(os.path.join(env.scratch, "wm-long", d, "ready"))
                                for d in env.sandboxes("wm-long")), 30):
        client.kill()
        return "the run never started"
    left = env.sandboxes("wm-long") | env.sandboxes("wm-same") | env.sandboxes("wm-iso")
    ex.stop(signal.SIGKILL)
    out, err = client.communicate(timeout=30)
    res = json.loads(out) if out.strip() else None
    bad = []
    if client.returncode != 2 or not res or res.get("cause") != "platform_error" or res.get("path") != "warm":
        bad.append("the client: exit %d, %s" % (client.returncode, out[-300:]))
    if not cgroup_dirs(env, "wm-long") or not records(env):
        bad.append("nothing was left to reclaim: the test proves nothing")
    ex.start()
    gone = wait_for(lambda: not (left & (env.sandboxes("wm-long") | env.sandboxes("wm-same") |
                                         env.sandboxes("wm-iso"))) and
                    not any(r.split(".")[0] in str(left) for r in records(env)), 15)
    if not gone:
        bad.append("left after the next start: scratch %s, records %s" %
                   (left & (env.sandboxes("wm-long") | env.sandboxes("wm-same")), records(env)))
    if any(os.path.basename(c) in left for c in cgroup_dirs(env, "wm-long") + cgroup_dirs(env, "wm-same")):
        bad.append("cgroups left")
    booked = [o for o in env.outcomes() if o.get("batch_id") == "killed-warm"]
    if len(booked) != 1 or booked[0]["cause"] != "platform_error" or not booked[0].get("final") or \
            "executor died" not in json.dumps(booked[0]):
        bad.append("booked %s, want one final 'executor died'" % booked)
    booked_died = [o for o in env.outcomes() if "executor died" in json.dumps(o)]
    if len(booked_died) != 1:
        bad.append("%d 'executor died' bookings: the prepared sandboxes are not runs" % len(booked_died))
    return "; ".join(bad) or None


QUEUED = 64


def t_queued_killed_executor(env, ex):
    """kill -9 of an executor (a pool of 2) with 4 runs under way and 60
    warm requests queued in the tenant's admission line: a request it never
    started (no run begun, no record) runs cold in its client, ok, once; one
    it started comes back platform_error saying so, and is booked once,
    final, by the next executor's reaper. No client claims a booking the
    journal lacks, no batch is booked twice, and nothing is left."""
    env.policy("wm-queue", concurrency=4, cpu=0.1, on_excess="wait", queue_timeout_ms=300000,
               timeout_ms=120000)
    go = os.path.join(env.progs, "go-queue")
    queue = os.path.join(env.run, "tenants", "wm-queue", "queue")
    ex.stop()
    ex.args = ["--pool-max", "2"]
    ex.start()
    clients = {}
    for i in range(QUEUED):
        bid = "queued-%d" % i
        p = subprocess.Popen([BIN, "exec", "--tenant", "wm-queue", "--policy-dir", env.policies, "--batch", "-",
                              "--", PYTHON, os.path.join(env.progs, "rw_wait_go.py"), go],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env.env())
        p.stdin.write(json.dumps(batch(bid)).encode())
        p.stdin.close()
        p.stdin = None
        clients[bid] = p
    results, bad = {}, []

    def ready():
        return [d for d in env.sandboxes("wm-queue") if os.path.exists(os.path.join(env.scratch, "wm-queue", d, "ready"))]

    def tickets():
        return [n for n in os.listdir(queue) if n.startswith("t-")] if os.path.isdir(queue) else []
    try:
        if not wait_for(lambda: len(ready()) == 4 and len(tickets()) == QUEUED - 4 and records(env), 120):
            bad.append("never 4 running and %d queued (%d, %d): the test proves nothing" %
                       (QUEUED - 4, len(ready()), len(tickets())))
        # The records in flight at the kill, read before it: once the executor
        # is dead, another process's reaper may book them at once (that race
        # is what the test is about), so a read after the kill can be empty.
        left = set(records(env))
        ex.stop(signal.SIGKILL)
        open(go, "w").close()  # the cold runs may finish
        ex.args = []
        ex.start()  # its reaper and the cold runs' race for the orphans

        def collect(bid, p):
            out, err = p.communicate(timeout=600)
            results[bid] = (p.returncode, out.decode(), err.decode())
        threads = [threading.Thread(target=collect, args=kv) for kv in clients.items()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for p in clients.values():
            if p.poll() is None:
                p.kill()
    if not left:
        bad.append("no record was in flight at the kill: the test proves nothing")
    gone = wait_for(lambda: not records(env) and not env.sandboxes("wm-queue") and
                    not cgroup_dirs(env, "wm-queue"), 30)
    if not gone:
        bad.append("left: records %s, scratch %s, cgroups %s" %
                   (records(env), env.sandboxes("wm-queue"), cgroup_dirs(env, "wm-queue")))
    finals = {}
    for o in env.outcomes():
        if str(o.get("batch_id", "")).startswith("queued-") and o.get("final"):
            finals.setdefault(o["batch_id"], []).append(o)
    cold = started = 0
    for bid, (rc, out, err) in sorted(results.items()):
        res = json.loads(out) if out.strip() else {}
        booked = finals.get(bid, [])
        if len(booked) != 1:
            bad.append("%s: %d final bookings (exit %d, %s)" % (bid, len(booked), rc, res.get("detail")))
        if rc == 0 and res.get("cause") == "ok" and res.get("path") == "cold" and \
                "before it started the run" in err and booked and booked[0]["cause"] == "ok":
            cold += 1
        elif rc == 2 and res.get("cause") == "platform_error" and res.get("path") == "warm" and \
                "after it started the run" in res.get("detail", "") and booked and \
                "executor died" in json.dumps(booked[0]):
            started += 1
        elif rc == 0 and res.get("cause") == "ok" and res.get("path") == "warm" and booked:
            pass  # it finished before the kill
        else:
            bad.append("%s: exit %d %s %s, booked %s" % (bid, rc, out.strip()[-200:], err.strip()[-200:],
                                                         [(o["cause"], o.get("detail")) for o in booked]))
    claims = [bid for bid, (rc, out, _) in results.items() if "booked" in out and not finals.get(bid)]
    if claims:
        bad.insert(0, "%d clients told their run is booked, with no booking: %s" % (len(claims), sorted(claims)[:5]))
    if not cold or not started:
        bad.append("%d ran cold, %d started: the test proves nothing" % (cold, started))
    print("  %d requests: %d never started (ran cold, ok), %d started (booked 'executor died'), %d other"
          % (len(results), cold, started, len(results) - cold - started))
    return "; ".join(bad[:6]) + (" (+%d more)" % (len(bad) - 6) if len(bad) > 6 else "") or None


def t_hangup_leaves_line(env, ex):
    """A warm client that hangs up while its request waits in the admission
    line (the tenant's one slot is held): the request leaves the line at
    once, not when the slot frees, nothing of it ever runs, and it is
    booked once, final, attempt 0, platform_error "the caller hung up"
    (nothing ran: never the tenant's fault)."""
    env.policy("wm-line", concurrency=1, on_excess="wait", queue_timeout_ms=60000, timeout_ms=60000)
    go = os.path.join(env.progs, "go-hangup")
    queue = os.path.join(env.run, "tenants", "wm-line", "queue")

    def tickets():
        return [n for n in os.listdir(queue) if n.startswith("t-")] if os.path.isdir(queue) else []

    def client(batch_id, program, *args):
        p = subprocess.Popen([BIN, "exec", "--tenant", "wm-line", "--policy-dir", env.policies, "--batch", "-",
                              "--", PYTHON, os.path.join(env.progs, program)] + list(args),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env.env())
        p.stdin.write(json.dumps(batch(batch_id)).encode())
        p.stdin.close()
        p.stdin = None
        return p

    holder = client("line-holder", "rw_wait_go.py", go)
    bad = []
    try:
        if not wait_for(lambda: any(os.path.exists(os.path.join(env.scratch, "wm-line", d, "ready"))
                                    for d in env.sandboxes("wm-line")), 30):
            return "the holder never ran: the test proves nothing"
        waiter = client("line-gone", "rw_good.py")
        if not wait_for(lambda: tickets(), 30):
            waiter.kill()
            return "the second request never queued: the test proves nothing"
        waiter.kill()
        waiter.communicate(timeout=30)
        if not wait_for(lambda: not tickets(), 10):
            bad.append("its ticket stayed in the line after its client hung up: %s" % tickets())
        elif holder.poll() is not None:
            bad.append("the holder ended before the line emptied: the test proves nothing")
        booked = []
        wait_for(lambda: booked.extend(o for o in env.outcomes() if o.get("batch_id") == "line-gone") or booked, 10)
    finally:
        open(go, "w").close()
        out, _ = holder.communicate(timeout=60)
    if holder.returncode != 0:
        bad.append("the holder: exit %d %s" % (holder.returncode, out[-200:]))
    if len(booked) != 1 or not booked[0].get("final") or booked[0].get("attempt") != 0 or \
            booked[0].get("cause") != "platform_error" or "hung up" not in json.dumps(booked[0]):
        bad.append("booked %s, want one final attempt-0 platform_error 'the caller hung up'" % booked)
    return "; ".join(bad) or None


def t_clean_shutdown(env, ex):
    """SIGTERM: runs under way finish, then nothing of the executor is
    left: no sandbox cgroup, scratch, record or socket."""
    run_batch(env, "wm-same", "rw_good.py", batch("before-stop"))
    if not wait_for(lambda: env.sandboxes("wm-same"), 10):
        return "the pool prepared nothing: the test proves nothing"
    rc = ex.stop(signal.SIGTERM)
    bad = []
    if rc != 0:
        bad.append("exit %s" % rc)
    for tenant in ("wm-same", "wm-iso", "wm-many", "wm-reload", "wm-long", "wm-line", "wm-queue"):
        if env.sandboxes(tenant) or cgroup_dirs(env, tenant):
            bad.append("%s: scratch %s, cgroups %s" % (tenant, env.sandboxes(tenant), cgroup_dirs(env, tenant)))
    if records(env):
        bad.append("records %s" % records(env))
    if os.path.exists(os.path.join(env.run, "executor.sock")):
        bad.append("the socket")
    ex.start()
    return "; ".join(bad) or None


def t_socket_root_only(env, ex):
    """The socket is root's alone: mode 0600, and a connect from another
    uid is refused."""
    path = os.path.join(env.run, "executor.sock")
    st = os.stat(path)
    if st.st_uid != 0 or st.st_mode & 0o777 != 0o600:
        return "socket mode %o owner %d" % (st.st_mode & 0o777, st.st_uid)
    probe = ("import socket; s = socket.socket(socket.AF_UNIX)\n"
             "try:\n    s.connect(%r); print('connected')\nexcept OSError as e: print(e.errno)" % path)
    out = subprocess.run([PYTHON, "-c", probe], user=65534, group=65534, extra_groups=[],
                         capture_output=True, text=True, timeout=30).stdout.strip()
    if out == "connected":
        return "uid 65534 connected to the executor's socket"
    return None


CASES = [
    ("warm-same-result-as-cold", t_same_as_cold),
    ("warm-large-answer-whole", t_large_answer),
    ("warm-cold-fallbacks", t_cold_fallbacks),
    ("warm-verifier-tests-isolated-in-one-sandbox", t_verifier_isolated),
    ("warm-no-state-crosses-runs", t_no_state_crosses_runs),
    ("warm-client-stdin-and-cwd", t_stdin_cwd),
    ("warm-24-concurrent-booked-once", t_concurrent_booked_once),
    ("warm-policy-reload-drains-pool", t_policy_reload_drains),
    ("warm-socket-root-only", t_socket_root_only),
    ("warm-killed-executor-reaped-booked-once", t_killed_executor),
    ("warm-queued-killed-executor-never-started-run-cold", t_queued_killed_executor),
    ("warm-hangup-leaves-admission-line", t_hangup_leaves_line),
    ("warm-clean-shutdown-leaves-nothing", t_clean_shutdown),
]


def main():
    def setup(env):
        env.policy("wm-same", max_tasks=16)
        env.policy("wm-iso", concurrency=1)
        env.policy("wm-many", concurrency=32, cpu=0.25, timeout_ms=10000, queue_timeout_ms=120000)

    return run_suite(CASES, UID_BASE, "sgwarm-", setup)


if __name__ == "__main__":
    sys.exit(main())

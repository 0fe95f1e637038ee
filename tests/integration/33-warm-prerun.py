#!/usr/bin/python3
"""The first run's main process, forked by the sandbox's init ahead of the
run (src/sandbox/sandbox_child.c), as root with a `sandguard executor`:
while a prepared sandbox waits in the pool, its run's process already
exists in the run's cgroup, confined (the slot's uid, no capabilities,
no_new_privs, the seccomp filter) and holding nothing but its channel; it
is the very process that runs the tenant's program, which gets its
arguments, environment and stdin exactly; a sandbox torn down without a
run (a stop, a kill -9 of the executor) leaves none of these processes;
and a verifier's tests never see one beside them. Prints one
PASS/FAIL/SKIP line per case."""
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgtest import uid_base  # noqa: E402
from sgexecutor import (BIN, PYTHON, batch, exec_cli, procs, queued, run_suite,  # noqa: E402
                        wait_for, waiting)

UID_BASE = uid_base(66000)  # 32-warm uses 63000, 34-warm-interpreter 63500
TENANT = "wp-pool"
ARGS = ["a b", "", "\u00fc\nx", "-x", "--", "$HOME", "'q'"]


def status(pid):
    with open("/proc/%d/status" % pid) as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def prime(env):
    """One run of the tenant: the pool prepares for the tenants it serves."""
    exec_cli(env, ["--tenant", TENANT, "--policy-dir", env.policies, "--batch", "-", "--", PYTHON,
                   os.path.join(env.progs, "rw_good.py")], stdin=json.dumps(batch("wp-prime")).encode())


def pool_ready(env):
    """The tenant's prepared sandboxes, once at least one has its run's
    process waiting and the pool is still for a moment (its keeper done)."""
    prime(env)
    def settled():
        a = waiting(env, TENANT)
        time.sleep(0.3)
        b = waiting(env, TENANT)
        return b if a == b and any(len(w[1]) == 1 for w in b.values()) else None
    return wait_for(settled, 20) or {}


def t_waits_confined(env, ex):
    """In every prepared sandbox of the pool: init alone in the sandbox's
    cgroup, one process in the first run's cgroup, init's child, as the
    slot's uid and gid, with no capability, no_new_privs, the seccomp
    filter, and exactly one descriptor (a socket: its channel)."""
    pool = pool_ready(env)
    if not pool:
        return "no prepared sandbox has a process waiting in its first run's cgroup"
    bad = []
    for sb, (init, run) in pool.items():
        if len(init) != 1 or len(run) != 1:
            bad.append("%s: sandbox cgroup %s, run-1 %s" % (sb, init, run))
            continue
        st, pid = status(run[0]), run[0]
        uids = set(st["Uid"].split())
        gids = set(st["Gid"].split())
        slot = int(st["Uid"].split()[0])
        fds = os.listdir("/proc/%d/fd" % pid)
        links = [os.readlink("/proc/%d/fd/%s" % (pid, fd)) for fd in fds]
        if int(st["PPid"]) != init[0]:
            bad.append("%s: parent %s, not init %d" % (sb, st["PPid"], init[0]))
        if len(uids) != 1 or len(gids) != 1 or not UID_BASE <= slot < UID_BASE + 256 or \
                gids != {str(slot)} or st["Groups"].strip():
            bad.append("%s: uid %s gid %s groups %r" % (sb, st["Uid"], st["Gid"], st["Groups"]))
        if int(st["CapEff"], 16) or int(st["CapPrm"], 16) or st["NoNewPrivs"] != "1" or \
                st["Seccomp"] != "2":
            bad.append("%s: CapEff %s CapPrm %s NoNewPrivs %s Seccomp %s" %
                       (sb, st["CapEff"], st["CapPrm"], st["NoNewPrivs"], st["Seccomp"]))
        if len(links) != 1 or not links[0].startswith("socket:"):
            bad.append("%s: descriptors %s" % (sb, links))
    return "; ".join(bad) or None


def t_run_is_the_waiting_process(env, ex):
    """A warm run's program is the process that waited in the pool (the
    same host pid, in the sandbox handed out), and gets its arguments,
    environment, stdin and working directory exactly, the slot's uid,
    stdio and nothing else; a cold run of the same says the same."""
    pool = pool_ready(env)
    before = {sb: w[1][0] for sb, w in pool.items() if len(w[1]) == 1}
    if not before:
        return "no prepared sandbox has a process waiting: the test proves nothing"
    go = os.path.join(env.progs, "go-prerun")
    b = batch("wp-exact", 2)
    b["items"][1]["completion"] = "\u00e9\u4e2d\"\\\n" + "z" * 200000
    stdin = json.dumps(b, ensure_ascii=False).encode()
    cli = [BIN, "exec", "--tenant", TENANT, "--policy-dir", env.policies, "--batch", "-", "--", PYTHON,
           os.path.join(env.progs, "wp_probe.py"), go] + ARGS
    client = subprocess.Popen(cli, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=env.env())
    bad = []
    try:
        client.stdin.write(stdin)
        client.stdin.close()
        client.stdin = None
        sb = wait_for(lambda: next((s for s in os.listdir(os.path.join(env.scratch, TENANT))
                                    if os.path.exists(os.path.join(env.scratch, TENANT, s, "ready"))), None),
                      30)
        if not sb:
            return "the run never started"
        run1 = procs(os.path.join(env.cgroot, TENANT, sb, "run-1"))
        if sb not in before:
            bad.append("sandbox %s was not among the prepared ones %s: the test proves nothing" %
                       (sb, sorted(before)))
        elif run1 != [before[sb]]:
            bad.append("the program runs as %s, the process that waited was %d" % (run1, before[sb]))
    finally:
        open(go, "w").close()
        out, err = client.communicate(timeout=60)
    res = json.loads(out) if out.strip() else None
    if client.returncode != 0 or not res or res.get("path") != "warm":
        return "; ".join(bad + ["exit %d %s %s" % (client.returncode, out[-300:], err[-300:])])
    cold = exec_cli(env, ["--tenant", TENANT, "--policy-dir", env.policies, "--batch", "-", "--", PYTHON,
                          os.path.join(env.progs, "wp_probe.py"), go] + ARGS, stdin=stdin,
                    extra_env={"SANDGUARD_WARM": "0"})
    for name, r in (("warm", res), ("cold", cold[1])):
        try:
            got = json.loads(r["stderr"])
        except (TypeError, ValueError, KeyError):
            bad.append("%s: no report: %s" % (name, r))
            continue
        if got["args"] != ARGS:
            bad.append("%s: arguments %r" % (name, got["args"]))
        if got["stdin"] != [len(stdin), hashlib.sha256(stdin).hexdigest()]:
            bad.append("%s: stdin %s, sent %d bytes" % (name, got["stdin"], len(stdin)))
        if got["env"] != {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": got["cwd"]}:
            bad.append("%s: environment %s" % (name, got["env"]))
        if not got["cwd"].startswith(os.path.join(env.scratch, TENANT) + "/"):
            bad.append("%s: working directory %s" % (name, got["cwd"]))
        if not UID_BASE <= got["uid"] < UID_BASE + 256 or got["gid"] != got["uid"]:
            bad.append("%s: uid %d gid %d" % (name, got["uid"], got["gid"]))
        if got["fds"] != [0, 1, 2]:
            bad.append("%s: descriptors %s" % (name, got["fds"]))
    return "; ".join(bad) or None


def t_verifier_no_sibling(env, ex):
    """A verifier's tests in one sandbox: none of them, the first (run by
    the process that waited) included, finds another process beside it."""
    tests = [{"input": "check", "output": "clean"}] * 3
    path = os.path.join(env.dir, "tests-wp.json")
    with open(path, "w") as f:
        json.dump(tests, f)
    rc, res, err = exec_cli(env, ["--tenant", TENANT, "--policy-dir", env.policies, "--tests", path,
                                  "--batch-id", "wp-verify", "--", PYTHON,
                                  os.path.join(env.progs, "wm_leftovers.py")])
    if rc != 0 or not res or res.get("status") != "ok" or \
            [t.get("status") for t in res.get("tests") or []] != ["pass"] * 3:
        return "exit %d %s %s" % (rc, res, err[-300:])
    return None


def t_torn_down_without_run(env, ex):
    """The pool's sandboxes torn down without a run, by a stop and by a
    kill -9 of the executor: none of their waiting processes is left."""
    bad = []
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pool = pool_ready(env)
        pids = [w[1][0] for w in pool.values() if len(w[1]) == 1]
        if not pids:
            bad.append("%s: no process waiting: the test proves nothing" % sig.name)
            continue
        ex.stop(sig)
        if not wait_for(lambda: not any(alive(p) for p in pids), 15):
            bad.append("%s: left %s" % (sig.name, [p for p in pids if alive(p)]))
        ex.start()
    return "; ".join(bad) or None


def t_over_before_seen(env, ex):
    """A run that is over before its executor has seen it start (its
    init's READY, the run's exec and its DONE all queued together, as on a
    loaded node) is answered at once, as what it was: a cold run of a
    program that prints its scores and exits without reading the batch,
    with the executor's every poll delayed by 300 ms (strace), is ok with
    its scores, far inside its deadline, not the tenant's timeout."""
    if not shutil.which("strace"):
        return "strace is missing (scripts/install-deps.sh installs it)"
    run_env = env.env(SANDGUARD_WARM="0")
    if "ASAN_OPTIONS" in run_env:
        run_env["ASAN_OPTIONS"] += ":detect_leaks=0"  # LeakSanitizer stops under ptrace
    t0 = time.monotonic()
    p = subprocess.run(["strace", "-o", "/dev/null", "-e", "trace=poll", "-e",
                        "inject=poll:delay_enter=300ms", BIN, "exec", "--tenant", TENANT,
                        "--policy-dir", env.policies, "--batch", "-", "--", PYTHON,
                        os.path.join(env.progs, "rw_scores_at_once.py")],
                       input=json.dumps(batch("wp-over")).encode(), capture_output=True,
                       env=run_env, timeout=120)
    took = time.monotonic() - t0
    res = json.loads(p.stdout) if p.stdout.strip() else None
    if p.returncode != 0 or not res or res["cause"] != "ok" or res["scores"] != [0.5, 0.25, 0.125] \
            or res["path"] != "cold":
        return "exit %d after %.1f s: %s %s" % (p.returncode, took, p.stdout[-400:], p.stderr[-300:])
    if took > 30:
        return "answered after %.1f s (deadline 60 s)" % took
    return None


def t_killed_before_its_start(env, ex):
    """A run's process killed from outside after its START was sent and
    before it read it (a node-wide OOM kill, a stray kill) never ran any
    of the tenant's code: the attempt is a platform error, booked as one,
    never the tenant's crash (the run's report pipe closes the same way
    at an execve and at such an end: only main's word before its execve
    tells them apart)."""
    if not shutil.which("ss"):
        return "ss is missing (iproute2: scripts/install-deps.sh installs it)"
    pids = [w[1][0] for w in pool_ready(env).values() if len(w[1]) == 1]
    if not pids:
        return "no prepared sandbox has a process waiting: the test proves nothing"
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)  # whichever is taken holds its START unread
    client = subprocess.Popen([BIN, "exec", "--tenant", TENANT, "--policy-dir", env.policies,
                               "--batch", "-", "--", PYTHON, os.path.join(env.progs, "rw_good.py")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=env.env())
    try:
        client.stdin.write(json.dumps(batch("wp-killed")).encode())
        client.stdin.close()
        client.stdin = None
        victim = wait_for(lambda: next((p for p in pids if queued(p) > 0), None), 30)
        if victim:
            os.kill(victim, signal.SIGKILL)
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        out, err = client.communicate(timeout=120)
    if not victim:
        return "no START reached a waiting process: the test proves nothing (%s)" % out[-300:]
    res = json.loads(out) if out.strip() else None
    if not res or res.get("path") != "warm" or res["sandboxes"][0]["cause"] != "platform_error":
        return "want a warm first attempt booked platform_error, got exit %d %s %s" % (
            client.returncode, out[-500:], err[-300:])
    booked = [o.get("cause") for o in env.outcomes() if o.get("batch_id") == "wp-killed"]
    if not booked or booked[0] != "platform_error" or "tenant_crash" in booked:
        return "bookings %s, want platform_error first and no tenant_crash" % booked
    if res["cause"] == "platform_error" and "before it started the tenant's code" not in res["detail"]:
        return "the detail does not say why: %s" % res["detail"]
    return None


CASES = [
    ("prerun-waits-confined-holding-its-channel-only", t_waits_confined),
    ("prerun-run-is-the-waiting-process-and-gets-its-run-exactly", t_run_is_the_waiting_process),
    ("prerun-verifier-test-has-no-sibling", t_verifier_no_sibling),
    ("prerun-torn-down-without-run-leaves-no-process", t_torn_down_without_run),
    ("prerun-run-over-before-its-start-is-seen-is-answered-at-once", t_over_before_seen),
    ("prerun-killed-before-reading-its-start-is-a-platform-error", t_killed_before_its_start),
]


def main():
    def setup(env):
        env.policy(TENANT, concurrency=4, timeout_ms=60000)

    return run_suite(CASES, UID_BASE, "sgprerun-", setup)


if __name__ == "__main__":
    sys.exit(main())

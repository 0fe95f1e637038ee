#!/usr/bin/python3
"""sandguard exec end to end, as root, with real Python reward programs from
tests/programs/rw_*.py in real sandboxes. Each case asserts the exact cause
(and detail where it matters), the exit code, and that the tenant's scratch
is empty afterwards. State and run directories and the cgroup root are
temporary (sgexecutor.Env: the SANDGUARD_* overrides); so are the policies
(small limits). Prints one PASS/FAIL/SKIP line per case.

A killed executor and an overloaded node are 31-exec-overload.py; the
harness they share is sgexec.py."""
import fcntl
import json
import os
import random
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgtest import lock_held, uid_base  # noqa: E402
import sgexec  # noqa: E402

# our own slot uid range (20-sandbox uses 61000, 31-exec-overload 68300)
sgexec.UID_BASE = UID_BASE = uid_base(62000)
from sgexecutor import BIN, PYTHON, batch  # noqa: E402
from sgexec import (SEED, SLACK_MS, SLOTS, TIMEOUT_MS, exec_cli, expect, run_batch,  # noqa: E402
                    scratch_left, slot_uid_procs)


# ---- cases -------------------------------------------------------------

def t_good(env):
    rc, res, err, _ = run_batch(env, "rw-skip", "rw_good.py", batch("good-1"))
    why = expect(env, "rw-skip", rc, res, "ok", 0)
    if why:
        return why
    if res["scores"] != [1 / 7.0, 2 / 7.0, 3 / 7.0] or res["rule"] is not None or res["attempts"] != 1:
        return "unexpected result %s" % res
    if res["tenant"] != "rw-skip" or res["batch_id"] != "good-1":
        return "wrong identity in %s" % res
    # A run that ended in order leaves no in-flight file, not even the
    # released records' files it kept for reuse (.tmp-spare-*).
    inflight = os.path.join(env.run, "inflight")
    left = sorted(os.listdir(inflight)) if os.path.isdir(inflight) else []
    if left:
        return "in-flight files left after the run: %s" % left[:5]


def t_stopped_before_booking(env):
    """A cold sandbox serves one run: its init (and with it the PID
    namespace) is sent SIGKILL as soon as the run is over, before the
    outcome's journal append, so that the namespaces' teardown overlaps
    the booking's fdatasync instead of following the result. Nor is it
    ever reset, so at its READY the executor does not note (fstatat)
    what the root build made in its scratch: that is for a reset.
    Host side: the executor's own syscalls, in order (strace -f)."""
    trace = os.path.join(env.dir, "stop.strace")
    args = ["--tenant", "rw-skip", "--policy-dir", env.policies, "--batch", "-", "--", PYTHON,
            os.path.join(env.progs, "rw_good.py")]
    run_env = env.env(SANDGUARD_WARM="0")
    if "ASAN_OPTIONS" in run_env:
        # LeakSanitizer cannot run under ptrace (it stops with a fatal
        # error): the sanitizer stage's leak checks run everywhere else.
        run_env["ASAN_OPTIONS"] += ":detect_leaks=0"
    p = subprocess.run(["strace", "-f", "-yy", "-e", "trace=clone3,kill,flock,write,newfstatat", "-o", trace,
                        BIN, "exec"] + args, input=json.dumps(batch("stop-1")).encode(),
                       capture_output=True, env=run_env, timeout=120)
    res = json.loads(p.stdout) if p.stdout.strip() else None
    why = expect(env, "rw-skip", p.returncode, res, "ok", 0)
    if why:
        return why
    with open(trace) as f:
        lines = [ln.split(None, 1) for ln in f if ln.strip()]
    me = lines[0][0]
    init = next((ln[1].rsplit("= ", 1)[1].split()[0] for ln in lines
                 if ln[0] == me and ln[1].startswith("clone3(") and "CLONE_NEWPID" in ln[1]), None)
    order = [i for i, ln in enumerate(lines) if ln[0] == me and (
        ln[1].startswith("kill(%s, SIGKILL)" % init) or
        (ln[1].startswith("flock(") and "journal/.lock" in ln[1]) or ln[1].startswith("write(1<"))]
    seen = [lines[i][1].split("(")[0] + ("(journal)" if "journal" in lines[i][1] else "") for i in order]
    if not init or not seen or not seen[0].startswith("kill"):
        return "init %s: want its kill before the journal's lock and the result, got %s" % (init, seen)
    start = next(i for i, ln in enumerate(lines) if ln[0] == me and ln[1].startswith("clone3(")
                 and "CLONE_NEWPID" in ln[1])
    noted = [ln[1][:160] for ln in lines[start:] if ln[0] == me and ln[1].startswith("newfstatat(")
             and "/scratch/rw-skip/" in ln[1].split(",")[0] and '""' not in ln[1]]
    if noted:
        return "a one-run sandbox's scratch entries were noted after init started: %s" % noted


def host_scratch_mounts(env, tenant):
    """Mount points under the tenant's scratch directory, in the host's
    mount table."""
    under = os.path.join(env.scratch, tenant) + "/"
    with open("/proc/self/mountinfo") as f:
        return [ln.split()[4] for ln in f if ln.split()[4].startswith(under)]


def t_cold_scratch_detached(env):
    """A cold sandbox's only run: the host's mount of its scratch goes when
    the tenant's code starts, not after the result (its lazy unmount waits
    for an RCU grace period and its mount point's removal for the disk,
    which a caller waiting for the exit would pay). While the program runs,
    the host has neither the mount nor its directory; the program still
    writes and reads its scratch after that, and its result is ok."""
    go = os.path.join(env.progs, "go-detached")
    p = subprocess.Popen([BIN, "exec", "--tenant", "rw-skip", "--policy-dir", env.policies, "--batch", "-",
                          "--", PYTHON, os.path.join(env.progs, "rw_scratch_after_go.py"), go],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env.env(SANDGUARD_WARM="0"))
    p.stdin.write(json.dumps(batch("detached")).encode())
    p.stdin.close()
    p.stdin = None
    gone, held, deadline = False, None, time.monotonic() + 30
    try:
        # Until the program runs (its deadline is 2 s) with no scratch on
        # the host's side.
        while time.monotonic() < deadline and p.poll() is None and not gone:
            running = slot_uid_procs(env)
            mounts, dirs = host_scratch_mounts(env, "rw-skip"), scratch_left(env, "rw-skip")
            gone = bool(running) and not mounts and not dirs
            held = (mounts, dirs) if running and not gone else held
            time.sleep(0.02)
    finally:
        open(go, "w").close()
        out, err = p.communicate(timeout=120)
        os.unlink(go)
    if not gone:
        return "while the program ran, the host still had its scratch (mounts %s, directories %s); " \
            "exit %d %s" % (held and held[0], held and held[1], p.returncode, out.decode()[-200:])
    res = json.loads(out) if out.strip() else None
    why = expect(env, "rw-skip", p.returncode, res, "ok", 0)
    if why:
        return why
    if res["scores"] != [1.0] * 3:
        return "the program could not write and read its scratch after the host's unmount: %s" % res


def bad_output_case(program, detail=None, detail_has=None):
    def t(env):
        rc, res, err, _ = run_batch(env, "rw-skip", program, batch("bad"))
        why = expect(env, "rw-skip", rc, res, "tenant_bad_output", 1, detail=detail, detail_has=detail_has)
        if why:
            return why
        if res["scores"] is not None:
            return "scores were passed on: %s" % res["scores"]
    return t


def timeout_case(program):
    def t(env):
        rc, res, err, elapsed = run_batch(env, "rw-skip", program, batch("slow"))
        # The detail goes on with what the run got of the CPU. A node with
        # no idle CPU for the run's share (other work on a shared machine)
        # owes it one confirmation run (exec_confirm.c): then two runs,
        # and the detail says the deadline passed again.
        runs = 2 if res and "passed again in its confirmation run" in (res.get("detail") or "") else 1
        why = expect(env, "rw-skip", rc, res, "tenant_timeout", 1,
                     detail_has="deadline of %d ms passed%s: the sandbox was killed (it got " % (
                         TIMEOUT_MS, " again in its confirmation run with guaranteed CPU" if runs == 2 else ""))
        if why:
            return why
        if not TIMEOUT_MS - 100 <= elapsed <= runs * TIMEOUT_MS + SLACK_MS:
            return "took %d ms, want %d ms + at most %d" % (elapsed, runs * TIMEOUT_MS, SLACK_MS)
        if slot_uid_procs(env):
            return "processes left: %s" % slot_uid_procs(env)
    return t


def t_abort(env):
    rc, res, err, _ = run_batch(env, "rw-skip", "rw_abort.py", batch("abort"))
    return expect(env, "rw-skip", rc, res, "tenant_crash", 1, detail="killed by signal SIGABRT (6)")


def t_memory_hog(env):
    rc, res, err, _ = run_batch(env, "rw-skip", "rw_memory_hog.py", batch("hog"))
    return expect(env, "rw-skip", rc, res, "tenant_oom", 1, detail="memory limit of 128 MB exceeded")


def t_fork_bomb(env):
    rc, res, err, elapsed = run_batch(env, "rw-skip", "rw_fork_bomb.py", batch("bomb"))
    if res is None:
        return "the runner died: exit %d, %s" % (rc, err[-300:])
    if res["cause"] == "tenant_policy_violation":
        why = expect(env, "rw-skip", rc, res, "tenant_policy_violation", 1)
        if not why and res["rule"] != "fork":
            why = "rule %s, want fork" % res["rule"]
    else:
        why = expect(env, "rw-skip", rc, res, "tenant_timeout", 1)
    if why:
        return why
    # Killed at its deadline, each attempt: a timeout on a node with no
    # idle CPU is run once more, as a confirmation (exec_confirm.c).
    if elapsed > res["attempts"] * (TIMEOUT_MS + SLACK_MS):
        return "took %d ms in %d attempts" % (elapsed, res["attempts"])
    if slot_uid_procs(env):
        return "processes left: %s" % slot_uid_procs(env)


def t_daemon(env):
    rc, res, err, _ = run_batch(env, "rw-skip", "rw_daemon.py", batch("daemon"))
    why = expect(env, "rw-skip", rc, res, "ok", 0)
    if why:
        return why
    words = (res.get("stderr") or "").split()
    if len(words) < 2 or words[0] != "grandchild" or not words[1].isdigit():
        return "no grandchild pid in stderr %r" % res.get("stderr")
    pid = int(words[1])
    try:
        with open("/proc/%d/status" % pid) as f:
            st = f.read()
        uid = int(st.split("Uid:")[1].split()[0])
        state = st.split("State:")[1].split()[0]
        # A zombie is dead: it only waits for init (an orphan) to reap it.
        if UID_BASE <= uid < UID_BASE + SLOTS and state != "Z":
            return "daemonized grandchild %d still running (state %s)" % (pid, state)
    except OSError:
        pass
    if slot_uid_procs(env):
        return "processes left: %s" % slot_uid_procs(env)


SECRETS = {"SECRET_TOKEN": "hunter2-token-value", "AWS_SECRET_ACCESS_KEY": "aws-secret-value-42",
           "KUBERNETES_SERVICE_HOST": "10.96.0.1"}


def t_env_dump(env):
    rc, res, err, _ = run_batch(env, "rw-skip", "rw_env_dump.py", batch("env"), extra_env=SECRETS)
    why = expect(env, "rw-skip", rc, res, "ok", 0)
    if why:
        return why
    dumped = json.loads(res["stderr"])
    for k, v in SECRETS.items():
        if k in dumped or v in res["stderr"]:
            return "secret %s reached the reward program" % k
    extra = set(dumped) - {"PATH", "LANG", "HOME", "LC_CTYPE"}
    if extra:
        return "unexpected variables %s" % sorted(extra)
    if not dumped.get("HOME", "").startswith(env.scratch):
        return "HOME is %r, not the scratch" % dumped.get("HOME")


def t_write_outside(env):
    tag = "%d-%d" % (os.getpid(), random.randrange(1 << 30))
    outside = ["/tmp/sg-escape-" + tag, "/var/tmp/sg-escape-" + tag, "/dev/shm/sg-escape-" + tag,
               os.path.join(env.dir, "escape-" + tag), os.path.join(env.progs, "escape-" + tag)]
    b = {"batch_id": "write", "items": [{"prompt": "", "completion": p} for p in outside + ["inside.txt"]]}
    rc, res, err, _ = run_batch(env, "rw-skip", "rw_write_outside.py", b)
    why = expect(env, "rw-skip", rc, res, "ok", 0)
    left = [p for p in outside if os.path.exists(p)]
    for p in left:
        os.unlink(p)
    if why:
        return why
    if left:
        return "written outside the scratch: %s" % left
    # /tmp and /dev/shm are the sandbox's own (in its scratch): writable,
    # and nothing reached the host's (checked above).
    want = [1.0, 0.0, 1.0, 0.0, 0.0, 1.0]
    if res["scores"] != want:
        return "scores %s, want %s: every host path refused, the scratch, /tmp and /dev/shm writable" % (
            res["scores"], want)


def t_flaky_retry(env):
    """Every batch is booked exactly once as final; attempts are 1..k in
    order, the final one's cause is the result's, earlier ones are retryable
    tenant causes."""
    rnd = random.Random(SEED)
    kinds = ["good", "crash", "hang"] + ["flaky"] * 5 + [rnd.choice(["good", "flaky", "crash"]) for _ in range(4)]
    rnd.shuffle(kinds)
    results = {}
    before = len(env.outcomes())
    for i, kind in enumerate(kinds):
        bid = "%s-%d-%d" % (kind, SEED, i)
        rc, res, err, _ = run_batch(env, "rw-flaky", "rw_flaky.py", batch(bid, n=2))
        if res is None:
            return "batch %s: no result (exit %d): %s" % (bid, rc, err[-200:])
        if rc != {"ok": 0, "platform_error": 2}.get(res["cause"], 1):
            return "batch %s: exit %d for %s" % (bid, rc, res["cause"])
        results[bid] = res
        if scratch_left(env, "rw-flaky"):
            return "scratch left behind after %s" % bid
    lines = [o for o in env.outcomes()[before:] if o["tenant"] == "rw-flaky"]
    for bid, res in results.items():
        mine = [o for o in lines if o["batch_id"] == bid]
        finals = [o for o in mine if o["final"]]
        if len(finals) != 1:
            return "batch %s booked final %d times" % (bid, len(finals))
        if [o["attempt"] for o in mine] != list(range(1, len(mine) + 1)):
            return "batch %s: attempts %s" % (bid, [o["attempt"] for o in mine])
        # A timeout's confirmation run (a node without idle CPU) is one
        # attempt more than the policy's budget of 3.
        confirmations = sum(o.get("confirm") == "run" for o in mine)
        if not mine[-1]["final"] or len(mine) != res["attempts"] or len(mine) - confirmations > 3:
            return "batch %s: %d bookings for %d attempts" % (bid, len(mine), res["attempts"])
        if finals[0]["cause"] != res["cause"]:
            return "batch %s: final booked %s, result %s" % (bid, finals[0]["cause"], res["cause"])
        for o in mine[:-1]:
            if o["cause"] not in ("tenant_timeout", "tenant_crash", "tenant_oom", "tenant_bad_output",
                                  "platform_error"):
                return "batch %s retried after %s" % (bid, o["cause"])
        kind = bid.split("-")[0]
        if kind == "good" and (res["cause"] != "ok" or res["attempts"] != 1):
            return "good batch %s: %s after %d" % (bid, res["cause"], res["attempts"])
        if kind in ("crash", "hang") and res["attempts"] != 3:
            return "always-failing batch %s: %d attempts" % (bid, res["attempts"])
        if res["cause"] == "ok" and res["scores"] != [0.25, 0.25]:
            return "batch %s: scores %s" % (bid, res["scores"])
    if len(lines) != sum(r["attempts"] for r in results.values()):
        return "%d bookings for %d attempts" % (len(lines), sum(r["attempts"] for r in results.values()))


def t_pause_resume(env):
    rc, res, err, _ = run_batch(env, "rw-pause", "rw_abort.py", batch("p1"))
    why = expect(env, "rw-pause", rc, res, "tenant_crash", 1,
                 detail_has="tenant rw-pause paused until 'sandguard tenant resume rw-pause'")
    if why:
        return why
    rc, res, err, _ = run_batch(env, "rw-pause", "rw_good.py", batch("p2"))
    why = expect(env, "rw-pause", rc, res, "tenant_paused", 1,
                 detail_has="; resume with 'sandguard tenant resume rw-pause'")
    if why:
        return why
    if res["attempts"] != 0:
        return "a paused tenant's batch ran: %s" % res
    p = subprocess.run([BIN, "tenant", "list", "--json"], capture_output=True, env=env.env())
    listed = json.loads(p.stdout)
    if p.returncode != 0 or [t["tenant"] for t in listed] != ["rw-pause"] \
            or "batch p1: tenant_crash" not in listed[0]["reason"]:
        return "tenant list --json: %s" % p.stdout
    p = subprocess.run([BIN, "tenant", "resume", "rw-pause"], capture_output=True, env=env.env())
    if p.returncode != 0 or p.stdout.decode() != "tenant rw-pause resumed\n":
        return "tenant resume: exit %d %s" % (p.returncode, p.stdout)
    rc, res, err, _ = run_batch(env, "rw-pause", "rw_good.py", batch("p3"))
    return expect(env, "rw-pause", rc, res, "ok", 0)


def t_tenant_cli(env):
    e = env.env()
    cmds = [
        (["pause", "rw-manual", "--reason", "security review"], 0, "tenant rw-manual paused\n"),
        (["list"], 0, None),
        (["resume", "rw-manual"], 0, "tenant rw-manual resumed\n"),
        (["resume", "rw-manual"], 0, "tenant rw-manual was not paused\n"),
        (["pause", "Bad/Name"], 64, ""),
        (["frobnicate"], 64, ""),
    ]
    for args, want_rc, want_out in cmds:
        p = subprocess.run([BIN, "tenant"] + args, capture_output=True, env=e)
        if p.returncode != want_rc:
            return "tenant %s: exit %d, want %d" % (" ".join(args), p.returncode, want_rc)
        if want_out is not None and p.stdout.decode() != want_out:
            return "tenant %s: stdout %r" % (" ".join(args), p.stdout)
        if args == ["list"] and "rw-manual" not in p.stdout.decode() or \
                args == ["list"] and "security review" not in p.stdout.decode():
            return "tenant list: %r" % p.stdout


ACCOUNT_UID = 65534  # nobody, and gid nogroup: on every Debian


def t_slot_of_an_account_skipped(env):
    """A slot whose uid names an account is skipped, though the executor
    looks the uid up (NSS) only after the sandbox's init is cloned, so that
    the lookup overlaps init's set-up: the first run's main, forked ahead,
    waits for the executor's word before it takes the slot's identity. A
    range whose last slot is nobody's uid, every other slot but the first
    held by the test: the run gets the first, and no process of the
    executor's ever takes nobody's uid (strace -f: no setresuid to it, with
    the lookup slowed down), in three runs (the range is walked from a
    random slot, so at least one meets nobody's first)."""
    import pwd
    try:
        pwd.getpwuid(ACCOUNT_UID)
    except KeyError:
        return "no account with uid %d on this machine" % ACCOUNT_UID
    base = ACCOUNT_UID - SLOTS + 1
    held = []
    try:
        os.makedirs("/run/sandguard/slots", mode=0o700, exist_ok=True)
        for uid in range(base + 1, ACCOUNT_UID):
            fd = os.open("/run/sandguard/slots/%d.lock" % uid, os.O_RDWR | os.O_CREAT, 0o600)
            held.append(fd)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        run_env = env.env(SANDGUARD_WARM="0", SANDGUARD_UID_BASE=str(base))
        if "ASAN_OPTIONS" in run_env:
            run_env["ASAN_OPTIONS"] += ":detect_leaks=0"  # LeakSanitizer stops under ptrace
        warned = 0
        for i in range(3):
            trace = os.path.join(env.dir, "slots-%d.strace" % i)
            # Each connect waits 300 ms (the NSS modules' lookups connect
            # to their services): init is set up and its main forked
            # long before the check ends, as on a node with a slow NSS.
            p = subprocess.run(["strace", "-f", "-e", "trace=setresuid,setuid,connect", "-e",
                                "inject=connect:delay_enter=300ms", "-o", trace, BIN, "exec",
                                "--tenant", "rw-skip", "--policy-dir", env.policies, "--batch", "-", "--",
                                PYTHON, os.path.join(env.progs, "rw_uid.py")],
                               input=json.dumps(batch("slots-%d" % i)).encode(), capture_output=True,
                               env=run_env, timeout=120)
            res = json.loads(p.stdout) if p.stdout.strip() else None
            why = expect(env, "rw-skip", p.returncode, res, "ok", 0)
            if why:
                return why
            if res["scores"] != [float(base)] * 3:
                return "run %d ran as uid %s, want the free slot %d" % (i, res["scores"], base)
            with open(trace) as f:
                took = [ln.strip() for ln in f if "setresuid(%d" % ACCOUNT_UID in ln
                        or "setuid(%d" % ACCOUNT_UID in ln]
            if took:
                return "a process took uid %d, an account's: %s" % (ACCOUNT_UID, took[:3])
            warned += "belongs to an existing user or group" in p.stderr.decode()
        if not warned:
            return "no run met the account's slot (three random starts): the test proves nothing"
    finally:
        for fd in held:
            os.close(fd)


def t_slots_full_waits(env):
    """Every uid slot of the node taken (the test holds all 256 lock files of
    the suite's range): a run waits for one rather than failing as a
    platform error; the test frees one slot a second later, and the run
    gets exactly that one (its program scores with its own uid) and is ok,
    in one attempt."""
    held = {}
    os.makedirs("/run/sandguard/slots", mode=0o700, exist_ok=True)
    try:
        for uid in range(UID_BASE, UID_BASE + SLOTS):
            fd = os.open("/run/sandguard/slots/%d.lock" % uid, os.O_RDWR | os.O_CREAT, 0o600)
            held[uid] = fd
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        p = subprocess.Popen([BIN, "exec", "--tenant", "rw-skip", "--policy-dir", env.policies, "--batch", "-",
                              "--", PYTHON, os.path.join(env.progs, "rw_uid.py")], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env.env(SANDGUARD_WARM="0"))
        p.stdin.write(json.dumps(batch("slots-full")).encode())
        p.stdin.close()
        p.stdin = None
        time.sleep(1)
        if p.poll() is not None:
            return "the run ended while every slot was taken: %s" % p.stdout.read().decode()[-300:]
        freed = UID_BASE + SLOTS // 2
        os.close(held.pop(freed))
        out, err = p.communicate(timeout=120)
        res = json.loads(out) if out.strip() else None
        why = expect(env, "rw-skip", p.returncode, res, "ok", 0)
        if why:
            return why
        if res["scores"] != [float(freed)] * 3 or res.get("attempts") != 1:
            return "ran as uid %s in %s attempts, want the freed slot %d in one" % (
                res["scores"], res.get("attempts"), freed)
        return None
    finally:
        for fd in held.values():
            os.close(fd)


def t_concurrency_refused(env):
    d = os.path.join(env.run, "tenants", "rw-cap")
    os.makedirs(d, exist_ok=True)
    fd = os.open(os.path.join(d, "slot-0.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        rc, res, err, _ = run_batch(env, "rw-cap", "rw_good.py", batch("cap"))
        why = expect(env, "rw-cap", rc, res, "platform_error", 2,
                     detail="platform error: concurrency cap reached: 1 sandboxes of tenant rw-cap "
                            "already running on this node (on_excess refuse); retry later")
        if why:
            return why
        if res["attempts"] != 0:
            return "a refused batch ran"
    finally:
        os.close(fd)
    rc, res, err, _ = run_batch(env, "rw-cap", "rw_good.py", batch("cap2"))
    return expect(env, "rw-cap", rc, res, "ok", 0)


def t_require_agent(env):
    rc, res, err, _ = run_batch(env, "rw-agent", "rw_good.py", batch("agent"))
    return expect(env, "rw-agent", rc, res, "platform_error", 2,
                  detail="platform error: the policy of tenant rw-agent requires the agent (require_agent), "
                         "but no agent answers at %s" % os.path.join(env.dir, "no-agent.sock"))


def t_policy_unreadable(env):
    with open(os.path.join(env.policies, "rw-broken.json"), "w") as f:
        f.write('{"tenant": "rw-broken", "limits": {"timeout_ms": "soon"}}')
    rc, res, err, _ = run_batch(env, "rw-broken", "rw_good.py", batch("broken"))
    return expect(env, "rw-broken", rc, res, "platform_error", 2, detail_has="cannot load the policy: ")


def t_verifier(env):
    tests = [{"input": "1 2\n", "output": "3\n"}, {"input": "10 20 30", "output": "60"},
             {"input": "-5 5", "output": "0\r\n\n"}]
    path = os.path.join(env.dir, "tests.json")
    with open(path, "w") as f:
        json.dump(tests, f)
    want = {"rw_sum.py": (1, ["pass"] * 3), "rw_sum_wrong.py": (0, ["fail"] * 3),
            "rw_sum_slow.py": (0, ["timeout"] * 3)}
    for program, (reward, statuses) in want.items():
        rc, res, err, elapsed = exec_cli(env, ["--tenant", "rw-verify", "--policy-dir", env.policies,
                                               "--tests", path, "--timeout-ms", "1000", "--batch-id", "v-" + program,
                                               "--", PYTHON, os.path.join(env.progs, program)])
        why = expect(env, "rw-verify", rc, res, "ok", 0)
        if why:
            return "%s: %s" % (program, why)
        if res["reward"] != reward or [t["status"] for t in res["tests"]] != statuses:
            return "%s: reward %s, tests %s" % (program, res["reward"], res["tests"])
        if res["batch_id"] != "v-" + program:
            return "%s: batch_id %s" % (program, res["batch_id"])
        if program == "rw_sum_slow.py" and elapsed > 3 * (1000 + SLACK_MS):
            return "three 1 s timeouts took %d ms" % elapsed


def t_verifier_oom_in_reused_sandbox(env):
    """Each worker's second test runs in its sandbox put back (its counter
    files kept open since it was made, read again at offset 0): an OOM
    there is still the test's "oom", a pass still a pass."""
    tests = [{"input": "1 2\n", "output": "3\n"}, {"input": "3 4\n", "output": "7\n"},
             {"input": "hog", "output": "0"}, {"input": "hog", "output": "0"},
             {"input": "5 6\n", "output": "11\n"}]
    path = os.path.join(env.dir, "tests-oom.json")
    with open(path, "w") as f:
        json.dump(tests, f)
    rc, res, err, _ = exec_cli(env, ["--tenant", "rw-verify", "--policy-dir", env.policies,
                                     "--tests", path, "--timeout-ms", "2000", "--batch-id", "v-oom",
                                     "--", PYTHON, os.path.join(env.progs, "rw_sum_or_hog.py")])
    why = expect(env, "rw-verify", rc, res, "ok", 0)
    if why:
        return why + ": " + err[-300:]
    statuses = [t["status"] for t in res["tests"]]
    if statuses != ["pass", "pass", "oom", "oom", "pass"] or res["reward"] != 0:
        return "reward %s, tests %s" % (res["reward"], res["tests"])
    if len({s["sandbox"] for s in res.get("sandboxes", [])}) >= len(tests):
        return "no sandbox was reused: %s" % res.get("sandboxes")


def slots_held(env, tenant, n):
    """How many of the tenant's first n concurrency slots someone holds."""
    return sum(lock_held(os.path.join(env.run, "tenants", tenant, "slot-%d.lock" % i)) for i in range(n))


def t_verifier_idle_slot_given_back(env):
    """A request takes a slot per worker (two here), and a worker gives its
    slot back as soon as no test is left for it: while the request's other
    test runs to its deadline, another request of the tenant (concurrency
    2, on_excess refuse) is admitted and runs, not refused for a slot that
    sits idle."""
    if (os.cpu_count() or 1) < 2:
        return "SKIP needs 2 CPUs: a request takes one slot per CPU at most"
    tests = os.path.join(env.dir, "tests-hang.json")
    with open(tests, "w") as f:
        json.dump([{"input": "1 2\n", "output": "3\n"}, {"input": "hang", "output": "0"}], f)
    one = os.path.join(env.dir, "tests-one.json")
    with open(one, "w") as f:
        json.dump([{"input": "4 5\n", "output": "9\n"}], f)
    prog = ["--", PYTHON, os.path.join(env.progs, "rw_sum_or_hang.py")]
    a = subprocess.Popen([BIN, "exec", "--tenant", "rw-pair", "--policy-dir", env.policies, "--tests", tests,
                          "--timeout-ms", "8000", "--batch-id", "pair-a"] + prog,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env.env())
    try:
        # Both slots held, then one given back while the request runs.
        start, deadline, seen = time.monotonic(), time.monotonic() + 7, 0
        while seen < 2:
            if time.monotonic() > deadline or a.poll() is not None:
                return "no slot was given back while the request's other test ran (slots held: %s%s)" % (
                    slots_held(env, "rw-pair", 2),
                    "" if a.poll() is None else "; it ended: %r" % (a.communicate(),))
            seen = seen + 1 if time.monotonic() - start > 1 and slots_held(env, "rw-pair", 2) == 1 else 0
            time.sleep(0.1)
        rc, res, err, _ = exec_cli(env, ["--tenant", "rw-pair", "--policy-dir", env.policies, "--tests", one,
                                         "--timeout-ms", "4000", "--batch-id", "pair-b"] + prog)
        if a.poll() is not None:
            return "the first request ended before the second did: not a test of two at once"
        # (expect() would see the first request's sandbox in the scratch)
        if rc != 0 or not res or res.get("cause") != "ok" or res["reward"] != 1:
            return "the second request, beside one test running: exit %d, %s" % (
                rc, json.dumps(res)[:300] if res else err[-300:])
        out, _ = a.communicate(timeout=60)
        first = json.loads(out)
        if len({b["sandbox"] for b in first.get("sandboxes", [])}) != 2:
            return "the first request ran on %s, not two slots' sandboxes" % first.get("sandboxes")
        if [t["status"] for t in first["tests"]] != ["pass", "timeout"] or first["reward"] != 0:
            return "the first request: reward %s, tests %s" % (first["reward"], first["tests"])
        if scratch_left(env, "rw-pair"):
            return "scratch left behind: %s" % scratch_left(env, "rw-pair")
    finally:
        if a.poll() is None:
            a.kill()
            a.wait()


def t_usage(env):
    with open(os.path.join(env.dir, "batch.json"), "w") as f:
        json.dump(batch("u"), f)
    good = os.path.join(env.dir, "batch.json")
    badjson = os.path.join(env.dir, "bad.json")
    with open(badjson, "w") as f:
        f.write('{"batch_id": "x", "items": []}')
    prog = ["--", PYTHON, os.path.join(env.progs, "rw_good.py")]
    cases = [
        ([] + ["--batch", good] + prog, "--tenant is required"),
        (["--tenant", "Bad/Name", "--batch", good] + prog, "invalid tenant name 'Bad/Name'"),
        (["--tenant", "rw-skip", "--policy-dir", env.policies] + prog, "give exactly one of --batch FILE and --tests FILE"),
        (["--tenant", "rw-skip", "--batch", good, "--tests", good] + prog, "give exactly one of --batch FILE and --tests FILE"),
        (["--tenant", "rw-skip", "--batch", good], "missing the command"),
        (["--tenant", "rw-skip", "--batch", good, PYTHON], "the command must follow '--'"),
        (["--tenant", "rw-skip", "--batch", os.path.join(env.dir, "missing.json")] + prog,
         "cannot read batch file '%s': No such file or directory" % os.path.join(env.dir, "missing.json")),
        (["--tenant", "rw-skip", "--batch", badjson] + prog,
         "%s: \"items\" is empty: a batch needs at least one item" % badjson),
        (["--tenant", "rw-skip", "--batch", good, "--timeout-ms", "abc"] + prog,
         "--timeout-ms must be a positive integer (milliseconds), got 'abc'"),
        (["--tenant", "rw-skip", "--policy-dir", env.policies, "--batch", good, "--timeout-ms", "999999"] + prog,
         "--timeout-ms 999999 exceeds the policy's timeout_ms %d" % TIMEOUT_MS),
        (["--tenant", "rw-skip", "--frob", "--batch", good] + prog, "unknown option '--frob'"),
        (["--tenant", "rw-skip", "--batch"], "option '--batch' needs a value"),
    ]
    before = len(env.outcomes())
    for args, msg in cases:
        rc, res, err, _ = exec_cli(env, args)
        if rc != 64:
            return "%s: exit %d, want 64 (%s)" % (args, rc, err.strip())
        if res is not None:
            return "%s: printed a result on a usage error" % args
        if msg not in err:
            return "%s: stderr %r lacks %r" % (args, err, msg)
    if len(env.outcomes()) != before:
        return "a usage error was booked"
    rc, res, err, _ = exec_cli(env, ["--tenant", "rw-skip", "--batch", "-"] + prog, stdin=b'{"batch_id": 1}')
    if rc != 64 or "<stdin>: \"batch_id\" must be a string, got a number" not in err:
        return "malformed stdin batch: exit %d, %r" % (rc, err)


CASES = [
    ("exec-good-ok", t_good),
    ("exec-cold-init-stopped-before-booking", t_stopped_before_booking),
    ("exec-cold-scratch-detached-during-run", t_cold_scratch_detached),
    ("exec-nan-bad-output", bad_output_case("rw_nan.py", detail="score at index 0 is NaN, not a finite number")),
    ("exec-wrong-length-bad-output", bad_output_case("rw_wrong_length.py", detail="expected 3 scores, got 1")),
    ("exec-trailing-garbage-bad-output", bad_output_case(
        "rw_trailing_garbage.py", detail="trailing garbage after the array at byte 16: 'done?'")),
    ("exec-100mb-stdout-bad-output", bad_output_case("rw_stdout_flood.py", detail_has="oversized")),
    ("exec-hang-timeout", timeout_case("rw_hang.py")),
    ("exec-close-stdout-sleep-timeout", timeout_case("rw_close_stdout_sleep.py")),
    ("exec-abort-crash", t_abort),
    ("exec-memory-hog-oom", t_memory_hog),
    ("exec-fork-bomb-bounded", t_fork_bomb),
    ("exec-slots-full-waits-for-one", t_slots_full_waits),
    ("exec-daemon-grandchild-killed", t_daemon),
    ("exec-env-no-secrets", t_env_dump),
    ("exec-write-outside-scratch-refused", t_write_outside),
    ("exec-flaky-retry-booked-once", t_flaky_retry),
    ("exec-pause-refuse-resume", t_pause_resume),
    ("exec-tenant-cli", t_tenant_cli),
    ("exec-slot-of-an-account-skipped", t_slot_of_an_account_skipped),
    ("exec-concurrency-refused-platform", t_concurrency_refused),
    ("exec-require-agent-refused", t_require_agent),
    ("exec-policy-unreadable-platform", t_policy_unreadable),
    ("exec-verifier-mode", t_verifier),
    ("exec-verifier-oom-in-reused-sandbox", t_verifier_oom_in_reused_sandbox),
    ("exec-verifier-idle-slot-given-back", t_verifier_idle_slot_given_back),
    ("exec-usage-errors", t_usage),
]


if __name__ == "__main__":
    sys.exit(sgexec.main(CASES))

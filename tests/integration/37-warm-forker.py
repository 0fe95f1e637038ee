#!/usr/bin/python3
"""The init forker (src/sandbox/sandbox_forker.h), as root with a
`sandguard executor`: the executor starts a small process that clones
every prepared sandbox's init, so no init is a fork of the executor (none
maps the stack of any of the executor's threads, where the pool's keeper
used to fork it), each init is still the executor's child, and a `kill -9`
of the executor leaves neither the forker nor any init running, and the
next start reclaims their sandboxes; a killed forker leaves the executor
cloning its inits itself; and `sandguard serve` has one too. Prints one PASS/FAIL/SKIP line per
case."""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgtest import uid_base  # noqa: E402
from sgexecutor import PYTHON, batch, exec_cli, run_suite, waiting  # noqa: E402
import json  # noqa: E402

UID_BASE = uid_base(67000)  # 36-warm-threads uses 66500
TENANT = "wf-pool"


def stat(pid):
    """(comm, state, ppid) of a process; None once it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read()
    except OSError:
        return None
    comm = s[s.index("(") + 1:s.rindex(")")]
    rest = s[s.rindex(")") + 2:].split()
    return comm, rest[0], int(rest[1])


def alive(pid):
    st = stat(pid)
    return st is not None and st[1] != "Z"


def children(pid):
    out = []
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def forkers(pid, wait_s=5):
    """The executor's forker: forked before its "ready" line, it names
    itself just after the fork, which a loaded node may not have run yet.
    An init it has just cloned (the executor's child too) bears its name
    until it names itself: more than one is looked at again until then."""
    deadline = time.monotonic() + wait_s
    while True:
        found = [c for c in children(pid) if (stat(c) or ("",))[0] == "sg-forker"]
        if len(found) == 1 or time.monotonic() >= deadline:
            return found
        time.sleep(0.05)


def thread_stacks(pid):
    """The mappings holding the stack pointer of each of the executor's
    threads but the first (from /proc/PID/task/TID/syscall)."""
    with open("/proc/%d/maps" % pid) as f:
        maps = [tuple(int(x, 16) for x in line.split()[0].split("-")) for line in f]
    out = set()
    for tid in os.listdir("/proc/%d/task" % pid):
        if int(tid) == pid:
            continue
        try:
            with open("/proc/%d/task/%s/syscall" % (pid, tid)) as f:
                fields = f.read().split()
        except OSError:
            continue
        if len(fields) < 9:
            continue  # running: no stack pointer shown
        sp = int(fields[7], 16)
        out |= {m for m in maps if m[0] <= sp < m[1]}
    return out


def waiting_inits(env, tenant=TENANT, seconds=20):
    """The inits of the tenant's prepared sandboxes, once there are some."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ps = sorted(p for init, _ in waiting(env, tenant).values() for p in init)
        if ps:
            time.sleep(0.5)
            return sorted(p for init, _ in waiting(env, tenant).values() for p in init)
        time.sleep(0.2)
    return []


def run(env, tenant=TENANT, n=2, timeout=300, extra_env=None):
    """A warm run (the client's SANDGUARD_* environment must be the
    executor's: extra_env is what the executor was started with)."""
    bid = "wf-%d" % time.monotonic_ns()
    rc, res, err = exec_cli(env, ["--tenant", tenant, "--policy-dir", env.policies, "--batch", "-",
                                  "--", PYTHON, os.path.join(env.progs, "rw_good.py")],
                            stdin=json.dumps(batch(bid, n)).encode(), timeout=timeout,
                            extra_env=extra_env)
    if rc or not res or res.get("path") != "warm" or len(res.get("scores") or []) != n:
        return "run: rc %d %s %s" % (rc, res, err[-300:])
    return None


def t_inits_not_forks_of_the_executor(env, ex):
    """After runs (the pool refilled by its keeper), the executor has one
    forker child; each prepared init is the executor's child and maps none
    of its threads' stacks."""
    pid = ex.proc.pid
    for _ in range(2):
        why = run(env)
        if why:
            return why
    fk = forkers(pid)
    if len(fk) != 1:
        return "the executor's forker children: %s (want one)" % fk
    ps = waiting_inits(env)
    if not ps:
        return "no prepared sandbox's init found"
    stacks = thread_stacks(pid)
    if not stacks:
        return "no thread of the executor shows a stack: the test proves nothing"
    bad = []
    for p in ps:
        st = stat(p)
        if st and st[2] != pid:
            bad.append("init %d's parent is %d, not the executor %d" % (p, st[2], pid))
        with open("/proc/%d/maps" % p) as f:
            mine = {tuple(int(x, 16) for x in line.split()[0].split("-")) for line in f}
        both = mine & stacks
        if both:
            bad.append("init %d maps the executor's thread stacks %s" %
                       (p, ["%x-%x" % m for m in sorted(both)]))
    return "; ".join(bad) or None


def t_killed_executor_leaves_nothing(env, ex):
    """kill -9 of the executor: the forker and every init end with it,
    and the next start reclaims their sandboxes and still runs warm."""
    why = run(env)
    if why:
        return why
    pid = ex.proc.pid
    fk = forkers(pid)
    ps = waiting_inits(env)
    if not fk or not ps:
        return "forker %s, inits %s: the test proves nothing" % (fk, ps)
    left = set(waiting(env, TENANT))
    ex.stop(signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(alive(p) for p in fk + ps):
        time.sleep(0.1)
    bad = ["%s %d still runs after kill -9 of the executor" % ("forker" if p in fk else "init", p)
           for p in fk + ps if alive(p)]
    ex.start()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and left & set(waiting(env, TENANT)):
        time.sleep(0.2)
    if left & set(waiting(env, TENANT)):
        bad.append("sandboxes left after the next start: %s" % sorted(left & set(waiting(env, TENANT))))
    if len(forkers(ex.proc.pid)) != 1:
        bad.append("the new executor has no forker")
    why = run(env)
    if why:
        bad.append(why)
    return "; ".join(bad) or None


def t_clean_shutdown_ends_forker(env, ex):
    """SIGTERM: the executor stops and its forker is gone with it."""
    fk = forkers(ex.proc.pid)
    if not fk:
        return "no forker: the test proves nothing"
    rc = ex.stop(signal.SIGTERM)
    bad = [] if rc == 0 else ["exit %s" % rc]
    if any(alive(p) for p in fk):
        bad.append("forker %s still runs" % fk)
    ex.start()
    return "; ".join(bad) or None


def t_forker_killed_falls_back(env, ex):
    """The forker killed: the executor's next sandboxes are cloned by the
    executor itself, and runs still go warm."""
    fk = forkers(ex.proc.pid)
    if not fk:
        return "no forker: the test proves nothing"
    os.kill(fk[0], signal.SIGKILL)
    bad = []
    for _ in range(3):
        why = run(env)
        if why:
            bad.append(why)
    ps = waiting_inits(env)
    if not ps or any((stat(p) or ("", "", 0))[2] != ex.proc.pid for p in ps):
        bad.append("prepared inits after the forker's death: %s" % ps)
    ex.stop()
    ex.start()
    return "; ".join(bad) or None


REPLY_MS = 1500  # the forker's deadline for this case (SANDGUARD_FORKER_REPLY_MS)


def t_forker_stopped_given_up(env, ex):
    """The forker stopped (SIGSTOP: stuck, as a forker in an endless clone
    would be): the executor gives up on it at its deadline, kills it and
    clones its inits itself; runs still go warm, none waits for ever, and
    the executor still stops. Then a stopped forker at a SIGTERM: the
    executor still stops (its forker killed, not only hung up on)."""
    ex.stop()
    ex.extra = {"SANDGUARD_FORKER_REPLY_MS": str(REPLY_MS)}
    bad = []
    try:
        ex.start()
        why = run(env, extra_env=ex.extra)  # the tenant's pool is made at its first run
        if why:
            return why
        fk = forkers(ex.proc.pid)
        before = set(waiting_inits(env))
        if len(fk) != 1 or not before:
            return "forker %s, no prepared sandbox: the test proves nothing" % fk
        os.kill(fk[0], signal.SIGSTOP)
        for i in range(4):  # the pool's spares are used up: new inits are needed
            t0 = time.monotonic()
            try:
                why = run(env, timeout=60, extra_env=ex.extra)
            except Exception as e:  # a run stuck behind the forker
                why = "run %d: %s" % (i, e)
            if why:
                bad.append(why)
            elif time.monotonic() - t0 > 30:
                bad.append("run %d took %.0f s" % (i, time.monotonic() - t0))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and "no answer to a clone" not in ex.tail():
            time.sleep(0.2)
        if "no answer to a clone within %d ms" % REPLY_MS not in ex.tail():
            bad.append("no warning that the forker was given up on: %s" % ex.tail()[-300:])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and alive(fk[0]):
            time.sleep(0.1)
        if alive(fk[0]):
            bad.append("the stopped forker %d was not killed" % fk[0])
        # Inits made after it was given up on: the executor's own clones.
        ps = [p for p in waiting_inits(env) if p not in before]
        if not ps or any((stat(p) or ("", "", 0))[2] != ex.proc.pid for p in ps):
            bad.append("no init made after the forker was given up on, or not the "
                       "executor's child: %s (before the stop: %s)" % (ps, sorted(before)))
        ex.stop()
        ex.start()
        fk = forkers(ex.proc.pid)
        if len(fk) != 1:
            return "; ".join(bad + ["the next executor's forker: %s" % fk])
        os.kill(fk[0], signal.SIGSTOP)
        try:
            rc = ex.stop(signal.SIGTERM)
            if rc != 0:
                bad.append("SIGTERM with a stopped forker: exit %s" % rc)
        except Exception as e:
            bad.append("SIGTERM with a stopped forker: the executor did not stop (%s)" % e)
            os.kill(fk[0], signal.SIGKILL)
            ex.stop(signal.SIGKILL)
        if alive(fk[0]):
            bad.append("the stopped forker %d outlived the executor" % fk[0])
    finally:
        ex.stop(signal.SIGKILL)
        ex.extra = {}
        ex.start()
    return "; ".join(bad) or None


def t_serve_forker(env, ex):
    """`sandguard serve` too: its inits are its children, cloned by its
    forker (none maps its threads' stacks), and a `kill -9` of serve
    leaves neither the forker nor any init running."""
    import sgserve
    senv = sgserve.Env()
    srv = None
    bad = []
    try:
        senv.policy("acme")
        srv = sgserve.Server(senv)
        prog = os.path.join(senv.progs, "rw_good.py")
        for i in range(3):
            st, _, res = srv.post("/v1/score", {"tenant": "acme", "command": [PYTHON, prog],
                                                "batch": batch("wf-serve-%d" % i, 2)})
            if st != 200 or res.get("cause") != "ok":
                return "/v1/score: HTTP %d %s" % (st, res)
        pid = srv.proc.pid
        fk = forkers(pid)
        deadline = time.monotonic() + 20
        inits = []
        while time.monotonic() < deadline and not inits:
            time.sleep(0.3)
            inits = [c for c in children(pid) if c not in fk and (stat(c) or ("",))[0] != "sg-forker"]
        if len(fk) != 1 or not inits:
            return "serve's forker %s, inits %s (want one forker and some inits)" % (fk, inits)
        stacks = thread_stacks(pid)
        for p in inits:
            try:
                with open("/proc/%d/maps" % p) as f:
                    mine = {tuple(int(x, 16) for x in line.split()[0].split("-")) for line in f}
            except OSError:
                continue
            if mine & stacks:
                bad.append("init %d maps serve's thread stacks" % p)
        sdir = os.path.join(senv.scratch, "acme")
        left = set(os.listdir(sdir)) if os.path.isdir(sdir) else set()
        srv.proc.kill()
        srv.proc.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(alive(p) for p in fk + inits):
            time.sleep(0.1)
        bad += ["%d still runs after kill -9 of serve" % p for p in fk + inits if alive(p)]
        # The next serve's pool reclaims what the killed one left.
        srv.stop()
        srv = sgserve.Server(senv)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and left & set(os.listdir(sdir)):
            time.sleep(0.3)
        if left & set(os.listdir(sdir)):
            bad.append("scratch left after the next start: %s" % sorted(left & set(os.listdir(sdir))))
    finally:
        if srv:
            srv.stop()
        senv.cleanup()
    return "; ".join(bad) or None


CASES = [
    ("forker-inits-not-forks-of-the-executor", t_inits_not_forks_of_the_executor),
    ("forker-killed-executor-leaves-nothing", t_killed_executor_leaves_nothing),
    ("forker-clean-shutdown", t_clean_shutdown_ends_forker),
    ("forker-killed-executor-falls-back", t_forker_killed_falls_back),
    ("forker-stopped-given-up", t_forker_stopped_given_up),
    ("forker-serve", t_serve_forker),
]


def main():
    def setup(env):
        env.policy(TENANT, concurrency=4, timeout_ms=60000)

    return run_suite(CASES, UID_BASE, "sgforker-", setup)


if __name__ == "__main__":
    sys.exit(main())

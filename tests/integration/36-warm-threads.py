#!/usr/bin/python3
"""The executor's client threads (src/executor/executor_server.c), as root with a
`sandguard executor`: a thread that answered a client stays and serves the
next one, which gets its own working directory; the part of its stack a
run uses is left out of forks (MADV_DONTFORK: an init the executor clones
itself, a relay's or with no init forker (37-warm-forker), is a fork of
it, and each page a run then writes would cost a copy-on-write fault), so
no sandbox's init has a copy of it; and a
run that finds no sandbox ready still gets one prepared for it (on a
thread whose stack a fork copies). Prints one PASS/FAIL/SKIP line per
case."""
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgtest import uid_base  # noqa: E402
from sgexecutor import PYTHON, batch, exec_cli, run_suite, waiting  # noqa: E402

UID_BASE = uid_base(66500)  # 33-warm-prerun uses 66000
TENANT = "wt-pool"


def tids(pid):
    return set(os.listdir("/proc/%d/task" % pid))


def settled_tids(pid, seconds=10):
    """The executor's threads once they stay the same for half a second
    (the pool's refill done)."""
    deadline = time.monotonic() + seconds
    last = tids(pid)
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = tids(pid)
        if now == last:
            return now
        last = now
    return last


def run_in(env, cwd, tenant=TENANT):
    """A warm run in `cwd`, its batch named relative to it."""
    return exec_cli(env, ["--tenant", tenant, "--policy-dir", env.policies, "--batch", "b.json",
                          "--", PYTHON, os.path.join(env.progs, "rw_good.py")], cwd=cwd)


def dir_with_batch(env, name, n):
    d = os.path.join(env.dir, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "b.json"), "w") as f:
        json.dump(batch("wt-" + name, n), f)
    return d


def ok(res, n):
    return res and res.get("path") == "warm" and len(res.get("scores") or []) == n


def t_thread_serves_the_next(env, ex):
    """(The suite's first case: no client served yet.) After a client's
    answer its thread stays; the next client, from another directory, is
    served by a thread that was there already (no new thread), and reads
    its own directory's batch, not the first's."""
    pid = ex.proc.pid
    a, b = dir_with_batch(env, "a", 2), dir_with_batch(env, "b", 5)
    before = settled_tids(pid)
    rc, res, err = run_in(env, a)
    if rc or not ok(res, 2):
        return "first run: rc %d %s %s" % (rc, res, err[-300:])
    after_first = settled_tids(pid)
    if not after_first - before:
        return "no thread stayed after the first client's answer (threads %s, then %s)" % (
            sorted(before), sorted(after_first))
    rc, res, err = run_in(env, b)
    if rc or not ok(res, 5):
        return "second run (its own batch has 5 items): rc %d %s %s" % (rc, res, err[-300:])
    after_second = settled_tids(pid)
    if not after_second >= after_first:
        return "the first client's thread ended: threads %s, then %s" % (
            sorted(after_first), sorted(after_second))
    if after_second - after_first:
        return "the second client got a new thread %s" % sorted(after_second - after_first)
    return None


def dont_copy_ranges(pid):
    """The executor's mappings a fork does not copy ("dc" in VmFlags)."""
    out, cur = [], None
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = head.split("-")
                cur = (int(lo, 16), int(hi, 16))
            elif head == "VmFlags:" and "dc" in line.split()[1:]:
                out.append(cur)
    return out


def maps_ranges(pid):
    with open("/proc/%d/maps" % pid) as f:
        return [tuple(int(x, 16) for x in line.split()[0].split("-")) for line in f]


def waiting_inits(env, tenant=TENANT, seconds=20):
    """The inits of the tenant's sandboxes whose first run's process still
    waits (one process in run-1: sgexecutor.waiting()), once that set is
    the same 0.3 s apart."""
    def now():
        return sorted(pid for init, run in waiting(env, tenant).values() if len(run) == 1
                      for pid in init)

    deadline = time.monotonic() + seconds
    last = now()
    while time.monotonic() < deadline:
        time.sleep(0.3)
        cur = now()
        if cur == last and cur:
            return cur
        last = cur
    return last


def t_stack_out_of_forks(env, ex):
    """A kept client thread's stack (the part a run uses) is a mapping the
    executor's forks do not copy, and a sandbox the pool prepared after
    that run and holds ready has an init with nothing mapped there."""
    pid = ex.proc.pid
    a = dir_with_batch(env, "a", 2)
    for _ in range(2):  # the second run's sandbox is the pool's refill, after the first
        rc, res, err = run_in(env, a)
        if rc or not ok(res, 2):
            return "run: rc %d %s %s" % (rc, res, err[-300:])
    settled_tids(pid)
    dc = dont_copy_ranges(pid)
    if not dc:
        return "no mapping of the executor is left out of forks (no 'dc' in its smaps)"
    # The pool's own, waiting for their first run. A sandbox a taker
    # prepared on its own thread (its stack copyable for that fork) may
    # still be torn down after its run on a slow node, and a keeper's fork
    # that falls inside such a window copies the stack too (only the
    # faults come back): at least one waiting init must be clear of it.
    ps = waiting_inits(env)
    if not ps:
        return "no prepared sandbox's init found waiting in the pool"
    mapping = []
    for p in ps:
        for lo, hi in maps_ranges(p):
            for dlo, dhi in dc:
                if lo < dhi and dlo < hi:
                    mapping.append("init %d maps %x-%x, in the executor's %x-%x" % (p, lo, hi, dlo, dhi))
                    break
    if len(set(m.split()[1] for m in mapping)) == len(ps):
        return "; ".join(mapping)
    return None


def t_prepared_for_the_taker(env, ex):
    """Runs of a tenant the pool has never seen, three at once: none finds
    a sandbox ready, each gets one prepared for it, and all run warm."""
    tenant = "wt-new"
    env.policy(tenant, concurrency=4, timeout_ms=60000)
    a = dir_with_batch(env, "a", 2)
    results = [None] * 3

    def one(i):
        results[i] = run_in(env, a, tenant)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bad = ["rc %d %s %s" % (rc, res, err[-300:]) for rc, res, err in results
           if rc or not ok(res, 2)]
    return "; ".join(bad) or None


CASES = [
    ("warm-thread-serves-the-next-client", t_thread_serves_the_next),
    ("warm-thread-stack-out-of-forks", t_stack_out_of_forks),
    ("warm-prepared-for-the-taker", t_prepared_for_the_taker),
]


def main():
    def setup(env):
        env.policy(TENANT, concurrency=4, timeout_ms=60000)

    return run_suite(CASES, UID_BASE, "sgthreads-", setup)


if __name__ == "__main__":
    sys.exit(main())

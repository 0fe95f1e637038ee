#!/usr/bin/python3
"""sandguard exec end to end, as root, when things go wrong around a run
rather than in it: `sandguard exec` killed mid-run (its sandbox reaped,
the batch booked once), and a node overloaded with CPU-bound batches
(admission, never a tenant timeout; a timeout on a node without room is
confirmed by a run with guaranteed CPU; a tenant's own CPU limit is its
own). Same harness as 30-exec.py
(sgexec.py). Prints one PASS/FAIL/SKIP line per case."""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgtest import sandbox_cgroups, uid_base, wait_tenant_memory_dir  # noqa: E402
import sgexec  # noqa: E402

# our own slot uid range, 256 uids (30-exec uses 62000, 21-sandbox-isolation 67300)
sgexec.UID_BASE = UID_BASE = uid_base(68300)
from sgexecutor import BIN, PYTHON, batch  # noqa: E402
from sgexec import expect, run_batch, slot_uid_procs  # noqa: E402


def cgroup_dirs(env, tenant, sandbox):
    """The sandbox's cgroup directories that exist (v2 and the v1 mirrors)."""
    return [d for d in sandbox_cgroups(env.cgroot, tenant)
            if os.path.basename(d) == sandbox]


def t_killed_executor_reaped(env):
    """kill -9 of `sandguard exec` mid-run (issue 12 item 5): the sandbox's
    processes die with it (its init's parent-death signal empties the PID
    namespace), and the next executor start reclaims the cgroups (v2 and
    v1) and the record, and books the attempt once, final, platform_error
    "executor died". The host's mount of the scratch went when the run
    started (30-exec `exec-cold-scratch-detached-during-run`): nothing of
    it is left to reclaim."""
    b = batch("killed-executor")
    p = subprocess.Popen([BIN, "exec", "--tenant", "rw-long", "--policy-dir", env.policies, "--batch", "-",
                          "--", PYTHON, os.path.join(env.progs, "rw_daemon_hang.py")],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         env=env.env())
    p.stdin.write(json.dumps(b).encode())
    p.stdin.close()
    sandbox, seen = None, 0
    for _ in range(1000):
        # Started: main and its daemonized grandchild run, seen in two
        # polls in a row: one poll may list main and the middle child
        # before the grandchild exists (CI: "only 1 sandbox processes
        # were running" at a second look, the middle child gone).
        boxes = [os.path.basename(d) for d in sandbox_cgroups(env.cgroot, "rw-long")]
        seen = seen + 1 if boxes and len(slot_uid_procs(env)) >= 2 else 0
        if seen == 2:
            sandbox = boxes[0]
            break
        time.sleep(0.01)
    if not sandbox:
        p.kill()
        out = p.stdout.read().decode()
        p.wait()
        return "the batch never started: %s" % out[-300:]
    p.kill()
    p.wait()
    # The processes go at once; the rest waits for the next executor.
    deadline = time.monotonic() + 5
    while slot_uid_procs(env) and time.monotonic() < deadline:
        time.sleep(0.05)
    bad = []
    if slot_uid_procs(env):
        bad.append("processes outlived the killed executor: %s" % slot_uid_procs(env))
    if not cgroup_dirs(env, "rw-long", sandbox):
        bad.append("nothing was left to reclaim: the test proves nothing")
    records = os.path.join(env.run, "inflight", sandbox + ".json")
    if not os.path.exists(records):
        bad.append("no in-flight record for the killed sandbox")
    rc, res, err, _ = run_batch(env, "rw-skip", "rw_good.py", batch("after-the-kill"))
    if res is None or res["cause"] != "ok":
        bad.append("the next batch: exit %d %s" % (rc, res))
    left = cgroup_dirs(env, "rw-long", sandbox)
    if left:
        bad.append("cgroups left: %s" % left)
    if os.path.exists(os.path.join(env.scratch, "rw-long", sandbox)):
        bad.append("scratch left")
    if os.path.exists(records):
        bad.append("record left")
    booked = [o for o in env.outcomes() if o.get("batch_id") == "killed-executor"]
    if len(booked) != 1 or booked[0]["cause"] != "platform_error" or not booked[0].get("final") \
            or "executor died" not in json.dumps(booked[0]) or booked[0].get("sandbox") != sandbox:
        bad.append("booked %s, want one final platform_error 'executor died' for %s" % (booked, sandbox))
    # A third start finds nothing more to book.
    run_batch(env, "rw-skip", "rw_good.py", batch("after-the-kill-2"))
    if len([o for o in env.outcomes() if o.get("batch_id") == "killed-executor"]) != 1:
        bad.append("booked again by a later executor")
    return "; ".join(bad) or None


def overload(env, tenant, n, extra_env):
    """n correct CPU-bound batches at once: (tenant_* results, counts)."""
    procs = []
    for i in range(n):
        bid = "%s-%d" % (tenant, i)
        procs.append((bid, subprocess.Popen(
            [BIN, "exec", "--tenant", tenant, "--policy-dir", env.policies, "--batch", "-", "--",
             PYTHON, os.path.join(env.progs, "rw_cpu.py"), "300"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env.env(**extra_env))))
        procs[-1][1].stdin.write(json.dumps(batch(bid, n=2)).encode())
        procs[-1][1].stdin.close()
    counts, tenant_faults = {}, []
    for bid, p in procs:
        out = p.stdout.read().decode()
        p.wait()
        res = json.loads(out) if out.strip() else {"cause": "no result (exit %d)" % p.returncode, "detail": ""}
        detail = res.get("detail") or ""
        kind = res["cause"]
        if kind == "platform_error":
            kind = ("platform_error (refused: node CPUs committed)" if "node CPUs committed" in detail
                    else "platform_error (other)")
        elif kind == "ok" and res.get("scores") != [0.5, 0.5]:
            kind = "ok with wrong scores"
        counts[kind] = counts.get(kind, 0) + 1
        if res["cause"].startswith("tenant_"):
            tenant_faults.append("%s: %s %s" % (bid, res["cause"], detail[:160]))
    print("# %s, %d batches: %s" % (tenant, n, ", ".join("%s %d" % kv for kv in sorted(counts.items()))),
          flush=True)
    return tenant_faults, counts


def t_overload_admission(env):
    """128 correct CPU-bound programs on this node (issue 12 item 9): the
    node's CPU commitments queue them; none is booked tenant_timeout. Each
    runs, waits its turn, or is refused as platform_error."""
    faults, counts = overload(env, "rw-cpu", 128, {})
    if faults:
        return "booked to the tenant: %s" % "; ".join(faults[:5])
    if not counts.get("ok"):
        return "none ran: %s" % counts
    return "some outcomes are neither ok nor a platform refusal: %s" % counts \
        if set(counts) - {"ok", "platform_error (refused: node CPUs committed)"} \
        else None


def t_overload_confirmed(env):
    """Admission off ($SANDGUARD_NODE_CPUS=64 on this 2-core node): 32
    correct CPU-bound programs at once crowd each other past their
    deadline. A timeout on a node that had no idle CPU for the run's share
    gets one confirmation run in the node's confirmation line (at most the
    real CPUs at once, the highest CPU weight of its tenant's sandboxes),
    where a correct program finishes: every batch ends ok, none is booked
    to the tenant or to the platform, and the journal shows the
    confirmation runs (issue 31)."""
    faults, counts = overload(env, "rw-starve", 32, {"SANDGUARD_NODE_CPUS": "64"})
    if faults:
        return "booked to the tenant: %s" % "; ".join(faults[:5])
    if set(counts) != {"ok"}:
        return "not every correct program ended ok: %s" % counts
    recs = [o for o in env.outcomes() if o["tenant"] == "rw-starve"]
    ran = [o for o in recs if o.get("confirm") == "run"]
    if not ran:
        return "SKIP no timeout needed a confirmation on this run (%s): the node was not loaded enough" % counts
    wrong = [o for o in ran if o["cause"] != "ok" or o["attempt"] < 2]
    if wrong:
        return "confirmation runs that did not finish ok: %s" % wrong[:3]
    print("# %d confirmation runs, all ok" % len(ran), flush=True)
    return None


def t_own_quota_not_starvation(env):
    """A 0.02-core share: the interpreter's start is held back by the
    sandbox's own CPU limit, then it sleeps past its deadline. That is the
    tenant's timeout, and the detail names the limit's hold. Host side:
    cpu.stat of a quota'd cgroup shows the hold."""
    rc, res, err, _ = run_batch(env, "rw-quota", "rw_close_stdout_sleep.py", batch("quota"))
    print("# own CPU limit: %s" % (res or {}).get("detail"), flush=True)
    why = expect(env, "rw-quota", rc, res, "tenant_timeout", 1)
    if why:
        return why
    if "its own CPU limit held it" not in res["detail"]:
        return "the detail does not name the CPU limit's hold: %s" % res["detail"]


def t_node_oom_is_platform(env):
    """The kernel's OOM killer acting for memory the sandbox did not run
    out of (the node's, or a cgroup above the sandbox's) is the node's
    overload, not the tenant's OOM: a platform_error, retried, naming it.
    The test stands in for the node with a 48 MB limit on the tenant's
    cgroup, under the sandbox's own 128 MB: the hog is killed at ~48 MB.
    The sandbox's own OOM (its limit reached) stays tenant_oom
    (30-exec exec-memory-hog-oom). Host side: the tenant's cgroup reached its
    limit."""
    env.policy("rw-nodemem", failure="retry", retries=1)
    go = os.path.join(env.progs, "go-nodemem")  # in the sandbox's root
    batch_file = os.path.join(env.dir, "batch-nodemem.json")
    with open(batch_file, "w") as f:
        json.dump(batch("nodemem"), f)
    p = subprocess.Popen([BIN, "exec", "--tenant", "rw-nodemem", "--policy-dir", env.policies,
                          "--batch", batch_file, "--", PYTHON,
                          os.path.join(env.progs, "rw_wait_hog.py"), go],
                         env=env.env(SANDGUARD_WARM="0"), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    tdir, limit, unlimited = wait_tenant_memory_dir(env.cgroot, "rw-nodemem")
    try:
        with open(os.path.join(tdir, limit), "w") as f:
            f.write(str(48 << 20))
    except OSError as e:
        p.kill()
        p.wait()
        return "cannot limit the tenant's cgroup %s: %s" % (tdir, e)
    try:
        open(go, "w").close()
        out, err = p.communicate(timeout=120)
        try:
            res = json.loads(out)
        except ValueError:
            return "no JSON result (exit %d): %s" % (p.returncode, err.decode()[-300:])
        # Where the limit was reached: v1 counts it on the cgroup whose
        # charge failed, v2 as that cgroup's (hierarchical) oom event.
        v1 = limit.startswith("memory.limit")
        with open(os.path.join(tdir, "memory.failcnt" if v1 else "memory.events")) as f:
            text = f.read()
        hits = int(text) if v1 else int(text.split("\noom ")[1].split()[0])
    finally:
        with open(os.path.join(tdir, limit), "w") as f:
            f.write(unlimited)
        os.unlink(go)
    print("# node OOM: %s" % res.get("detail"), flush=True)
    why = expect(env, "rw-nodemem", p.returncode, res, "platform_error", 2,
                 detail_has="never reached its own memory limit (128 MB)")
    if why:
        return why
    if res["attempts"] != 2:
        return "a platform error is retried: %d attempts, want 2" % res["attempts"]
    if not hits:
        return "the tenant's cgroup never reached its limit: %s" % text.strip()


CASES = [
    ("exec-killed-executor-orphans-reaped-booked-once", t_killed_executor_reaped),
    ("exec-overload-128-cpu-bound-never-tenant-timeout", t_overload_admission),
    ("exec-overload-timeouts-confirmed", t_overload_confirmed),
    ("exec-own-cpu-limit-is-not-starvation", t_own_quota_not_starvation),
    ("exec-node-oom-is-platform-error", t_node_oom_is_platform),
]


if __name__ == "__main__":
    sys.exit(sgexec.main(CASES))

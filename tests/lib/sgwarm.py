"""The warm-interpreter suites' shared helpers (34-warm-interpreter,
24-warm-attacks, 35-warm-verifier): a tenant policy with "warm" on, one
batch through the executor, and the sandboxes and processes of a tenant's
warm parents as the host sees them."""
import glob
import json
import os
import time

from sgexecutor import BIN, PYTHON, SRC, batch, exec_cli

DEMO = os.path.join(SRC, "scripts", "demo", "programs")
WARM_BOUND_S = 60  # how long a case waits for the pool to hand out a warm sandbox


def warm_policy(env, tenant, preload=("wi_state",), base=None, failure=None, read_only=(),
                **warm):
    """The tenant's policy: the suite's base (or a file of
    policies/examples) with "warm" on."""
    if base:
        with open(os.path.join(SRC, "policies", "examples", base)) as f:
            p = json.load(f)
        p["files"]["read_only"] += [env.progs, DEMO]
        p["files"]["scratch_root"] = env.scratch
        p["require_agent"] = False
        p["limits"]["timeout_ms"] = 3000
    else:
        env.policy(tenant)
        with open(os.path.join(env.policies, tenant + ".json")) as f:
            p = json.load(f)
    p["tenant"] = tenant
    p["files"]["read_only"] += list(read_only)
    p["warm"] = dict({"interpreter": "python3", "preload": list(preload)}, **warm)
    if failure:
        p["failure"] = failure
    with open(os.path.join(env.policies, tenant + ".json"), "w") as f:
        json.dump(p, f)


def call(env, tenant, program, items=4, args=(), cold=False, directory=None, batch_id=None):
    """One batch through the executor (or cold, in the CLI's process)."""
    prog = os.path.join(directory or env.progs, program)
    return exec_cli(env, ["--tenant", tenant, "--policy-dir", env.policies, "--batch", "-", "--",
                          PYTHON, prog] + list(args),
                    stdin=json.dumps(batch(batch_id or "b-" + program, items)).encode(),
                    extra_env={"SANDGUARD_WARM": "0"} if cold else None)


def sandbox_of(res):
    return res["sandboxes"][-1]["sandbox"] if res and res.get("sandboxes") else None


def until_warm(env, tenant, program, args=(), items=4):
    """Calls until two in a row share a sandbox (the second ran in a kept
    warm interpreter): that result, or None within WARM_BOUND_S."""
    last = None
    deadline = time.monotonic() + WARM_BOUND_S
    while time.monotonic() < deadline:
        rc, res, err = call(env, tenant, program, args=args, items=items)
        if rc == 0 and last and sandbox_of(res) == last:
            return res
        last = sandbox_of(res) if rc == 0 else None
        time.sleep(0.3)  # the pool's keeper prepares the next one meanwhile
    return None


def parent_pids(env, tenant):
    """The host pids of the tenant's warm parents (each alone in run-1).
    Not a prepared sandbox's first-run process, waiting in run-1 for its
    run (src/sandbox/sandbox_child.c): it has not exec'd, its image is
    still sandguard's."""
    pids = []
    for procs in glob.glob(os.path.join(env.cgroot, tenant, "*", "run-1", "cgroup.procs")):
        try:
            with open(procs) as f:
                listed = [int(x) for x in f.read().split()]
        except FileNotFoundError:  # torn down since the listing: it holds no one
            continue
        for pid in listed:
            try:
                waiting = os.path.samefile("/proc/%d/exe" % pid, BIN)
            except OSError:
                waiting = False
            if not waiting:
                pids.append(pid)
    return pids


def waiting_child(env, tenant, sandbox):
    """The child a warm parent forked ahead of its next call: (host pid,
    its pid in the sandbox, N of the cgroup run-<N> it waits in, its
    parent's host pid), once it is there (None after 60 s)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for procs in glob.glob(os.path.join(env.cgroot, tenant, sandbox, "run-*", "cgroup.procs")):
            n = int(procs.split(os.sep)[-2][4:])
            try:
                with open(procs) as f:
                    pids = f.read().split()
                with open("/proc/%s/status" % pids[0]) as f:
                    status = dict(line.split(":", 1) for line in f)
            except (OSError, IndexError):
                continue
            if n > 1 and len(pids) == 1:
                return (int(pids[0]), int(status["NSpid"].split()[-1]), n,
                        int(status["PPid"]))
        time.sleep(0.1)
    return None

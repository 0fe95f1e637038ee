#!/usr/bin/python3
"""The sandbox launcher (sandbox_run) on the real kernel, as root, through
the tests/helpers/sandbox_run binary: Python programs from tests/programs/
run as the slot uid with /usr/bin/python3. Prints one PASS/FAIL/SKIP line
per case. Every case also checks that the sandbox left nothing behind: no
scratch, no cgroup (v2 and v1), no live process with a slot uid.

This suite: limits and lifecycle (output, timeouts, memory, forks, CPU,
I/O, disk, platform errors). What a sandbox can reach (escapes, network,
IPC, neighbours) is 21-sandbox-isolation.py; the harness is sgsandbox.py."""
import glob
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgtest import uid_base  # noqa: E402
import sgsandbox  # noqa: E402

# A slot range of our own, so that "no process left with a slot uid" is not
# confused by sandboxes other tests run at the same time (21-sandbox-isolation
# uses 67300).
sgsandbox.UID_BASE = UID_BASE = uid_base(61000)
from sgsandbox import (  # noqa: E402
    CG_ROOT,
    Env,
    HELPER,
    PROGRAMS,
    PYTHON,
    RSS_BOUND_KB,
    SLOTS,
    TIMEOUT_SLACK_MS,
    V1,
    expect,
    finished,
    in_thread,
    leftovers,
    run,
    run_prog,
    slot_processes,
)


# ---------------------------------------------------------------- the cases

def t_normal(env):
    import hashlib
    data = b"hello sandbox"
    d = run_prog(env.policy("sbtest"), "sb_echo.py", ["3"], stdin=data)
    want_out = "len=%d sha256=%s\n" % (len(data), hashlib.sha256(data).hexdigest())
    return expect(d, "sbtest", end="exited", exit_code=3, out=want_out, err="to stderr\n")


def t_stdin_large(env):
    import hashlib
    data = os.urandom(5 << 20)
    d = run_prog(env.policy("sbtest"), "sb_echo.py", stdin=data)
    want_out = "len=%d sha256=%s\n" % (len(data), hashlib.sha256(data).hexdigest())
    return expect(d, "sbtest", end="exited", exit_code=0, out=want_out)


def timeout_case(env, program):
    deadline = 2000
    d = run_prog(env.policy("sbtest"), program, timeout_ms=deadline)
    why = expect(d, "sbtest", end="timeout")
    if not why and d["elapsed_ms"] > deadline + TIMEOUT_SLACK_MS:
        why = "took %.0f ms for a %d ms deadline" % (d["elapsed_ms"], deadline)
    if not why:
        print("# %s: timeout after %.0f ms (deadline %d ms, wall_ms %d)"
              % (program, d["elapsed_ms"], deadline, d["wall_ms"]), flush=True)
    return why


def t_daemon(env):
    d = run_prog(env.policy("sbtest"), "sb_daemon.py", timeout_ms=20000)
    why = expect(d, "sbtest", end="exited", exit_code=0)
    if why:
        return why
    # The pid is the sandbox's own (its PID namespace): that it was made
    # is what the output says; that it is gone, the slot-uid check above.
    if not d["out"].split() or int(d["out"].split()[0]) < 2:
        return "no grandchild pid printed: %r" % d["out"]
    if d["elapsed_ms"] > 10000:
        return "early exit took %.0f ms" % d["elapsed_ms"]
    return None


def t_hold_pipe(env):
    d = run_prog(env.policy("sbtest"), "sb_hold_pipe.py", timeout_ms=20000)
    why = expect(d, "sbtest", end="exited", exit_code=0)
    if why:
        return why
    if len(d["out"].split()) < 2:
        return "no child pid printed: %r" % d["out"]
    if d["elapsed_ms"] > 10000:
        return "took %.0f ms: the held pipe delayed the end" % d["elapsed_ms"]
    print("# hold-pipe: main exit to result in %.0f ms" % d["elapsed_ms"], flush=True)
    return None


def t_stdout_flood(env):
    cap = env.base["limits"]["output_bytes"]
    d = run_prog(env.policy("sbtest"), "sb_stdout_flood.py", timeout_ms=60000)
    why = expect(d, "sbtest", end="output_oversize", out_len=cap, out_truncated=True)
    if not why and d["maxrss_kb"] > RSS_BOUND_KB:
        why = "launcher max RSS %d kB" % d["maxrss_kb"]
    if not why:
        print("# 100 MB stdout: launcher max RSS %d kB" % d["maxrss_kb"], flush=True)
    return why


def t_stderr_flood(env):
    cap = env.base["limits"]["output_bytes"]
    d = run_prog(env.policy("sbtest"), "sb_stderr_flood.py", timeout_ms=120000)
    why = expect(d, "sbtest", end="exited", exit_code=0, out="[0.5]\n", err_len=cap, err_truncated=True)
    if not why and d["err"] != "e" * cap:
        why = "stderr does not hold the first %d bytes" % cap
    if not why and d["maxrss_kb"] > RSS_BOUND_KB:
        why = "launcher max RSS %d kB" % d["maxrss_kb"]
    if not why:
        print("# 1 GiB stderr: launcher max RSS %d kB, drained in %d ms" % (d["maxrss_kb"], d["wall_ms"]), flush=True)
    return why


def t_memory_hog(env):
    d = run_prog(env.policy("sbmem", memory_mb=64), "sb_memory_hog.py", timeout_ms=60000)
    return expect(d, "sbmem", end="oom", rule="memory")


def t_cpu_quota(env):
    """cpu 0.25: two seconds of spinning get about half a CPU second."""
    d = run_prog(env.policy("sbcpu", cpu=0.25), "sb_cpu_spin.py", ["2"], timeout_ms=20000)
    why = expect(d, "sbcpu", end="exited", exit_code=0)
    if why:
        return why
    cpu = float(d["out"])
    print("# cpu 0.25: %.2f CPU s in 2 s of wall time" % cpu, flush=True)
    return "got %.2f CPU seconds in 2 s at cpu=0.25" % cpu if cpu > 1.2 else None


def t_fork_bomb(env):
    d = run_prog(env.policy("sbfork", max_tasks=32), "sb_fork_bomb.py", timeout_ms=10000)
    if d.get("rc") != 0:
        return "platform error %s: %s" % (d.get("rc"), d.get("detail"))
    if d["end"] not in ("fork_limit", "timeout"):
        return "end is %s" % d["end"]
    why = expect(d, "sbfork")
    if not why and subprocess.run(["/bin/true"]).returncode != 0:
        why = "the runner can no longer fork"
    return why


def t_fetch(env):
    d = run_prog(env.policy("sbtest"), "sb_fetch.py", fetch=["out.txt", "link", "fifo", "sub/inner.txt", "../x"])
    why = expect(d, "sbtest", end="exited", exit_code=0)
    if why:
        return why
    got = {f["path"]: f["data"] for f in d["fetched"]}
    want = {"out.txt": "result", "link": None, "fifo": None, "sub/inner.txt": "inner", "../x": None}
    return None if got == want else "fetched %r" % got


def t_concurrent(env):
    pol = env.policy("sbtest")
    results = [None] * 6
    threads = [in_thread(results, i, pol, "sb_whoami.py") for i in range(len(results))]
    for t in threads:
        t.join()
    for d in results:
        why = expect(finished(d), "sbtest", end="exited", exit_code=0)
        if why:
            return why
    uids = [d["out"].split()[0] for d in results]
    if len(set(uids)) != len(uids):
        return "sandboxes shared a uid: %s" % uids
    if any(not UID_BASE <= int(u) < UID_BASE + SLOTS for u in uids):
        return "uid outside the slot range: %s" % uids
    return None


def t_not_found(env):
    d = run(env.policy("sbtest"), ["no-such-command"])
    if d["rc"] != -2 or d["helper_rc"] != 2 or "execve" not in d["detail"]:
        return "rc %s, detail %r" % (d["rc"], d["detail"])
    left = leftovers(d, "sbtest")
    return "left behind: " + ", ".join(left) if left else None


def t_disk_full(env):
    """The request's own files do not fit the scratch (files.scratch_mb):
    a platform error, nothing left behind."""
    pol = env.policy("sbfull", files={"scratch_mb": 1})
    big = os.path.join(env.dir, "big.bin")
    with open(big, "wb") as f:
        f.write(b"\0" * (2 << 20))
    cmd = [HELPER, "--policy", pol, "--file", "big.bin=" + big, "--", "/usr/bin/true"]
    p = subprocess.run(cmd, capture_output=True, env=dict(os.environ, SANDGUARD_UID_BASE=str(UID_BASE)))
    d = json.loads(p.stdout)
    if d["rc"] != -28 or p.returncode != 2:
        return "rc %s, detail %r" % (d["rc"], d["detail"])
    if os.listdir(os.path.join(env.scratch_root, "sbfull")):
        return "scratch left behind"
    return None


def t_rlimit_fallback(env):
    """With no usable pids/memory controller the limits fall back to rlimits:
    hide the v1 mounts in a private mount namespace and run the hogs."""
    if not {"cpu", "memory", "pids"} <= set(V1) or not shutil.which("unshare"):
        return "SKIP the controllers are not on cgroup v1 here"
    script = "umount %s && exec \"$@\"" % " ".join(sorted(set(V1[c] for c in ("cpu", "memory", "pids"))))
    env_vars = dict(os.environ, SANDGUARD_UID_BASE=str(UID_BASE))
    bad = []
    for tenant, limits, program in (("sbmem", {"memory_mb": 64}, "sb_memory_hog.py"),
                                    ("sbfork", {"max_tasks": 32}, "sb_fork_bomb.py")):
        cmd = ["unshare", "-m", "sh", "-c", script, "sh", HELPER, "--policy", env.policy(tenant, **limits),
               "--timeout-ms", "10000", "--file", "prog.py=" + os.path.join(PROGRAMS, program),
               "--", PYTHON, "prog.py"]
        p = subprocess.run(cmd, capture_output=True, env=env_vars, timeout=60)
        d = json.loads(p.stdout)
        # An rlimit makes the allocation or the fork fail inside the program:
        # bounded, though not attributable like a cgroup OOM or pids event.
        why = expect(d, tenant, end="exited", exit_code=1)
        want = "MemoryError" if program == "sb_memory_hog.py" else "BlockingIOError"
        if not why and want not in d["err"]:
            why = "no %s in stderr: %r" % (want, d["err"][-200:])
        if why:
            bad.append("%s: %s" % (program, why))
    return "; ".join(bad) or None


def t_io_limits(env):
    """limits.io_*: io.max on cgroup v2 where the io controller is offered,
    else the v1 blkio throttle files, on the disk behind /usr; read while
    the sandbox runs."""
    dev = os.stat("/usr").st_dev
    if os.major(dev) == 0:
        return "SKIP /usr is on a virtual filesystem here: no block device to throttle"
    pol = env.policy("sbtest", io_read_mbps=10, io_read_iops=300)
    result = {}
    t = in_thread(result, "d", pol, "sb_sleeper.py", ["2"], timeout_ms=20000)
    found = None
    base = os.path.basename(CG_ROOT)
    for _ in range(400):
        for path in glob.glob(os.path.join(CG_ROOT, "sbtest", "*", "io.max")):
            with open(path) as f:
                text = f.read()
            if "rbps=10485760" in text and "riops=300" in text:
                found = "v2 io.max: " + text.strip()
        if "blkio" in V1:
            for path in glob.glob(os.path.join(V1["blkio"], base, "sbtest", "*",
                                               "blkio.throttle.read_bps_device")):
                with open(path) as f:
                    bps = f.read()
                with open(path.replace("read_bps", "read_iops")) as f:
                    iops = f.read()
                if " 10485760" in bps and " 300" in iops:
                    found = "v1 blkio: " + bps.strip() + ", " + iops.strip()
        if found or not t.is_alive():
            break
        time.sleep(0.01)
    t.join()
    why = expect(finished(result["d"]), "sbtest", end="exited", exit_code=0)
    if why:
        return why
    if not found:
        return "no IO limit found on the sandbox's cgroups while it ran"
    print("# IO limits: %s" % found, flush=True)
    return None


def t_v1_stray(env):
    """A task root moved into one of a sandbox's v1 leaves alone (not in its
    v2 cgroup) is killed at teardown and the leaf removed: the teardown
    trusts the v2 cgroup's emptiness for the sandbox's own processes and
    lets the v1 leaves' rmdir (EBUSY) find anything else."""
    if not V1:
        return "SKIP no controller is on cgroup v1 here (pure v2 node)"
    # pids, memory or cpu on a hybrid node (blkio only with IO limits).
    ctrl = next((c for c in ("pids", "memory", "cpu") if c in V1), None)
    if not ctrl:
        return "SKIP none of pids, memory, cpu is on cgroup v1 here"
    pol = env.policy("sbtest")
    result = {}
    t = in_thread(result, "d", pol, "sb_sleeper.py", ["2"], timeout_ms=20000)
    leaf_glob = os.path.join(V1[ctrl], os.path.basename(CG_ROOT), "sbtest", "*", "cgroup.procs")
    stray = subprocess.Popen(["sleep", "120"])
    moved = None
    try:
        for _ in range(500):
            for procs in glob.glob(leaf_glob):
                try:
                    with open(procs, "w") as f:
                        f.write(str(stray.pid))
                    moved = os.path.dirname(procs)
                except OSError:
                    continue
                break
            if moved or not t.is_alive():
                break
            time.sleep(0.01)
        t.join()
        try:
            code = stray.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
    finally:
        if stray.poll() is None:
            stray.kill()
            stray.wait()
    if not moved:
        return "never saw the sandbox's %s v1 leaf while it ran" % ctrl
    why = expect(finished(result["d"]), "sbtest", end="exited", exit_code=0)
    if why:
        return why
    if code != -9:
        return "the stray in %s lives on after the teardown (wait: %r)" % (moved, code)
    if os.path.exists(moved):
        return "the v1 leaf %s was not removed" % moved
    print("# a stray moved into the %s v1 leaf alone: killed, leaf removed" % ctrl, flush=True)
    return None


def cap_sys_resource():
    """Whether this process may lower OOM scores (CAP_SYS_RESOURCE, bit 24)."""
    with open("/proc/self/status") as f:
        eff = [line.split()[1] for line in f if line.startswith("CapEff:")][0]
    return bool(int(eff, 16) & (1 << 24))


def t_oom_score(env):
    """Tenant code keeps the OOM score of whoever started the sandbox: no
    process of the sandbox may hand it a score the OOM killer skips (-1000
    is inherited by every fork, and would leave a memory hog unkillable by
    its own cgroup's OOM killer and by the node's). The helper starts at
    250 (raising needs no privilege), so inheritance is visible. Decisive
    where the executor holds CAP_SYS_RESOURCE (production nodes, the VMs):
    without it a write of a lower score fails anyway."""
    policy = env.policy("sbtest")
    cmd = [HELPER, "--policy", policy, "--", "/bin/sh", "-c", "cat >/dev/null; exec sleep 3"]
    env_vars = dict(os.environ, SANDGUARD_UID_BASE=str(UID_BASE))

    def score_250():
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("250")
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env_vars, preexec_fn=score_250)
    seen = {}
    end = time.monotonic() + 10
    while not seen and time.monotonic() < end and p.poll() is None:
        for pid in [s.split("(")[0] for s in slot_processes()]:
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    if not f.read().startswith(b"sleep"):
                        continue
                with open("/proc/%s/status" % pid) as f:
                    ppid = [line.split()[1] for line in f if line.startswith("PPid:")][0]
                for who, q in (("main", pid), ("init", ppid)):
                    with open("/proc/%s/oom_score_adj" % q) as f:
                        seen[who] = int(f.read())
            except (OSError, IndexError):
                seen = {}
        time.sleep(0.05)
    out, err = p.communicate(timeout=60)
    if not seen:
        return "never saw the sandbox's main (helper rc %s: %s)" % (p.returncode, err.decode()[-200:])
    if seen != {"main": 250, "init": 250}:
        return "OOM scores %s, want 250 (the helper's) for both" % seen
    print("# OOM scores inherited unchanged: %s (%s)" % (
        seen, "decisive: CAP_SYS_RESOURCE held" if cap_sys_resource()
        else "not decisive here: no CAP_SYS_RESOURCE, so a lower score could not be set anyway"), flush=True)
    why = expect(json.loads(out), "sbtest", end="exited", exit_code=0)
    return why


def t_require_agent(env):
    d = run(env.policy("sbagent", require_agent=True), ["/usr/bin/true"])
    if d["rc"] != -107 or "agent" not in d["detail"]:
        return "rc %s, detail %r" % (d["rc"], d["detail"])
    return None


CASES = [
    ("sandbox-normal-exit-stdout-stderr", t_normal),
    ("sandbox-stdin-5MB-delivered", t_stdin_large),
    ("sandbox-hang-timeout", timeout_case, "sb_hang.py"),
    ("sandbox-close-stdout-sleep-timeout", timeout_case, "sb_close_stdout_sleep.py"),
    ("sandbox-daemonized-grandchild-killed", t_daemon),
    ("sandbox-child-holding-pipe-early-exit", t_hold_pipe),
    ("sandbox-stdout-100MB-oversize-bounded-rss", t_stdout_flood),
    ("sandbox-stderr-1GiB-capped-bounded-rss", t_stderr_flood),
    ("sandbox-memory-hog-oom", t_memory_hog),
    ("sandbox-oom-score-inherited-unchanged", t_oom_score),
    ("sandbox-fork-bomb-bounded", t_fork_bomb),
    ("sandbox-cpu-quota", t_cpu_quota),
    ("sandbox-fetch-no-symlinks-no-fifos", t_fetch),
    ("sandbox-concurrent-distinct-uids", t_concurrent),
    ("sandbox-command-not-found-platform-error", t_not_found),
    ("sandbox-disk-full-platform-error", t_disk_full),
    ("sandbox-rlimit-fallback-without-controllers", t_rlimit_fallback),
    ("sandbox-io-limits-applied", t_io_limits),
    ("sandbox-require-agent-without-agent", t_require_agent),
    ("sandbox-v1-stray-killed-at-teardown", t_v1_stray),
]


if __name__ == "__main__":
    sys.exit(sgsandbox.main("sandbox", "test-20-sandbox.lock", CASES))

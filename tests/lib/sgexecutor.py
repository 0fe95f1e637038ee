"""A long-lived `sandguard executor` for a suite, and the temp tree it and
`sandguard exec` share (30-exec, 32-warm, 34-warm-interpreter): programs,
policies, scratch, state and run dirs and a private cgroup root."""
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sgtest import cgroup2_mount, exit_code, remove_cgroup_tree, report, test_tree  # noqa: E402
import sgjournal  # noqa: E402

BIN = os.environ.get("SANDGUARD_BIN") or os.path.abspath("build/sandguard")
SRC = os.environ.get("SANDGUARD_SRC") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PROGRAMS = os.path.join(SRC, "tests", "programs")
PYTHON = "/usr/bin/python3"


class Env:
    """A temp tree (programs, policies, scratch, state, run) and a
    private cgroup root; env() is what every sandguard command of the suite
    gets. timeout_ms is every policy's unless policy() is given one."""

    def __init__(self, uid_base, prefix="sgwarm-", timeout_ms=3000):
        self.uid_base = uid_base
        self.timeout_ms = timeout_ms
        self.dir, self.progs = test_tree(prefix, PROGRAMS)
        self.policies = os.path.join(self.dir, "policies")
        os.mkdir(self.policies)
        self.scratch = os.path.join(self.dir, "scratch")
        self.state = os.path.join(self.dir, "state")
        self.run = os.path.join(self.dir, "run")
        self.cgroot = os.path.join(cgroup2_mount(), "sandguard-%stest-%d" % (prefix.strip("-"), os.getpid()))
        with open(os.path.join(SRC, "policies", "default.json")) as f:
            self.base = json.load(f)

    def policy(self, tenant, failure="skip", retries=0, require_agent=False, **limits):
        p = json.loads(json.dumps(self.base))
        p["tenant"] = tenant
        p["require_agent"] = require_agent
        p["files"]["scratch_root"] = self.scratch
        p["files"]["read_only"].append(self.progs)
        p["failure"] = {"mode": failure, "max_retries": retries}
        lim = {"timeout_ms": self.timeout_ms, "memory_mb": 128, "max_tasks": 32, "concurrency": 4}
        lim.update(limits)
        p["limits"].update(lim)
        with open(os.path.join(self.policies, tenant + ".json"), "w") as f:
            json.dump(p, f)

    def env(self, **extra):
        e = dict(os.environ, SANDGUARD_STATE_DIR=self.state, SANDGUARD_RUN_DIR=self.run,
                 SANDGUARD_UID_BASE=str(self.uid_base), SANDGUARD_CGROUP_ROOT=self.cgroot,
                 SANDGUARD_AGENT_SOCK=os.path.join(self.dir, "no-agent.sock"))
        for k in ("SANDGUARD_POLICY_DIR", "SANDGUARD_WARM", "SANDGUARD_DEBUG"):
            e.pop(k, None)
        e.update(extra)
        return e

    def outcomes(self):
        return sgjournal.read(self.state)

    def sandboxes(self, tenant):
        """The tenant's sandboxes that exist now (their scratch)."""
        d = os.path.join(self.scratch, tenant)
        return set(os.listdir(d)) if os.path.isdir(d) else set()

    def cleanup(self):
        remove_cgroup_tree(self.cgroot)
        if not os.environ.get("SANDGUARD_KEEP_TEST_DIR"):
            shutil.rmtree(self.dir, ignore_errors=True)


class Executor:
    """One `sandguard executor` with the suite's environment."""

    def __init__(self, env, *args, **extra_env):
        self.env, self.args, self.extra = env, list(args), extra_env
        self.proc = None
        self.log = os.path.join(env.dir, "executor.log")

    def start(self):
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen([BIN, "executor"] + self.args, env=self.env.env(**self.extra),
                                         stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL)
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline().decode() if ready else ""
        if "executor listening on" not in line:
            self.stop(signal.SIGKILL)
            raise RuntimeError("the executor did not start: %r, log %s" % (line, self.tail()))
        return self

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=60)
        rc = self.proc.returncode if self.proc else None
        self.proc = None
        return rc

    def tail(self):
        with open(self.log) as f:
            return f.read()[-1500:]


def procs(path):
    """The pids in the cgroup at path; none once it is gone."""
    try:
        with open(os.path.join(path, "cgroup.procs")) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def waiting(env, tenant):
    """sandbox id -> (init's pid, the pids in its first run's cgroup), for
    every prepared sandbox of the tenant that has not run yet (33-warm-prerun,
    36-warm-threads)."""
    root = os.path.join(env.cgroot, tenant)
    out = {}
    for sb in os.listdir(root) if os.path.isdir(root) else []:
        run1 = os.path.join(root, sb, "run-1")
        if os.path.isdir(run1):
            out[sb] = (procs(os.path.join(root, sb)), procs(run1))
    return out


def wait_for(pred, seconds=10):
    """pred()'s first true value within `seconds` (polled every 50 ms), or
    its last false one."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.05)
    return pred()


def queued(pid):
    """Bytes waiting unread in the receive queues of pid's unix sockets
    (`ss -x`: Recv-Q), e.g. a message sent to a stopped process."""
    out = subprocess.run(["ss", "-xpn"], capture_output=True, text=True).stdout
    return sum(int(line.split()[2]) for line in out.splitlines()[1:] if "pid=%d," % pid in line)


def batch(batch_id, n=3):
    return {"batch_id": batch_id,
            "items": [{"prompt": "p%d" % i, "completion": "c" * (i + 1)} for i in range(n)]}


def exec_cli(env, args, stdin=None, extra_env=None, cwd=None, timeout=300):
    """`sandguard exec ARGS`: (rc, result or None, stderr)."""
    p = subprocess.run([BIN, "exec"] + args, input=stdin, capture_output=True,
                       env=env.env(**(extra_env or {})), timeout=timeout, cwd=cwd)
    out = p.stdout.decode()
    lines = out.strip().split("\n") if out.strip() else []
    if len(lines) > 1:
        raise AssertionError("%d lines on stdout, want one JSON object: %r" % (len(lines), out[:400]))
    return p.returncode, json.loads(lines[0]) if lines else None, p.stderr.decode()


def warm_unsupported(cases):
    """The warm-interpreter suites' guard: True, with every case SKIPped,
    where the kernel's Landlock ABI is below 6 (warm calls run cold)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(ctypes.c_long(444), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi >= 6:  # landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
        return False
    for name, _ in cases:
        report("SKIP", name, "Landlock ABI %d: warm interpreters need 6 (they run cold)" % abi)
    return True


def run_suite(cases, uid_base, prefix, setup=None):
    """A suite's main: as root, one Env and one Executor (after
    setup(env) wrote the policies it starts with), each case (the ones
    named on the command line, else all) run as case(env, executor),
    reported PASS/FAIL/SKIP; everything torn down at the end."""
    if os.geteuid() != 0:
        for name, _ in cases:
            report("SKIP", name, "needs root")
        return 0
    env = Env(uid_base, prefix=prefix)
    ex = None
    try:
        if setup:
            setup(env)
        ex = Executor(env).start()
        only = sys.argv[1:]
        for name, fn in cases:
            if only and name not in only:
                continue
            try:
                why = fn(env, ex)
            except Exception as e:  # a crash in a case is that case's failure
                why = "%s: %s" % (type(e).__name__, e)
            report("FAIL" if why else "PASS", name, why or "")
    finally:
        if ex:
            ex.stop()
        env.cleanup()
    return exit_code()

"""Helpers for tests/integration/60-serve.py: a temp tree with private
state, log, run, scratch and cgroup roots; a `sandguard serve` on a
loopback port; and verl's side of /run_code (its request, and how it
scores the reply)."""
import http.client
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sgtest import cgroup2_mount, exit_code, remove_cgroup_tree, report, test_tree, uid_base  # noqa: E402
import sgjournal  # noqa: E402

BIN = os.environ.get("SANDGUARD_BIN") or os.path.abspath("build/sandguard")
SRC = os.environ.get("SANDGUARD_SRC") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
UID_BASE = uid_base(63000)           # our own slot uids (20-sandbox 61000, 30-exec 62000)
TIMEOUT_MS = 3000           # the tenants' deadline
MEMORY_MB = 256             # the tenants' memory cap (verl asks for 1024)
OUTPUT_CAP = 1 << 20
MAX_BODY = 1 << 20


class Env:
    """A temp tree (programs read-only to the sandbox, policies, scratch,
    state, log, run) and a private cgroup root."""

    def __init__(self):
        self.dir, self.progs = test_tree("sgserve-", os.path.join(SRC, "tests", "programs"))
        self.policies = os.path.join(self.dir, "policies")
        os.mkdir(self.policies)
        self.scratch = os.path.join(self.dir, "scratch")
        self.log = os.path.join(self.dir, "log")
        self.cg_name = "sandguard-serve-test-%d" % os.getpid()
        self.cg_root = os.path.join(cgroup2_mount(), self.cg_name)
        with open(os.path.join(SRC, "policies", "default.json")) as f:
            self.base = json.load(f)
        self.env = dict(os.environ, SANDGUARD_STATE_DIR=os.path.join(self.dir, "state"),
                        SANDGUARD_LOG_DIR=self.log, SANDGUARD_RUN_DIR=os.path.join(self.dir, "run"),
                        SANDGUARD_CGROUP_ROOT=self.cg_root, SANDGUARD_UID_BASE=str(UID_BASE),
                        SANDGUARD_AGENT_SOCK=os.path.join(self.dir, "no-agent.sock"))
        self.env.pop("SANDGUARD_POLICY_DIR", None)

    def policy(self, tenant, limits=None, exec_allow=(), scratch_root=None, raw=None):
        path = os.path.join(self.policies, tenant + ".json")
        if raw is not None:
            with open(path, "w") as f:
                f.write(raw)
            return
        p = json.loads(json.dumps(self.base))
        p["tenant"] = tenant
        p["files"]["scratch_root"] = scratch_root or self.scratch
        p["files"]["read_only"].append(self.progs)
        p["exec"]["allow"] += list(exec_allow)
        p["failure"] = {"mode": "retry", "max_retries": 1}
        p["limits"].update({"timeout_ms": TIMEOUT_MS, "memory_mb": MEMORY_MB, "output_bytes": OUTPUT_CAP})
        p["limits"].update(limits or {})
        with open(path, "w") as f:
            json.dump(p, f)

    def outcomes(self):
        """Every booking, in order: the records of the outcome journal."""
        return sgjournal.read(self.env["SANDGUARD_STATE_DIR"])

    def scratch_left(self):
        return used_scratch_left(self.scratch, self.env["SANDGUARD_STATE_DIR"])

    def cleanup(self):
        remove_cgroup_tree(self.cg_root)
        if not os.environ.get("SANDGUARD_KEEP_TEST_DIR"):
            shutil.rmtree(self.dir, ignore_errors=True)


def used_scratch_left(scratch, state_dir, wait_s=30):
    """["tenant/id", ...]: scratch directories of sandboxes a run was booked
    in that are still there. Their teardown follows the reply, on the
    server's pool thread: waited for, up to wait_s. The pool's prepared
    sandboxes, which no run has used yet, are not counted (a scratch is
    named after its sandbox)."""
    deadline = time.monotonic() + wait_s
    while True:
        used = {o.get("sandbox") for o in sgjournal.read(state_dir)}
        left = []
        for tenant in os.listdir(scratch) if os.path.isdir(scratch) else []:
            left += [tenant + "/" + d for d in os.listdir(os.path.join(scratch, tenant)) if d in used]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.1)


class Server:
    def __init__(self, env, *args, env_override=None):
        """`args` come after the defaults, so a later --policy-dir wins."""
        self.env = env
        self.stderr = open(os.path.join(env.dir, "serve-%d.log" % time.monotonic_ns()), "w+")
        self.proc = subprocess.Popen([BIN, "serve", "--listen", "127.0.0.1:0", "--policy-dir", env.policies,
                                      "--max-body", str(MAX_BODY)] + list(args),
                                     stdout=subprocess.PIPE, stderr=self.stderr, env=env_override or env.env)
        ready, _, _ = select.select([self.proc.stdout], [], [], 15)
        line = self.proc.stdout.readline().decode() if ready else ""
        if not line.startswith("listening on http://127.0.0.1:"):
            self.stop()
            raise RuntimeError("serve did not start: %r %s" % (line, self.log_tail()))
        self.port = int(line.split("127.0.0.1:")[1].split()[0])

    def post(self, path, body, headers=None, timeout=60):
        """(status, headers, parsed JSON body) of one request on its own connection."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request("POST", path, data, dict({"Content-Type": "application/json",
                                               "Accept": "application/json"}, **(headers or {})))
            r = c.getresponse()
            raw = r.read()
            return r.status, r, json.loads(raw)
        finally:
            c.close()

    def get(self, path):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, json.loads(r.read())
        finally:
            c.close()

    def log_tail(self, limit=2000):
        self.stderr.flush()
        self.stderr.seek(0)
        return self.stderr.read()[-limit:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.stderr.close()


# ---- the suites' frame -----------------------------------------------------

def can_run(suite):
    """False (with a SKIP line saying why) when sandboxes cannot run here."""
    if os.geteuid() != 0:
        report("SKIP", suite, "needs root (sandboxes switch uids and make cgroups)")
        return False
    if not cgroup2_mount():
        report("SKIP", suite, "no cgroup2 mount")
        return False
    return True


def run_cases(cases, args, log=None):
    """Each (name, fn) of `cases`: fn(*args) returns None (PASS; fn.summary,
    when set, is shown), a reason (FAIL), or ("SKIP", reason). `log()`
    gives what to print on stderr after a failure."""
    for name, fn in cases:
        try:
            why = fn(*args)
        except Exception as e:   # noqa: BLE001 - every failure is a finding
            why = "exception: %r" % e
        if isinstance(why, tuple):
            report(why[0], name, why[1])
        elif why:
            report("FAIL", name, why)
            if log:
                print("server log: " + log(), file=sys.stderr, flush=True)
        else:
            extra = getattr(fn, "summary", None)
            report("PASS", name + (" (%s)" % extra if extra else ""))


def run_suite(suite, cases, setup=None, server_args=()):
    """A suite's main() around one server: SKIP unless sandboxes can run,
    an Env with the policies setup(env) writes (else just "default"), a
    Server with server_args, each case run with (env, srv), then all of it
    cleaned up. Returns the exit code."""
    if not can_run(suite):
        return 0
    env = Env()
    srv = None
    try:
        if setup:
            setup(env)
        else:
            env.policy("default")
        srv = Server(env, *server_args)
        run_cases(cases, (env, srv), srv.log_tail)
        if srv.proc.poll() is not None:
            report("FAIL", "server alive", "exited %s" % srv.proc.returncode)
    finally:
        if srv:
            srv.stop()
        env.cleanup()
    return exit_code()


# ---- verl's side ---------------------------------------------------------

def verl_request(code, stdin, run_timeout=10, language="python"):
    """The body verl's call_sandbox_api posts (same keys, same values)."""
    return {"compile_timeout": run_timeout, "run_timeout": run_timeout, "code": code, "stdin": stdin,
            "memory_limit_MB": 1024, "language": language, "files": {}, "fetch_files": []}


def verl_verdict(resp, expected):
    """How verl's check_correctness scores one case from the reply: True or
    False (ran; right or wrong answer), -1 sandbox/API error, -2 runtime
    error, -3 timeout, -4 compile error."""
    status, comp, run = resp.get("status"), resp.get("compile_result"), resp.get("run_result")
    if status == "SandboxError":
        return -1
    if status == "Failed":
        if comp and (comp.get("status") in ("Error", "TimeLimitExceeded")
                     or (comp.get("status") == "Finished" and comp.get("return_code") != 0)):
            return -4
        if run:
            if run.get("status") == "TimeLimitExceeded":
                return -3
            if run.get("status") == "Error" or (run.get("status") == "Finished" and run.get("return_code") != 0):
                return -2
        return -1
    if status == "Success" and run and run.get("status") == "Finished":
        return str(run.get("stdout") or "").rstrip("\n") == str(expected).rstrip("\n")
    return -1

"""A private agent for integration tests: its own cgroup root, pins, socket,
state and policies, so a test never touches a real agent or another test.
Also the PASS/FAIL/SKIP line protocol of tests/run-integration.sh."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sgtest import check, cgroup2_mount, exit_code, remove_cgroup_tree, report, skip  # noqa: E402,F401

SANDGUARD = os.environ.get("SANDGUARD_BIN", "build/sandguard")
SRC = os.environ.get("SANDGUARD_SRC", os.getcwd())
PY = "/usr/bin/python3"

class Agent:
    """Start with start(); every sandguard command run through run() sees
    the same private roots."""

    def __init__(self, tenants, name="sgtest"):
        self.dir = tempfile.mkdtemp(prefix="sg-%s." % name)
        os.chmod(self.dir, 0o755)
        self.policy_dir = os.path.join(self.dir, "policies")
        self.scratch = os.path.join(self.dir, "scratch")
        self.programs = os.path.join(self.dir, "programs")
        self.events = os.path.join(self.dir, "events.jsonl")
        for d in (self.policy_dir, self.scratch, self.programs):
            os.makedirs(d)
            os.chmod(d, 0o755)
        tag = "%s-%d" % (name, os.getpid())
        self.env = dict(os.environ)
        self.env.update({
            "SANDGUARD_CGROUP_ROOT": os.path.join(cgroup2_mount(), "sandguard-" + tag),
            "SANDGUARD_PIN_ROOT": "/sys/fs/bpf/sandguard-" + tag,
            "SANDGUARD_AGENT_SOCK": os.path.join(self.dir, "agent.sock"),
            "SANDGUARD_STATE_DIR": os.path.join(self.dir, "state"),
            "SANDGUARD_LOG_DIR": os.path.join(self.dir, "log"),
            "SANDGUARD_RUN_DIR": os.path.join(self.dir, "run"),
        })
        for tenant, policy in tenants.items():
            self.write_policy(tenant, policy)
        self.proc = None
        self.log = None

    def write_policy(self, tenant, extra):
        policy = {
            "tenant": tenant,
            "limits": {"timeout_ms": 3000, "memory_mb": 256, "max_tasks": 32},
            "files": {"scratch_root": self.scratch,
                      "read_only": ["/usr", "/lib", "/lib64", "/bin", "/etc/ld.so.cache",
                                    "/etc/localtime", "/etc/locale.alias", "/dev/null",
                                    "/dev/urandom", self.programs]},
            "exec": {"allow": ["/usr/bin/python3*"]},
            "actions": {"egress": "kill", "file": "kill", "fork": "kill", "exec": "kill"},
            "failure": {"mode": "skip"},
        }
        for k, v in extra.items():
            if isinstance(v, dict) and isinstance(policy.get(k), dict):
                policy[k].update(v)
            else:
                policy[k] = v
        with open(os.path.join(self.policy_dir, tenant + ".json"), "w") as f:
            json.dump(policy, f, indent=1)

    def program(self, name, text):
        path = os.path.join(self.programs, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o644)
        return path

    def start(self, *extra, timeout=30):
        ready = os.path.join(self.dir, "ready")
        if os.path.exists(ready):
            os.unlink(ready)
        self.log = open(os.path.join(self.dir, "agent.log"), "a")
        self.proc = subprocess.Popen(
            [SANDGUARD, "agent", "--policy-dir", self.policy_dir, "--events", self.events,
             "--state-dir", self.env["SANDGUARD_STATE_DIR"], "--ready-file", ready] + list(extra),
            env=self.env, stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if os.path.exists(ready):
                return True
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        return False

    def log_tail(self, n=300):
        """The end of agent.log on one line (the reason when it did not start)."""
        if self.log:
            self.log.flush()
        with open(os.path.join(self.dir, "agent.log")) as f:
            return f.read()[-n:].replace("\n", " ")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)
        self.proc = None

    def run(self, args, **kw):
        return subprocess.run([SANDGUARD] + args, env=self.env, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, **kw)

    def exec_batch(self, tenant, program, items=3, extra=(), args=()):
        batch = os.path.join(self.dir, "batch-%s.json" % tenant)
        self.last_batch_id = "b-%d" % time.monotonic_ns()
        with open(batch, "w") as f:
            json.dump({"batch_id": self.last_batch_id,
                       "items": [{"prompt": "p", "completion": "c%d" % i} for i in range(items)]}, f)
        r = self.run(["exec", "--tenant", tenant, "--policy-dir", self.policy_dir,
                      "--batch", batch] + list(extra) + ["--", PY, program] + list(args))
        try:
            return json.loads(r.stdout), r
        except ValueError:
            return None, r

    def events_matching(self, **want):
        out = []
        try:
            with open(self.events) as f:
                for line in f:
                    e = json.loads(line)
                    if all(e.get(k) == v for k, v in want.items()):
                        out.append(e)
        except FileNotFoundError:
            pass
        return out

    def cleanup(self):
        self.stop()
        self.run(["agent", "--cleanup"])
        remove_cgroup_tree(self.env["SANDGUARD_CGROUP_ROOT"])
        if not os.environ.get("SANDGUARD_KEEP_TEST_DIR"):
            shutil.rmtree(self.dir, ignore_errors=True)


def finish():
    sys.exit(exit_code())


def _stream_name(path, i):
    return "%s.%d" % (path, i) if i else path


def _stream_listing(path):
    """(index, dev, ino) of each file of the stream now, the live file first.
    A gap of up to two names (a rotation in progress, or one cut short) is
    bridged; three missing names end it."""
    out, missing, i = [], 0, 0
    while missing < 3:
        try:
            st = os.stat(_stream_name(path, i))
            out.append((i, st.st_dev, st.st_ino))
            missing = 0
        except FileNotFoundError:
            missing += 1
        i += 1
    return out


def event_stream(path):
    """Every event of the stream at path and its rotated files, oldest first,
    each file read once while the agent rotates them (as
    src/telemetry/event_stream.c reads it): the names are listed until two
    listings agree, then each file is opened by its identity where it is
    now. Walking the names instead can skip the file a rotation moves past
    the reader."""
    prev = _stream_listing(path)
    for _ in range(64):
        cur = _stream_listing(path)
        if cur == prev:
            break
        prev = cur
    else:
        raise RuntimeError("%s: its files were renamed under every listing" % path)
    events = []
    for i, dev, ino in reversed(cur):
        missing = 0
        while missing < 3:
            try:
                with open(_stream_name(path, i)) as f:
                    st = os.fstat(f.fileno())
                    if (st.st_dev, st.st_ino) == (dev, ino):
                        events += [json.loads(l) for l in f if l.strip()]
                        break
                missing = 0
            except FileNotFoundError:
                missing += 1
            i += 1
    return events

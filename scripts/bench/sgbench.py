"""What every benchmark scenario shares: a private agent (its own cgroup
root, pins, socket, state, run and log dirs, exactly like the integration
tests' sgagent.py), sandbox cgroups registered by hand, timing and
summaries. Nothing here touches a real agent on the node."""
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "lib"))
from sgtest import cgroup2_mount, cgroup_v1_mounts, kill_and_rmdir, remove_cgroup_tree  # noqa: E402,F401

PY = "/usr/bin/python3"


def log(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


def summary(values):
    """median, min, max, n of a list of numbers (None when empty)."""
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values)}


def paired_ratio(values, baseline):
    """A row's "ratio" and "notes" for arms interleaved round by round: the
    median of each round's own ratio, and the medians' ratio beside it.
    This VM's CPU runs a Python start in 20 or in 29 ms for seconds at a
    time, so two medians of 40 shuffled rounds fall on whichever speed most
    of each arm's rounds met: six runs of scenario 9 in a row (2026-11-30)
    gave its warm launch 1.02-1.12x that way, 1.06-1.08x with the arms of a
    round (run back to back) compared with each other."""
    return {"ratio": statistics.median(v / b for v, b in zip(values, baseline)),
            "notes": "the median of %d rounds' own ratios; the medians' ratio %.2fx" %
                     (len(values), statistics.median(values) / statistics.median(baseline))}


def now_ms():
    return time.perf_counter_ns() / 1e6


def children_cpu_ms():
    """User + system CPU of every child (and their waited-for children)
    so far, in ms."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r.ru_utime + r.ru_stime) * 1000.0


def run_dir_on_tmpfs():
    """Whether the bench's run directory goes on tmpfs (Env says why), not
    beside the state on the disk (SGBENCH_RUN_DIR_ON_DISK=1)."""
    return os.environ.get("SGBENCH_RUN_DIR_ON_DISK") != "1"


class Env:
    """The bench's private world: a temp dir on the disk (policies,
    programs, scratch, state: the journal's fdatasync reaches a disk), a
    run directory and an event file on tmpfs, and the env vars that point
    every sandguard command at them.

    The run directory (in-flight records, admission tickets, slot locks)
    is on tmpfs because a node's is: /run/sandguard, the DaemonSet's
    hostPath, and /run is a tmpfs on a systemd node. This VM's /run is
    not, and a new file there costs ext4's inode search past the
    recently deleted ones (docs/performance-executor-cost.md).
    SGBENCH_RUN_DIR_ON_DISK=1 puts it beside the state, for that A/B."""

    def __init__(self, sandguard, tag):
        self.sandguard = sandguard
        self.dir = tempfile.mkdtemp(prefix="sandguard-bench.")
        os.chmod(self.dir, 0o755)
        self.shm = tempfile.mkdtemp(prefix="sandguard-bench.", dir="/dev/shm")
        os.chmod(self.shm, 0o755)
        self.policy_dir = self.mkdir("policies")
        self.scratch = self.mkdir("scratch")
        self.programs = self.mkdir("programs")
        self.events = os.path.join(self.shm, "events.jsonl")
        self.tag = "bench-%s-%d" % (tag, os.getpid())
        self.cgroot = os.path.join(cgroup2_mount(), "sandguard-" + self.tag)
        self.env = dict(os.environ)
        self.env.update({
            "SANDGUARD_CGROUP_ROOT": self.cgroot,
            "SANDGUARD_PIN_ROOT": "/sys/fs/bpf/sandguard-" + self.tag,
            "SANDGUARD_AGENT_SOCK": os.path.join(self.dir, "agent.sock"),
            "SANDGUARD_STATE_DIR": os.path.join(self.dir, "state"),
            "SANDGUARD_LOG_DIR": os.path.join(self.dir, "log"),
            "SANDGUARD_RUN_DIR": os.path.join(self.shm if run_dir_on_tmpfs() else self.dir, "run"),
        })
        self.agent = None

    def mkdir(self, name):
        path = os.path.join(self.dir, name)
        os.makedirs(path, exist_ok=True)
        os.chmod(path, 0o755)
        return path

    def write_policy(self, policy):
        with open(os.path.join(self.policy_dir, policy["tenant"] + ".json"), "w") as f:
            json.dump(policy, f, indent=1)

    def base_policy(self, tenant, **over):
        """A policy every scenario starts from: room for the loops (forks,
        tasks, concurrency), Python's files, /usr/bin/true for the fork
        loops. Fields in `over` replace whole sections."""
        policy = {
            "tenant": tenant,
            "limits": {"timeout_ms": 10000, "memory_mb": 512, "max_tasks": 64,
                       "max_forks": 10000000, "concurrency": 64},
            "files": {"scratch_root": self.scratch,
                      "read_only": ["/usr", "/lib", "/lib64", "/bin", "/etc/ld.so.cache",
                                    "/etc/localtime", "/etc/locale.alias", "/etc/python3.11",
                                    "/dev/null", "/dev/urandom", self.programs]},
            "exec": {"allow": ["/usr/bin/python3*", "/usr/bin/true"]},
            "actions": {"egress": "kill", "file": "kill", "fork": "kill", "exec": "kill"},
            "failure": {"mode": "skip"},
        }
        policy.update(over)
        return policy

    def write_program(self, name, text):
        path = os.path.join(self.programs, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o644)
        return path

    def run(self, args, **kw):
        return subprocess.run([self.sandguard] + args, env=self.env, capture_output=True,
                              text=True, stdin=subprocess.DEVNULL, **kw)

    def status(self):
        r = self.run(["status", "--json"], timeout=60)
        try:
            return json.loads(r.stdout)
        except ValueError:
            return None

    def cleanup(self):
        if self.agent:
            try:
                self.agent.stop()
                self.agent.unload()
            except (RuntimeError, OSError, subprocess.SubprocessError) as e:
                log("cleanup: %s" % e)
        remove_cgroup_tree(self.cgroot)
        # The executor mirrors the root's name in v1 hierarchies (hybrid
        # nodes): <v1 mount>/<root name>/<tenant>/<id>.
        for mnt in set(cgroup_v1_mounts().values()):
            remove_cgroup_tree(os.path.join(mnt, os.path.basename(self.cgroot)))
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.rmtree(self.shm, ignore_errors=True)


class Agent:
    """One private `sandguard agent`. stop() ends the process (its programs
    stay pinned and attached, as in production); unload() removes them:
    together, "not loaded"."""

    def __init__(self, env, events=None, extra=()):
        self.env = env
        self.events = events or env.events
        self.extra = list(extra)
        self.proc = None
        env.agent = self

    def start(self):
        ready = os.path.join(self.env.dir, "ready")
        if os.path.exists(ready):
            os.unlink(ready)
        logf = open(os.path.join(self.env.dir, "agent.log"), "a")
        t0 = time.monotonic()
        self.proc = subprocess.Popen(
            [self.env.sandguard, "agent", "--policy-dir", self.env.policy_dir,
             "--events", self.events, "--state-dir", self.env.env["SANDGUARD_STATE_DIR"],
             "--ready-file", ready] + self.extra,
            env=self.env.env, stdout=logf, stderr=logf, stdin=subprocess.DEVNULL)
        logf.close()
        while time.monotonic() - t0 < 60:
            if os.path.exists(ready):
                return time.monotonic() - t0
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        with open(os.path.join(self.env.dir, "agent.log")) as f:
            tail = f.read()[-2000:]
        raise RuntimeError("the agent did not start:\n" + tail)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=60)
        self.proc = None

    def unload(self):
        """Remove the pinned programs and maps: after this none of the
        agent's programs is attached (the "not loaded" arm depends on it)."""
        r = self.env.run(["agent", "--cleanup"], timeout=60)
        if r.returncode != 0:
            raise RuntimeError("sandguard agent --cleanup failed: %s" % r.stderr.strip())

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def cpu_ticks(self):
        """utime + stime of the agent, in clock ticks."""
        with open("/proc/%d/stat" % self.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])

    def memory_kib(self):
        """(VmRSS, VmHWM) in KiB."""
        rss = hwm = 0
        with open("/proc/%d/status" % self.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
                elif line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
        return rss, hwm


class Control:
    """A connection to the agent's control socket: one JSON request, one
    JSON reply line, in turn."""

    def __init__(self, env, timeout=10):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(env.env["SANDGUARD_AGENT_SOCK"])
        self.buf = b""

    def call(self, request):
        self.sock.sendall((json.dumps(request) + "\n").encode())
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise RuntimeError("the agent closed the control socket")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def close(self):
        self.sock.close()


def control(env, request):
    """One request on a connection of its own; the reply object."""
    conn = Control(env)
    try:
        return conn.call(request)
    finally:
        conn.close()


class SandboxCgroup:
    """A sandbox made by hand: <root>/<tenant>/<id> with its scratch
    <scratch_root>/<tenant>/<id>, for loops that join it themselves."""

    def __init__(self, env, tenant, name):
        self.env = env
        self.tenant = tenant
        self.name = name
        self.path = os.path.join(env.cgroot, tenant, name)
        self.scratch = os.path.join(env.scratch, tenant, name)
        os.makedirs(self.path, exist_ok=True)
        os.makedirs(self.scratch, exist_ok=True)
        self.id = os.stat(self.path).st_ino

    def register(self, conn=None):
        req = {"op": "register", "tenant": self.tenant, "sandbox": self.name, "cgroup_id": self.id}
        reply = conn.call(req) if conn else control(self.env, req)
        if not reply.get("ok"):
            raise RuntimeError("register %s/%s: %s" % (self.tenant, self.name, reply))

    def unregister(self, conn=None):
        req = {"op": "unregister", "cgroup_id": self.id}
        if conn:
            conn.call(req)
        else:
            control(self.env, req)

    def remove(self):
        kill_and_rmdir(self.path)
        shutil.rmtree(self.scratch, ignore_errors=True)


def foreign_agents():
    """Other sandguard agents' programs attached on this node right now
    (their global tracepoints run in both arms of every comparison)."""
    try:
        out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True,
                             timeout=30).stdout
        progs = json.loads(out or "[]")
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None
    return sum(1 for p in progs if p.get("name") == "sg_exec")


def machine():
    info = {"nproc": os.cpu_count(), "kernel": os.uname().release}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            info["mem_mib"] = int(f.readline().split()[1]) // 1024
    except OSError:
        pass
    return info

"""Scenario 5's CPU accounting: all the CPU a runner's window costs, from
the kernel's own counters, not from the processes the bench waits for.

A warm verifier test's child is reaped by its warm parent inside the
sandbox, and the parent by the sandbox's init, so no process of the bench
waits for them and RUSAGE_CHILDREN never sees their CPU. cgroup2's
cpu.stat usage_usec does: it is kept for every cgroup whatever the
controllers (hybrid nodes included), counts every task of the cgroup's
subtree, and a removed cgroup's usage stays in its parent's. So:

- sandguard's runners: the tenant's subtree of the executor's cgroup root
  (every sandbox of the tenant: inits, warm parents, tests), the
  executor's own CPU (/proc/<pid>/stat utime + stime: its threads, not
  its reaped children, which are in the subtree already), and the
  `sandguard exec` clients (RUSAGE_CHILDREN: the bench waits for them);
- the unsandboxed runner: a cgroup of its own that xargs starts in, so
  every `sh`, `timeout`, `python3` and `cmp` below it is counted;
- both: the agent's own CPU (utime + stime) during the window.

The warm parents' share is sampled: each sandbox's run-1 cgroup (the
parent's, docs/warm-interpreters.md) every SAMPLE_S; a parent's last few ms before
its sandbox goes are missed, so it is a lower bound. The child of a test
is counted in run-1 until it has joined its own cgroup (its first
copy-on-write faults after the fork)."""
import os
import resource
import threading
import time

SAMPLE_S = 0.02


def usage_ms(cgroup):
    """cpu.stat usage_usec of a cgroup2 directory, in ms; None when it is
    gone."""
    try:
        with open(os.path.join(cgroup, "cpu.stat")) as f:
            for line in f:
                key, value = line.split()
                if key == "usage_usec":
                    return int(value) / 1000.0
    except (OSError, ValueError):
        return None
    return None


def own_cpu_ms(pid):
    """utime + stime of a process (all its threads), without its reaped
    children's, in ms; 0 when it is gone or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, TypeError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")


def clients_cpu_ms():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r.ru_utime + r.ru_stime) * 1000.0


def node_busy_ms():
    """Every CPU's busy time since boot (/proc/stat: all but idle and
    iowait), in ms: what the node spent, counted or not."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    busy = sum(fields[:8]) - fields[3] - fields[4]  # user..steal, less idle and iowait
    return busy * 1000.0 / os.sysconf("SC_CLK_TCK")


def node_faults():
    """Page faults on the node since boot (/proc/vmstat pgfault): a count
    this VM's CPU speed does not change, where a fault costs 17-50 µs
    (docs/performance.md, "The machine")."""
    with open("/proc/vmstat") as f:
        for line in f:
            if line.startswith("pgfault "):
                return int(line.split()[1])
    return 0


def grown(before, after):
    """A cgroup's usage over a window: it may appear during the window
    (the tenant's subtree, with its first sandbox) and start from 0."""
    if after is None:
        return 0.0
    return after - before if before is not None and after >= before else after


class Meter:
    """Per-runner CPU totals (ms) by part: `clients`, `executor`,
    `sandboxes`, `parents` (of `sandboxes`), `plain`, `plain_rusage` (the
    same runner seen through RUSAGE_CHILDREN, a cross-check), `agent`, and
    `node`: every CPU's busy time in the window (the bench's own included),
    a cross-check that the parts miss no large cost (the kernel's workers
    that clean up after sandboxes are in it, in no part). Besides the CPU
    (in no total): `wall`, the windows' length, so that `node` over
    `wall` x CPUs is how busy the node was, and `faults`, the node's page
    faults."""

    def __init__(self, cgroot, plain_cgroup, executor_pid, agent_pid):
        self.cgroot = cgroot
        self.plain_cgroup = plain_cgroup
        self.executor_pid = executor_pid
        self.agent_pid = agent_pid
        self.totals = {}
        self.lock = threading.Lock()
        self.current = None  # (runner, tenant, parents) while a window is open
        self.seen = {}  # run-1 cgroup -> the last usage sampled
        self.stopping = threading.Event()
        self.sampler = threading.Thread(target=self.sample, daemon=True)
        os.makedirs(plain_cgroup, exist_ok=True)
        self.sampler.start()

    def add(self, who, part, ms):
        with self.lock:
            parts = self.totals.setdefault(who, {})
            parts[part] = parts.get(part, 0.0) + ms

    def sample(self):
        while not self.stopping.wait(SAMPLE_S):
            with self.lock:
                current = self.current
            if not current or not current[2]:
                continue
            top = os.path.join(self.cgroot, current[1])
            try:
                boxes = os.listdir(top)
            except OSError:
                continue
            for box in boxes:
                path = os.path.join(top, box, "run-1")
                now = usage_ms(path)
                if now is None:
                    continue
                before = self.seen.get(path, 0.0)
                self.seen[path] = now
                self.add(current[0], "parents", now - before)

    def point(self, tenant):
        return {"clients": clients_cpu_ms(), "executor": own_cpu_ms(self.executor_pid),
                "agent": own_cpu_ms(self.agent_pid),
                "sandboxes": usage_ms(os.path.join(self.cgroot, tenant)) if tenant else None,
                "plain": usage_ms(self.plain_cgroup), "node": node_busy_ms(),
                "faults": node_faults(), "wall": time.monotonic() * 1000.0}

    def window(self, who, tenant, run, parents=False):
        """Runs run() as runner `who` (sandguard's tenant, or None for the
        unsandboxed runner) and books the window's CPU; run()'s value.
        parents: the tenant's sandboxes run warm interpreters (sampled)."""
        before = self.point(tenant)
        with self.lock:
            self.current = (who, tenant, parents)
        try:
            return run()
        finally:
            with self.lock:
                self.current = None
            after = self.point(tenant)
            self.add(who, "agent", after["agent"] - before["agent"])
            self.add(who, "node", after["node"] - before["node"])
            self.add(who, "faults", after["faults"] - before["faults"])
            self.add(who, "wall", after["wall"] - before["wall"])
            if tenant:
                self.add(who, "clients", after["clients"] - before["clients"])
                self.add(who, "executor", after["executor"] - before["executor"])
                self.add(who, "sandboxes", grown(before["sandboxes"], after["sandboxes"]))
            else:
                self.add(who, "plain", grown(before["plain"], after["plain"]))
                self.add(who, "plain_rusage", after["clients"] - before["clients"])

    def per_test(self, who, n_tests):
        """{part: ms per test}, with `total`: every part but the parents
        (within sandboxes) and the cross-checks; `faults` a count per test,
        and `busy` the share of the node's CPUs busy in the windows."""
        parts = {k: v / n_tests for k, v in self.totals.get(who, {}).items()}
        parts["total"] = sum(v for k, v in parts.items()
                             if k not in ("parents", "plain_rusage", "node", "faults", "wall"))
        if parts.get("wall"):
            parts["busy"] = parts.get("node", 0.0) / (parts["wall"] * (os.cpu_count() or 1))
        return parts

    def join_plain(self):
        """For the unsandboxed runner's preexec_fn: into its cgroup."""
        with open(os.path.join(self.plain_cgroup, "cgroup.procs"), "w") as f:
            f.write("0")

    def close(self):
        self.stopping.set()
        self.sampler.join()
        for _ in range(50):
            try:
                os.rmdir(self.plain_cgroup)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)

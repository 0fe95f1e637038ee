"""Scenario 15, environments' sessions (issue 33): what a live session
costs, each figure against a baseline measured in the same run.

  - a step, {"argv": ["/bin/true"]} in a live session, over HTTP (one
    keep-alive connection, the best a client can do) and through the
    tree's stdlib client (a connection per call), and `sandguard session
    exec ID /bin/true` (the CLI: a process of its own, sh -c, a
    connection), p50 and p99, against a bare fork+exec+wait of /bin/true
    on the node (posix_spawn + waitpid from this process), interleaved;
  - a session's create + close (HTTP, no kernel, no files) against a cold
    `sandguard exec` of scenario 1's trivial reward (SANDGUARD_WARM=0);
  - a fork (n 1) of a session holding a 10 MiB scratch against a create;
  - IDLE concurrent idle sessions: the host memory sandguard uses per
    session: serve's RSS growth, the agent's, and the sessions' memory
    cgroups (v1 memory.usage_in_bytes / v2 memory.current, with kernel
    memory where the kernel reports it apart).

serve runs in the bench's environment with a slot uid range of its own
(SANDGUARD_UID_BASE), so the IDLE sessions never take another checkout's
slots."""
import http.client
import json
import os
import random
import subprocess
import time

import launch
import warm
from sgbench import PY, cgroup_v1_mounts, log, now_ms, summary

TENANT = "sessions"
UID_BASE = 71000 + int(os.environ.get("SANDGUARD_TEST_UID_SHIFT", "0"))
TRUE = "/bin/true"
BIG_MIB = 10
SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def policy(env, idle):
    p = env.base_policy(TENANT)
    p["limits"].update({"memory_mb": 64, "max_tasks": 16, "concurrency": idle + 8})
    p["exec"]["allow"] += ["/bin/true", "/usr/bin/sh", "/usr/bin/dash", "/usr/bin/dd"]
    p["session"] = {"max_sessions": idle + 8, "idle_timeout_s": 3600, "max_lifetime_s": 7200,
                    "cpu_seconds": 3600}
    p["files"]["scratch_mb"] = 2 * BIG_MIB + 8
    return p


class Serve:
    def __init__(self, env):
        self.env = dict(env.env, SANDGUARD_UID_BASE=str(UID_BASE))
        self.daemon = warm.Daemon(_Env(env, self.env), ["serve", "--listen", "127.0.0.1:0",
                                                        "--policy-dir", env.policy_dir],
                                  "listening on http://127.0.0.1:")
        self.port = int(self.daemon.line.split("127.0.0.1:")[1].split()[0])
        self.url = "http://127.0.0.1:%d" % self.port
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)

    def post(self, path, body):
        """One request on the keep-alive connection: (status, reply)."""
        for attempt in (0, 1):
            try:
                self.conn.request("POST", path, json.dumps(body).encode(),
                                  {"Content-Type": "application/json", "X-Sandguard-Tenant": TENANT})
                r = self.conn.getresponse()
                return r.status, json.loads(r.read() or b"null")
            except (http.client.HTTPException, ConnectionError):
                self.conn.close()  # the server closed it: a new one, once
                if attempt:
                    raise

    def create(self):
        st, r = self.post("/v1/sessions", {})
        if st != 201:
            raise RuntimeError("session create: %d %r" % (st, r))
        return r["session"]

    def call(self, sid, verb, body, want=200):
        st, r = self.post("/v1/sessions/%s/%s" % (sid, verb), body)
        if st != want:
            raise RuntimeError("session %s: %d %r" % (verb, st, r))
        return r

    def step(self, sid, argv):
        r = self.call(sid, "exec", {"argv": argv})
        if r["status"] != "ok":
            raise RuntimeError("step %r: %r" % (argv, r))
        return r

    def rss_kib(self):
        with open("/proc/%d/status" % self.daemon.proc.pid) as f:
            return next(int(ln.split()[1]) for ln in f if ln.startswith("VmRSS:"))

    def stop(self):
        self.conn.close()
        self.daemon.stop()


class _Env:
    """warm.Daemon's view of the bench environment, with serve's own env."""

    def __init__(self, env, vars):
        self.sandguard, self.dir, self.env = env.sandguard, env.dir, vars


def bare():
    t0 = now_ms()
    pid = os.posix_spawn(TRUE, [TRUE], {})
    _, status = os.waitpid(pid, 0)
    dt = now_ms() - t0
    if status:
        raise RuntimeError("/bin/true: status %d" % status)
    return dt


def fdatasync_ms(directory, n):
    """An append of a record's size (700 B) and its fdatasync on the
    journal's disk (each step's booking pays one), ms each."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "bench-fdatasync")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    out = []
    try:
        for _ in range(n):
            t0 = now_ms()
            os.write(fd, b"x" * 700)
            os.fdatasync(fd)
            out.append(now_ms() - t0)
    finally:
        os.close(fd)
        os.unlink(path)
    return out


def p99(values):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(0.99 * (len(v) - 1))))]


def stdlib_client():
    import sys
    sys.path.insert(0, os.path.join(SRC, "clients", "python"))
    from sandguard.session import Session
    return Session


def steps(env, serve, rounds, rng):
    """Wall ms per step of each way, interleaved in a shuffled order."""
    sid = serve.create()
    Session = stdlib_client()
    client = Session.attach(serve.url, sid, tenant=TENANT)
    cli = [env.sandguard, "session", "exec", "--url", serve.url, "--tenant", TENANT, sid, TRUE]

    inside = []  # the reply's wall_ms: the step's own run in the sandbox

    def http_step():
        t0 = now_ms()
        r = serve.step(sid, [TRUE])
        dt = now_ms() - t0
        inside.append(r["wall_ms"])
        return dt

    def client_step():
        t0 = now_ms()
        r = client.exec_argv([TRUE])
        dt = now_ms() - t0
        if r["status"] != "ok":
            raise RuntimeError("client step: %r" % r)
        return dt

    def cli_step():
        t0 = now_ms()
        p = subprocess.run(cli, env=serve.env, capture_output=True)
        dt = now_ms() - t0
        if p.returncode:
            raise RuntimeError("session exec: %d %r" % (p.returncode, p.stderr[-300:]))
        return dt

    ways = {"bare": bare, "http": http_step, "client": client_step, "cli": cli_step}
    for f in ways.values():  # untimed: page cache, the connection
        f()
    times = {k: [] for k in ways}
    for _ in range(rounds):
        order = list(ways)
        rng.shuffle(order)
        for k in order:
            times[k].append(ways[k]())
    serve.call(sid, "close", {})
    times["reply_wall"] = inside[1:]
    times["fdatasync"] = fdatasync_ms(env.env["SANDGUARD_STATE_DIR"], min(rounds, 200))
    return times


def create_close(env, serve, rounds, rng):
    """Wall ms of a session's create + close, and of a cold `sandguard exec`
    of scenario 1's trivial reward."""
    prog, batch = launch.setup(env)
    cold = [env.sandguard, "exec", "--tenant", launch.TENANT, "--policy-dir", env.policy_dir,
            "--batch", batch, "--", PY, prog]
    cold_env = dict(env.env, SANDGUARD_WARM="0")

    def session():
        t0 = now_ms()
        sid = serve.create()
        serve.call(sid, "close", {})
        return now_ms() - t0

    def exec_cold():
        t0 = now_ms()
        p = subprocess.run(cold, env=cold_env, capture_output=True, text=True)
        dt = now_ms() - t0
        if p.returncode or not launch.scores_ok("sandguard", p.stdout):
            raise RuntimeError("cold exec: %d %s %s" % (p.returncode, p.stdout[-300:], p.stderr[-300:]))
        return dt

    ways = {"session": session, "exec": exec_cold}
    for f in ways.values():
        f()
    times = {k: [] for k in ways}
    for _ in range(rounds):
        for k in rng.sample(list(ways), len(ways)):
            times[k].append(ways[k]())
    return times


def fork_vs_create(serve, rounds, rng):
    """Wall ms of a fork (n 1) of a session holding BIG_MIB MiB, and of a
    create; each made session is closed untimed."""
    parent = serve.create()
    serve.step(parent, ["/usr/bin/dd", "if=/dev/urandom", "of=big.bin", "bs=1M",
                        "count=%d" % BIG_MIB, "status=none"])

    def fork():
        t0 = now_ms()
        kid = serve.call(parent, "fork", {"n": 1}, want=201)["forks"][0]
        dt = now_ms() - t0
        return dt, kid

    def create():
        t0 = now_ms()
        sid = serve.create()
        return now_ms() - t0, sid

    ways = {"fork": fork, "create": create}
    times = {k: [] for k in ways}
    _, first = fork()
    got = serve.call(first, "get", {"paths": ["big.bin"]})["files"]["big.bin"]
    if not got or len(got) * 3 // 4 < BIG_MIB << 20:
        raise RuntimeError("the fork has no copy of the %d MiB file" % BIG_MIB)
    serve.call(first, "close", {})
    for _ in range(rounds):
        for k in rng.sample(list(ways), len(ways)):
            dt, sid = ways[k]()
            times[k].append(dt)
            serve.call(sid, "close", {})
    serve.call(parent, "close", {})
    return times


def cgroup_memory(env):
    """(bytes, kernel bytes or None, sessions) summed over the tenant's
    sandbox cgroups: the v1 memory hierarchy where there is one, else v2."""
    mnt = cgroup_v1_mounts().get("memory")
    if mnt:
        tdir = os.path.join(mnt, os.path.basename(env.cgroot), TENANT)
        files = ("memory.usage_in_bytes", "memory.kmem.usage_in_bytes")
    else:
        tdir = os.path.join(env.cgroot, TENANT)
        files = ("memory.current", None)
    total = kernel = n = 0
    have_kernel = False
    for name in os.listdir(tdir) if os.path.isdir(tdir) else []:
        d = os.path.join(tdir, name)
        if not os.path.isdir(d):
            continue
        try:
            with open(os.path.join(d, files[0])) as f:
                total += int(f.read())
            n += 1
            if files[1] and os.path.exists(os.path.join(d, files[1])):
                with open(os.path.join(d, files[1])) as f:
                    kernel += int(f.read())
                have_kernel = True
            elif not files[1]:
                with open(os.path.join(d, "memory.stat")) as f:
                    st = dict(ln.split() for ln in f)
                if "kernel" in st:
                    kernel += int(st["kernel"])
                    have_kernel = True
        except (OSError, ValueError):
            continue
    return total, kernel if have_kernel else None, n


def meminfo_kib():
    """The node's used memory (MemTotal - MemAvailable) and Slab, in KiB:
    node-wide, so other work on the machine moves them too."""
    with open("/proc/meminfo") as f:
        m = {ln.split(":")[0]: int(ln.split()[1]) for ln in f}
    return m["MemTotal"] - m["MemAvailable"], m["Slab"]


def idle_memory(env, serve, agent, count):
    """Serve's and the agent's RSS growth, and the sandbox cgroups' memory,
    with `count` idle sessions live (and the node's used memory and slab,
    a cross-check that counts what no cgroup is charged for)."""
    time.sleep(0.5)
    rss0, arss0, node0 = serve.rss_kib(), agent.memory_kib()[0], meminfo_kib()
    t0 = time.monotonic()
    made = [serve.create() for _ in range(count)]
    took = time.monotonic() - t0
    time.sleep(1.0)
    rss1, arss1, node1 = serve.rss_kib(), agent.memory_kib()[0], meminfo_kib()
    cg, kmem, n = cgroup_memory(env)
    for sid in made:
        serve.call(sid, "close", {})
    return {"sessions": count, "create_s": took, "serve_rss_kib": [rss0, rss1],
            "agent_rss_kib": [arss0, arss1], "cgroup_bytes": cg, "cgroup_kernel_bytes": kmem,
            "cgroups_seen": n, "node_used_kib": [node0[0], node1[0]],
            "node_slab_kib": [node0[1], node1[1]]}


def measure(env, agent, rounds, idle, seed=14):
    env.write_policy(policy(env, idle))
    rng = random.Random(seed)
    serve = Serve(env)
    doc = {}
    try:
        log("scenario 15: steps, %d interleaved rounds" % rounds)
        doc["steps_ms"] = steps(env, serve, rounds, rng)
        log("scenario 15: create+close against a cold exec, %d rounds" % max(rounds // 10, 5))
        doc["create_close_ms"] = create_close(env, serve, max(rounds // 10, 5), rng)
        log("scenario 15: fork of a %d MiB session against a create, %d rounds" %
            (BIG_MIB, max(rounds // 10, 5)))
        doc["fork_ms"] = fork_vs_create(serve, max(rounds // 10, 5), rng)
        log("scenario 15: %d idle sessions" % idle)
        doc["idle"] = idle_memory(env, serve, agent, idle)
    finally:
        serve.stop()
    return rows(doc), doc


def rows(doc):
    out = []
    t = doc["steps_ms"]
    base = summary(t["bare"])
    b99 = p99(t["bare"])
    labels = {"http": ("a step over HTTP (keep-alive)", "<= 1.5x"),
              "client": ("a step, stdlib client (a connection per call)", None),
              "cli": ("a step, `sandguard session exec` (CLI, sh -c)", "<= 1.2x")}
    for k, (label, target) in labels.items():
        s = summary(t[k])
        out.append({"scenario": "15 sessions", "name": label + ", p50", "unit": "ms/step",
                    "value": s, "baseline": base, "baseline_name": "bare fork+exec+wait of /bin/true",
                    "ratio": s["median"] / base["median"], "target": target, "lower_is_better": True})
        if k == "http" and t.get("reply_wall"):
            w = summary(t["reply_wall"])
            out[-1]["notes"] = ("the reply's wall_ms (the step's run in its sandbox, from its start "
                                "to its end) median %.1f ms, p99 %.1f ms; the rest is the call "
                                "(HTTP, its turn, booking); an fdatasync'd 700 B append on the journal's disk "
                                "(each step's booking has one): median %.1f ms, p99 %.1f ms" %
                                (w["median"], p99(t["reply_wall"]), summary(t["fdatasync"])["median"],
                                 p99(t["fdatasync"])))
        v99 = p99(t[k])
        out.append({"scenario": "15 sessions", "name": label + ", p99", "unit": "ms/step",
                    "value": {"median": v99, "min": v99, "max": v99, "n": 1},
                    "baseline": {"median": b99, "min": b99, "max": b99, "n": 1},
                    "baseline_name": "bare, p99", "ratio": v99 / b99, "target": target,
                    "lower_is_better": True})
    c = doc["create_close_ms"]
    s, b = summary(c["session"]), summary(c["exec"])
    out.append({"scenario": "15 sessions", "name": "a session's create + close (HTTP)",
                "unit": "ms", "value": s, "baseline": b,
                "baseline_name": "cold sandguard exec, trivial reward",
                "ratio": s["median"] / b["median"], "target": "<= 1.0x", "lower_is_better": True})
    f = doc["fork_ms"]
    s, b = summary(f["fork"]), summary(f["create"])
    out.append({"scenario": "15 sessions", "name": "fork of a %d MiB session (n 1)" % BIG_MIB,
                "unit": "ms", "value": s, "baseline": b, "baseline_name": "its create",
                "ratio": s["median"] / b["median"], "target": "<= 0.5x", "lower_is_better": True})
    i = doc["idle"]
    n = i["sessions"]
    serve_b = (i["serve_rss_kib"][1] - i["serve_rss_kib"][0]) * 1024.0 / n
    agent_b = (i["agent_rss_kib"][1] - i["agent_rss_kib"][0]) * 1024.0 / n
    cg_b = i["cgroup_bytes"] / max(i["cgroups_seen"], 1)
    per = (serve_b + agent_b + cg_b) / (1 << 20)
    kmem = i["cgroup_kernel_bytes"]
    notes = ("per session: serve RSS %.0f KiB, agent RSS %.0f KiB, sandbox cgroup %.0f KiB (%s); "
             "%d cgroups seen of %d sessions; %d created in %.1f s; node-wide cross-check (other work "
             "moves it too): used memory +%.0f KiB, slab +%.0f KiB per session" %
             (serve_b / 1024, agent_b / 1024, cg_b / 1024,
              "kernel %.0f KiB of it" % (kmem / max(i["cgroups_seen"], 1) / 1024) if kmem is not None
              else "kernel memory not reported apart", i["cgroups_seen"], n, n, i["create_s"],
              (i["node_used_kib"][1] - i["node_used_kib"][0]) / n,
              (i["node_slab_kib"][1] - i["node_slab_kib"][0]) / n))
    out.append({"scenario": "15 sessions", "name": "host memory per idle session, %d live" % n,
                "unit": "MiB", "value": {"median": per, "min": per, "max": per, "n": 1},
                "baseline": {"median": 2.0, "min": 2.0, "max": 2.0, "n": 1},
                "baseline_name": "the target, 2 MiB", "ratio": per / 2.0, "target": "<= 1.0x",
                "lower_is_better": True, "notes": notes})
    return out

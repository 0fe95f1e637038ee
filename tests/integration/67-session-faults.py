#!/usr/bin/env python3
"""Environments' sessions under faults (issue 33, item 6), each checked on
the host side: no sandbox cgroup, scratch or process left behind, and the
session's final record in the journal.

  - an agent restart (SIGTERM, start again) keeps every live session
    enforced: a forbidden connect still gets EPERM (the host's listener
    sees nothing), a fork bomb still ends its session as
    tenant_policy_violation, rule fork;
  - a client asking for MANY idle sessions is bounded by max_sessions
    (429 with Retry-After), and the idle timeout closes every session it
    got, each booked final "idle";
  - a client that opens sessions and vanishes (SIGKILL, a create and a
    step in flight): the step runs to its end and is booked, the idle
    timeout reaps every session, each booked;
  - `sandguard tenant pause` refuses new steps (423, nothing booked, nothing
    run), resume lets them run again;
  - the journal's disk below its reserve (a small tmpfs as the state
    directory, as 47-ledger-faults does): a session's idle end is still
    booked (in the reserve); create, fork and step are 507, nothing runs
    unbooked; with the space back, steps run again."""
import json
import os
import socket
import subprocess
import sys
import threading
import time
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import sgagent  # noqa: E402
import sgjournal  # noqa: E402
from sgagent import SANDGUARD, report  # noqa: E402
from sgserve import Server, can_run  # noqa: E402
from sgtest import accepts_nothing, exit_code, sandbox_cgroups, slot_processes, uid_base  # noqa: E402

sys.path.insert(0, os.path.join(sgagent.SRC, "clients", "python"))
from sandguard.session import Session, SessionError  # noqa: E402

UID_BASE = uid_base(70500)  # our own 256 slot uids (66-sessions: the default)
SLOTS = 256
NODE_CPUS = 2                # what admission may commit here ($SANDGUARD_NODE_CPUS)
SEATS = SLOTS // 2           # the node's session seats (node_sessions.h): the rest serve short runs
MANY = 1000                 # sessions a client asks for
MAX_SESSIONS = 100          # what its policy allows (under the node's 128 session seats)
IDLE_S = 3
MANY_IDLE_S = 10            # longer than MANY creates take here (2-7 s)
FORK_BOMB = "import os\nwhile True:\n    os.fork()\n"
CONNECT = ("import socket, errno\n"
           "c = socket.socket()\n"
           "try:\n"
           "    c.connect(('127.0.0.1', %d)); print('connected')\n"
           "except OSError as e:\n"
           "    print('refused', errno.errorcode[e.errno])\n")


def policy(agent, max_sessions=4, idle_s=60, memory_mb=256, cpu=1.0, queue_timeout_ms=30000, timeout_ms=5000):
    return {
        "limits": {"timeout_ms": timeout_ms, "memory_mb": memory_mb, "max_tasks": 32, "max_forks": 200,
                   "concurrency": 16, "cpu": cpu, "queue_timeout_ms": queue_timeout_ms},
        "exec": {"allow": ["/usr/bin/python3*", "/usr/bin/sh", "/usr/bin/dash", "/usr/bin/touch",
                           "/usr/bin/true", "/usr/bin/echo", "/usr/bin/sleep"]},
        "actions": {"egress": "deny", "file": "deny", "fork": "kill", "exec": "deny"},
        "session": {"max_sessions": max_sessions, "idle_timeout_s": idle_s, "max_lifetime_s": 600,
                    "cpu_seconds": 600},
        "files": {"scratch_root": agent.scratch, "scratch_mb": 16,
                  "read_only": ["/usr", "/lib", "/lib64", "/bin", "/etc/ld.so.cache",
                                "/etc/localtime", "/etc/locale.alias", "/etc/python3.11",
                                "/dev/null", "/dev/urandom"]},
    }


def start_serve(agent):
    """sgserve's Server on the agent's directories; .url its address."""
    serve = Server(types.SimpleNamespace(dir=agent.dir, policies=agent.policy_dir, env=agent.env))
    serve.url = "http://127.0.0.1:%d" % serve.port
    return serve


def records(agent):
    return [r for r in sgjournal.read(agent.env["SANDGUARD_STATE_DIR"]) if r.get("mode") == "session"]


def finals_of(agent, sid):
    return [r for r in records(agent) if r.get("batch_id") == sid and r["final"]]


def cgroup_processes(agent, tenant):
    """Pids in the tenant's cgroups below the test's cgroup root (v2 or a
    v1 mirror)."""
    name = "%s/%s" % (os.path.basename(agent.env["SANDGUARD_CGROUP_ROOT"]), tenant)
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cgroup" % pid) as f:
                if "/%s/" % name in f.read():
                    found.append(int(pid))
        except OSError:
            continue
    return found


def live_sandboxes(agent, tenant):
    """The tenant's sandbox cgroups in the v2 tree."""
    tdir = os.path.join(agent.env["SANDGUARD_CGROUP_ROOT"], tenant)
    return sorted(d for d in (os.listdir(tdir) if os.path.isdir(tdir) else [])
                  if os.path.isdir(os.path.join(tdir, d)))


def leftovers(agent, tenant, wait_s=15):
    """What the tenant's ended sessions left on the host: sandbox cgroups
    (v2 and v1), scratch directories, processes in its cgroups or of the
    test's slot uids (any tenant's: call it when no step runs). Waits up to wait_s for a teardown under way."""
    deadline = time.time() + wait_s
    while True:
        sdir = os.path.join(agent.scratch, tenant)
        left = sandbox_cgroups(agent.env["SANDGUARD_CGROUP_ROOT"], tenant) + \
            [os.path.join(sdir, d) for d in (os.listdir(sdir) if os.path.isdir(sdir) else [])] + \
            ["pid %d (slot uid)" % p for p in slot_processes(UID_BASE, SLOTS)] + \
            ["pid %d (in a sandbox cgroup)" % p for p in cgroup_processes(agent, tenant)]
        if not left or time.time() > deadline:
            return left
        time.sleep(0.2)


def wait_finals(agent, ids, timeout):
    """{id: [final records]} once every id has one, or at the timeout."""
    deadline = time.time() + timeout
    while True:
        recs = records(agent)
        got = {i: [r for r in recs if r.get("batch_id") == i and r["final"]] for i in ids}
        if all(got.values()) or time.time() > deadline:
            return got
        time.sleep(0.5)


def listener():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    return srv


def case_agent_restart(agent, serve):
    tenant = "f-restart"
    srv = listener()
    a = Session(serve.url, tenant=tenant, kernel="python")
    b = Session(serve.url, tenant=tenant, kernel="python")
    try:
        r = a.code("x = 41")
        if r["status"] != "ok":
            return "a step before the restart: %r" % r
        agent.stop()
        if not agent.start():
            return "the agent did not start again: " + agent.log_tail()
        r = a.code(CONNECT % srv.getsockname()[1] + "x += 1\nx")
        if r["status"] != "ok" or "refused EPERM" not in r["stdout"] or "42" not in r["stdout"]:
            return "a forbidden connect after the restart (and x kept): %r" % r
        if not accepts_nothing(srv):
            return "the host's listener got a connection from a session after the restart"
        r = b.code(FORK_BOMB)
        if not r["session_ended"] or r["cause"] != "tenant_policy_violation" or r["rule"] != "fork":
            return "a fork bomb after the restart: %r" % r
    finally:
        srv.close()
        a.close()
        b.close()
    fa, fb = finals_of(agent, a.id), finals_of(agent, b.id)
    if len(fa) != 1 or fa[0].get("session_end") != "closed":
        return "the closed session's final: %r" % fa
    if len(fb) != 1 or fb[0].get("session_end") != "policy" or fb[0]["rule"] != "fork" or \
            fb[0]["cause"] != "tenant_policy_violation":
        return "the fork bomb's session final: %r" % fb
    left = leftovers(agent, tenant)
    return "left behind: %r" % left if left else None


def many_idle(agent, serve, tenant, bound, status, during=None):
    """MANY creates from 8 threads at once: `bound` made at most (at least
    bound - 8, the slack for slots another run of ours may hold), the rest
    refused with `status` and Retry-After; all reaped as idle, booked once
    each, nothing left. `during`: called while they are held, its reason
    (or None) joins the case's. Returns a reason, or None with a summary."""
    made, refused, other = [], [], []
    peak = [0]
    lock = threading.Lock()
    todo = iter(range(MANY))

    def worker():
        while True:
            with lock:
                if next(todo, None) is None:
                    return
            try:
                s = Session(serve.url, tenant=tenant)
                with lock:
                    made.append(s.id)
            except SessionError as e:
                with lock:
                    (refused if e.status == status and e.retry_after else other).append(str(e))

    def watch(stop):
        while not stop.is_set():
            peak[0] = max(peak[0], len(live_sandboxes(agent, tenant)))
            time.sleep(0.1)

    t0 = time.time()
    stop = threading.Event()
    w = threading.Thread(target=watch, args=(stop,), daemon=True)
    w.start()
    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    created_s = time.time() - t0
    stop.set()
    w.join()
    meanwhile = during(agent) if during else None
    try:
        if meanwhile:
            return meanwhile
        return check_many(agent, serve, tenant, bound, status, made, refused, other, peak[0],
                          created_s, t0)
    finally:
        for i in made:  # after a failure: nothing of this case for the next
            Session.attach(serve.url, i, tenant=tenant).close()


def check_many(agent, serve, tenant, bound, status, made, refused, other, peak, created_s, t0):
    listed = len(Session.list(serve.url, tenant=tenant))
    if other:
        return "refusals other than %d with Retry-After: %d, e.g. %s" % (status, len(other), other[:3])
    # Made over the whole run may pass the bound when the first ones were
    # reaped as idle while the client still asked: the bound is on live ones.
    if len(made) < bound - 8 or len(made) + len(refused) != MANY or peak > bound or listed > bound:
        return "%d made, %d refused (%d) of %d asked in %.1f s; the bound %d; at most %d live, " \
            "%d listed at the end; e.g. %s" % (len(made), len(refused), status, MANY, created_s, bound,
                                               peak, listed, refused[:1])
    # The probe of leftovers sees live sessions: cgroups, scratch, inits.
    live = leftovers(agent, tenant, wait_s=0)
    kinds = {k: sum(k in x for x in live) for k in ("/scratch/", "/sandguard-", "cgroup)")}
    # (one reaper pass of slack: on a slow machine some may already be idle)
    if min(kinds.values()) < max(1, min(listed, bound) - 64):
        return "the leftover probe does not see the live sessions: %r" % kinds
    got = wait_finals(agent, made, MANY_IDLE_S + 60)
    reaped_s = time.time() - t0 - created_s
    bad = {i: f for i, f in got.items() if len(f) != 1 or f[0].get("session_end") != "idle"}
    if bad:
        return "%d sessions not booked exactly once as idle, e.g. %r" % (len(bad), list(bad.items())[:2])
    if Session.list(serve.url, tenant=tenant):
        return "sessions listed after the idle timeout"
    left = leftovers(agent, tenant)
    if left:
        return "left behind: %d, e.g. %r" % (len(left), left[:5])
    many_idle.summary = "%d asked in %.1f s: at most %d live (%d made in all), %d refused %d; " \
        "all reaped %.1f s later" % (MANY, created_s, peak, len(made), len(refused), status, reaped_s)
    return None


def case_many_idle(agent, serve):
    """The tenant's bound: max_sessions (429)."""
    why = many_idle(agent, serve, "f-many", MAX_SESSIONS, 429)
    case_many_idle.summary = None if why else many_idle.summary
    return why


def batch_runs(agent):
    """Another tenant's batch, while sessions hold every seat: it gets a
    sandbox (a uid slot) and its scores."""
    code = "import json, sys; b = json.load(sys.stdin); print(json.dumps([1.0] * len(b['items'])))"
    r = subprocess.run([SANDGUARD, "exec", "--tenant", "f-batch", "--policy-dir", agent.policy_dir, "--batch",
                        "-", "--", "/usr/bin/python3", "-c", code], env=agent.env, capture_output=True, text=True,
                       input=json.dumps({"batch_id": "beside-sessions", "items": [{"prompt": "p", "completion": "c"}] * 3}))
    try:
        res = json.loads(r.stdout)
    except ValueError:
        res = {}
    if res.get("cause") != "ok" or res.get("scores") != [1.0, 1.0, 1.0]:
        return "a batch beside the sessions: %s %s" % (r.stdout.strip()[-300:], r.stderr.strip()[-300:])
    return None


def case_many_idle_node(agent, serve):
    """A policy allowing all MANY: the node's session seats (half its slot
    uids) bound them (503), and another tenant's batch still runs."""
    why = many_idle(agent, serve, "f-node", SEATS, 503, during=batch_runs)
    case_many_idle_node.summary = None if why else many_idle.summary
    return why


VANISHER = r"""
import sys, threading
sys.path.insert(0, sys.argv[2])
from sandguard.session import Session
made = [Session(sys.argv[1], tenant="f-vanish", run_id="vanisher") for _ in range(5)]
for s in made:
    print(s.id, flush=True)
# Killed with a step and a create in flight.
threading.Thread(target=made[0].run, args=("sleep 2; echo done > slept",), daemon=True).start()
print("last", flush=True)
Session(sys.argv[1], tenant="f-vanish", run_id="vanisher")
"""


def case_vanish(agent, serve):
    tenant = "f-vanish"
    p = subprocess.Popen([sys.executable, "-c", VANISHER, serve.url,
                          os.path.join(sgagent.SRC, "clients", "python")],
                         stdout=subprocess.PIPE, text=True)
    ids = []
    for line in p.stdout:
        if line.strip() == "last":
            break
        ids.append(line.strip())
    deadline = time.time() + 10  # kill it once its step runs
    while time.time() < deadline and not any(
            x["session"] == ids[0] and x["busy"]
            for x in Session.list(serve.url, tenant=tenant, run_id="vanisher")):
        time.sleep(0.02)
    p.kill()
    p.wait()
    if len(ids) != 5:
        return "the client made %r" % ids
    listed = [x["session"] for x in Session.list(serve.url, tenant=tenant, run_id="vanisher")]
    if not set(ids) <= set(listed):
        return "the vanished client's sessions are not live: %r of %r" % (listed, ids)
    # The one in flight may have been made after its client was gone.
    got = wait_finals(agent, set(ids) | set(listed), IDLE_S + 30)
    time.sleep(IDLE_S + 2)
    every = {r["batch_id"] for r in records(agent) if r.get("run_id") == "vanisher"} | set(got)
    got = wait_finals(agent, every, 5)
    bad = {i: f for i, f in got.items() if len(f) != 1 or f[0].get("session_end") != "idle"}
    if bad:
        return "not booked exactly once as idle: %r" % bad
    if Session.list(serve.url, tenant=tenant, run_id="vanisher"):
        return "the vanished client's sessions are still listed"
    steps = [r for r in records(agent) if r.get("batch_id") == ids[0] and not r["final"]]
    if [(r.get("step"), r["cause"]) for r in steps] != [(1, "ok")]:
        return "the step in flight when its client vanished: %r" % steps
    left = leftovers(agent, tenant)
    if left:
        return "left behind: %r" % left
    case_vanish.summary = "%d sessions (%d from the create in flight), each booked idle; " \
        "the step in flight ran to its end and was booked" % (
        len(every), len(every) - len(ids))
    return None


def two_steps_closed(agent, tenant, sid):
    """Steps 1 and 2 booked (none for what was refused), then "closed";
    nothing left behind."""
    recs = [r for r in records(agent) if r.get("batch_id") == sid]
    if [r.get("step") for r in recs if not r["final"]] != [1, 2] or \
            [r.get("session_end") for r in recs if r["final"]] != ["closed"]:
        return "journal: %r" % [(r.get("step"), r["final"], r.get("session_end")) for r in recs]
    left = leftovers(agent, tenant)
    return "left behind: %r" % left if left else None


def case_node_cpu(agent, serve):
    """A step takes the node's CPU in admission's line like any run: while
    another tenant's batch holds every committed CPU (SANDGUARD_NODE_CPUS
    is NODE_CPUS here), a step waits its queue_timeout_ms and is refused
    (503, Retry-After), nothing run or booked; once the CPU is free, the
    next step runs. Without it, sessions could take CPU admission promised
    to other tenants' runs."""
    tenant = "f-cpu"
    s = Session(serve.url, tenant=tenant)
    code = "import json, sys, time; b = json.load(sys.stdin); time.sleep(6); " \
        "print(json.dumps([1.0] * len(b['items'])))"
    hog = subprocess.Popen([SANDGUARD, "exec", "--tenant", "f-hog", "--policy-dir", agent.policy_dir, "--batch",
                            "-", "--", "/usr/bin/python3", "-c", code], env=agent.env, stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        hog.stdin.write(json.dumps({"batch_id": "cpu-hog", "items": [{"prompt": "p", "completion": "c"}]}))
        hog.stdin.close()
        hog.stdin = None
        time.sleep(2)  # the batch is admitted and holds the node's CPUs
        t0 = time.time()
        try:
            r = s.run("touch ran-without-cpu")
            return "a step ran while the node's CPUs were committed: %r" % r
        except SessionError as e:
            waited = time.time() - t0
            if e.status != 503 or not e.retry_after or "CPU" not in str(e):
                return "refused step: %s %r" % (e.status, str(e))
        out, err = hog.communicate(timeout=60)
        if json.loads(out or "{}").get("cause") != "ok":
            return "the batch holding the CPU: %s %s" % (out[-300:], err[-300:])
        if s.run("test ! -e ran-without-cpu")["status"] != "ok":
            return "the step after the batch (or the refused one ran)"
        steps = [r for r in records(agent) if r.get("batch_id") == s.id and not r["final"]]
        if [r.get("step") for r in steps] != [1]:
            return "booked steps: %r" % [(r.get("step"), r["cause"]) for r in steps]
        case_node_cpu.summary = "refused 503 after %.1f s (queue_timeout_ms 1500), ran once free" % waited
        return None
    finally:
        if hog.poll() is None:
            hog.kill()
            hog.communicate()
        s.close()


def case_pause(agent, serve):
    tenant = "f-pause"
    s = Session(serve.url, tenant=tenant)
    try:
        if s.run("true")["status"] != "ok":
            return "a step before the pause"
        p = agent.run(["tenant", "pause", tenant, "--reason", "67-session-faults"])
        if p.returncode != 0:
            return "tenant pause: %d %s" % (p.returncode, p.stderr)
        try:
            r = s.run("touch ran-while-paused")
            return "a step of a paused tenant ran: %r" % r
        except SessionError as e:
            if e.status != 423 or "paused" not in e.reason:
                return "a step while paused: %s" % e
        if s.read("ran-while-paused") is not None:
            return "the refused step left its file"
        p = agent.run(["tenant", "resume", tenant])
        if p.returncode != 0:
            return "tenant resume: %d %s" % (p.returncode, p.stderr)
        r = s.run("echo back")
        if r["status"] != "ok" or r["stdout"] != "back\n" or r["step"] != 2:
            return "a step after resume: %r" % r
    finally:
        agent.run(["tenant", "resume", tenant])
        s.close()
    return two_steps_closed(agent, tenant, s.id)


def fill(path, leave):
    st = os.statvfs(os.path.dirname(path))
    with open(path, "wb") as f:
        f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - leave))


def case_disk_full(agent, serve):
    tenant = "f-disk"
    state = agent.env["SANDGUARD_STATE_DIR"]
    if not os.path.ismount(state):
        return ("SKIP", "the state directory is not the test's tmpfs (mount refused)")
    filler = os.path.join(state, "filler")
    s = Session(serve.url, tenant=tenant)
    idle = Session(serve.url, tenant="f-vanish", run_id="disk")  # idle_timeout_s IDLE_S
    try:
        if s.run("true")["status"] != "ok":
            return "a step before the disk fills"
        fill(filler, 4 << 20)  # 4 MiB left, below the reserve's 8
        # A session's end is booked in the reserve: the idle one's final.
        f = wait_finals(agent, [idle.id], IDLE_S + 15)[idle.id]
        if len(f) != 1 or f[0].get("session_end") != "idle":
            return "a session idle on a full disk: its final %r" % f
        if leftovers(agent, "f-vanish"):
            return "the session idle on a full disk left %r" % leftovers(agent, "f-vanish")
        before = len(records(agent))
        for what, call in (("create", lambda: Session(serve.url, tenant=tenant)),
                           ("step", lambda: s.run("touch ran-on-full-disk")),
                           ("fork", lambda: s.fork(1))):
            try:
                call()
                return "a %s on a full journal disk was served" % what
            except SessionError as e:
                if e.status != 507 or "disk is full" not in e.reason:
                    return "a %s on a full disk: %s" % (what, e)
        if s.read("ran-on-full-disk") is not None:
            return "the refused step ran"
        if len(records(agent)) != before:
            return "records were added while the disk was full"
        live = live_sandboxes(agent, tenant)
        if live != [s.info()["sandbox"]]:
            return "sandboxes of the tenant after the refusals: %r" % live
        os.unlink(filler)
        r = s.run("echo again")
        if r["status"] != "ok" or r["step"] != 2:
            return "a step with the space back: %r" % r
    finally:
        if os.path.exists(filler):
            os.unlink(filler)
        s.close()
    return two_steps_closed(agent, tenant, s.id)


def main():
    if not can_run("session faults"):
        return 0
    agent = sgagent.Agent({}, name="sessfaults")
    agent.env["SANDGUARD_UID_BASE"] = str(UID_BASE)
    agent.env["SANDGUARD_NODE_CPUS"] = str(NODE_CPUS)
    for tenant, kw in (("f-restart", {}), ("f-pause", {}), ("f-disk", {}),
                       ("f-vanish", {"max_sessions": 8, "idle_s": IDLE_S}),
                       ("f-many", {"max_sessions": MAX_SESSIONS, "idle_s": MANY_IDLE_S, "memory_mb": 32}),
                       ("f-node", {"max_sessions": MANY, "idle_s": MANY_IDLE_S, "memory_mb": 32}),
                       ("f-batch", {}), ("f-cpu", {"cpu": 1.0, "queue_timeout_ms": 1500}),
                       ("f-hog", {"cpu": float(NODE_CPUS), "timeout_ms": 20000})):
        agent.write_policy(tenant, policy(agent, **kw))
    state = agent.env["SANDGUARD_STATE_DIR"]
    os.makedirs(state)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", state]).returncode == 0
    serve = None
    try:
        if not agent.start():
            report("FAIL", "agent start", agent.log_tail())
            return 1
        serve = start_serve(agent)
        for name, fn in [("an agent restart keeps live sessions enforced (connect EPERM, fork bomb)",
                          case_agent_restart),
                         ("%d idle sessions asked: max_sessions bounds them, idle reaps all" % MANY,
                          case_many_idle),
                         ("%d idle sessions allowed: the node's %d session seats bound them (503), a batch still "
                          "runs, idle reaps all" % (MANY, SEATS), case_many_idle_node),
                         ("a client that vanishes: its sessions reaped as idle", case_vanish),
                         ("a step waits for the node's CPU like any run: refused 503 while another "
                          "tenant holds it all, runs once it is free", case_node_cpu),
                         ("tenant pause refuses steps (423), resume runs them", case_pause),
                         ("a full journal disk: create, step, fork 507, nothing unbooked; an idle end booked",
                          case_disk_full)]:
            try:
                why = fn(agent, serve)
            except Exception as e:  # noqa: BLE001
                why = "exception: %r" % e
            if isinstance(why, tuple):
                report(why[0], name, why[1])
            elif why:
                report("FAIL", name, why)
            else:
                report("PASS", name, getattr(fn, "summary", ""))
            if serve.proc.poll() is not None:
                report("FAIL", "serve is alive after: " + name, "exit %s" % serve.proc.returncode)
                serve = start_serve(agent)
    finally:
        if serve:
            serve.stop()
        agent.stop()
        if mounted:
            subprocess.run(["umount", "-l", state])
        agent.cleanup()
    return exit_code()


if __name__ == "__main__":
    sys.exit(main())

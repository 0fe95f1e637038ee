#!/usr/bin/env python3
"""Exactly once, under load and faults. Every outcome is journaled before
its result is returned, and the agent's ledger is the fold of the journal:

  - 300 concurrent `sandguard exec` runs: 0 lost, 0 platform_error;
  - `kill -9` of the agent (twice) while batches run, then a restart: every
    batch booked exactly once, in the journal and in the ledger;
  - a second record of an outcome id (what the orphan reaper writes for an
    attempt its executor had booked) changes nothing, and is counted as a
    duplicate in `status`;
  - an executor in the middle of a run keeps talking to a restarted agent
    (its connection is opened again; no "no verdict" fallback);
  - an agent restarted after `agent --cleanup` in the middle of a verifier
    request (new maps pinned): the request's next test is enrolled in the
    new agent's maps (the executor keeps the maps it opened, and must see
    they are not the pinned ones any more): its denied connect is still
    EPERM, and the new agent books the denial;
  - a verifier request's records (its tests and its final) are synced
    together: one fdatasync for the request, after every record is
    written and before the result (strace), not one per record.

The exactly-once check is tests/lib/sgjournal.py's, which the chaos stage
reuses."""
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgagent import Agent, PY, SANDGUARD, check, finish  # noqa: E402
import sgjournal  # noqa: E402
from sgtest import uid_base  # noqa: E402

GOOD = """import json, sys
b = json.load(sys.stdin)
print(json.dumps([0.25 * (i % 4) for i in range(len(b["items"]))]))
"""
# GOOD, half a second long: batches that are still running when the agent
# is killed, however fast a launch is.
SLOW = """import json, sys, time
b = json.load(sys.stdin)
time.sleep(0.5)
print(json.dumps([0.25 * (i % 4) for i in range(len(b["items"]))]))
"""
# Waits (without a deadline of its own) until the test creates a flag file.
WAIT_FOR_FLAG = """import json, os, sys, time
b = json.load(sys.stdin)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
print(json.dumps([1.0] * len(b["items"])))
"""
# A verifier program: test "wait" waits for the flag file (argv[1]), any
# other input is a port on 127.0.0.1 to connect to (egress denied).
WAIT_OR_CONNECT = """import os, socket, sys, time
what = sys.stdin.read().strip()
if what == "wait":
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.05)
    print("waited")
else:
    try:
        socket.create_connection(("127.0.0.1", int(what)), timeout=5)
        print("connected")
    except PermissionError:
        print("EPERM")
    except OSError as e:
        print("errno", e.errno)
"""
TENANTS = ["t1", "t2", "t3", "t4"]
POLICY = {"limits": {"timeout_ms": 60000, "memory_mb": 256, "max_tasks": 32, "concurrency": 8,
                     "on_excess": "wait", "queue_timeout_ms": 3600000}}


class Batches:
    """Batch files and `sandguard exec` processes, started at once."""

    def __init__(self, a, prog, tag):
        self.a, self.prog, self.tag, self.procs, self.ids = a, prog, tag, [], {}

    def start(self, tenant, n):
        for _ in range(n):
            bid = "%s-%s-%d" % (self.tag, tenant, len(self.procs))
            path = os.path.join(self.a.dir, "batches", bid + ".json")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                json.dump({"batch_id": bid, "items": [{"prompt": "p", "completion": "c%d" % i}
                                                      for i in range(3)]}, f)
            self.ids.setdefault(tenant, set()).add(bid)
            self.procs.append(subprocess.Popen(
                [SANDGUARD, "exec", "--tenant", tenant, "--policy-dir", self.a.policy_dir,
                 "--batch", path, "--", PY, self.prog],
                env=self.a.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL, text=True))

    def wait(self):
        """[(result or None, stderr)] in start order."""
        out = []
        for p in self.procs:
            stdout, stderr = p.communicate(timeout=1800)
            try:
                out.append((json.loads(stdout), stderr))
            except ValueError:
                out.append((None, stderr))
        return out



def sandbox_running(tdir):
    """Whether a sandbox cgroup under tdir has a task in it."""
    try:
        for d in os.listdir(tdir):
            with open(os.path.join(tdir, d, "cgroup.procs")) as f:
                if f.read().strip():
                    return True
    except OSError:
        pass
    return False

def concurrent_300(a, state, progs):
    # Under the sanitizers (check-asan) each executor is several times
    # heavier: a third of them says the same thing without starving the box.
    n = 100 if os.environ.get("SANDGUARD_ASAN") else 300
    b = Batches(a, progs["good"], "conc")
    for i in range(n):
        b.start(TENANTS[i % len(TENANTS)], 1)
    results = b.wait()
    causes = {}
    for r, _ in results:
        causes[r["cause"] if r else "no result"] = causes.get(r["cause"] if r else "no result", 0) + 1
    print("%d concurrent runs: causes %s" % (n, causes))
    odd = ["%s: %s" % (r["batch_id"], r.get("detail")) if r else "no result: %s" % err[-200:]
           for r, err in results if not r or r["cause"] != "ok"]
    check(causes == {"ok": n}, "%d concurrent exec runs: all ok, 0 platform_error" % n,
          "%s; %s" % (causes, "; ".join(odd[:3])))
    rep = sgjournal.exactly_once(state, sgjournal.settled(a), b.ids)
    print("%d concurrent runs: %s" % (n, sgjournal.summary(rep)))
    # Retried attempts too: a platform error that a retry hid is still one
    # (an in-flight record discarded by a concurrent reaper was, here).
    ours = set().union(*b.ids.values())
    retried = ["%s attempt %s: %s" % (o["batch_id"], o.get("attempt"), (o.get("detail") or "")[:200])
               for o in sgjournal.read(state) if o.get("batch_id") in ours and o.get("cause") != "ok"]
    check(not retried, "%d concurrent exec runs: no attempt failed, retried or not" % n,
          "%d: %s" % (len(retried), "; ".join(retried[:3])))
    check(not rep["problems"] and rep["lost"] == 0,
          "%d concurrent exec runs: 0 lost, 0 counted twice, one final record per batch" % n,
          "; ".join(rep["problems"]))


def kill_during_batches(a, state, progs):
    """Batches run while the agent is killed with SIGKILL (twice) and
    restarted; none is lost or counted twice. New batches keep coming
    until both kills are done, so that each kill finds batches running
    however fast they are on this node."""
    IN_FLIGHT = 8
    b = Batches(a, progs["slow"], "kill")
    kills = []

    def killer():
        for _ in range(2):
            time.sleep(1.5)
            running = sum(p.poll() is None for p in b.procs)
            a.proc.send_signal(signal.SIGKILL)
            a.proc.wait()
            kills.append(running)
            time.sleep(0.5)
            a.start()

    for t in TENANTS[:2]:
        b.start(t, 20)
    k = threading.Thread(target=killer)
    k.start()
    # At least IN_FLIGHT batches stay running until both kills are done (a
    # batch takes about half a second; at most 400 in all).
    while k.is_alive() and len(b.procs) < 400:
        short = IN_FLIGHT - sum(p.poll() is None for p in b.procs)
        if short > 0:
            b.start(TENANTS[2 + len(b.procs) % 2], short)
        time.sleep(0.02)
    for t in TENANTS[2:]:
        b.start(t, 10)
    results = b.wait()
    k.join()
    causes = {}
    for r, _ in results:
        causes[r["cause"] if r else "no result"] = causes.get(r["cause"] if r else "no result", 0) + 1
    print("kill -9 of the agent x%d during %d batches: causes %s" % (len(kills), len(results), causes))
    check(len(kills) == 2 and all(kills), "the agent was killed twice while batches ran",
          "batches running at each kill: %s" % kills)
    check(causes == {"ok": len(results)}, "batches around agent kills are all ok", str(causes))
    a.stop()
    if not a.start():
        check(False, "the agent restarts after kill -9", "")
        return
    rep = sgjournal.exactly_once(state, sgjournal.settled(a), b.ids)
    print("kill -9 x2, restart: " + sgjournal.summary(rep))
    check(not rep["problems"], "kill -9 of the agent during batches, restart: every batch booked "
          "exactly once (journal and ledger)", "; ".join(rep["problems"]))


def duplicate_ids(a, state):
    """The orphan reaper's record of an attempt its executor had booked:
    the same outcome id, booked again as platform_error. Ignored."""
    before = sgjournal.settled(a)
    recs = sgjournal.read(state)
    victim = next(r for r in recs if r["final"] and r["cause"] == "ok")
    dup = dict(victim, cause="platform_error", **{"class": "platform"}, detail="executor died")
    seg = sgjournal.segments(state)[-1]
    with open(os.path.join(sgjournal.journal_dir(state), ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with open(seg, "a") as f:
            f.write(json.dumps(dup) + "\n")
    dups = 0
    deadline = time.time() + 30
    while time.time() < deadline and dups < 1:
        dups = sgjournal.status(a).get("ledger", {}).get("duplicates", 0)
        time.sleep(0.1)
    after = sgjournal.top(a)
    check(dups == 1, "a second record of an outcome id is seen and ignored (status: 1 duplicate)",
          str(sgjournal.status(a).get("ledger")))
    check(before.get("tenants") == after.get("tenants"),
          "a second record of an outcome id changes no count", "")
    rep = sgjournal.exactly_once(state, after)
    check(not rep["problems"] and rep["duplicates_ignored"] == 1,
          "journal and ledger agree after the duplicate: " + sgjournal.summary(rep),
          "; ".join(rep["problems"]))


def reconnect(a, progs):
    """An executor mid-run when the agent restarts: its next call (the
    verdict) goes to the new agent over a new connection."""
    for how in ("SIGTERM", "SIGKILL"):
        flag = os.path.join(a.programs, "flag-" + how)
        bid = "b-reconnect-%s" % how
        path = os.path.join(a.dir, "batches", bid + ".json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump({"batch_id": bid, "items": [{"prompt": "p", "completion": "c"}]}, f)
        p = subprocess.Popen([SANDGUARD, "exec", "--tenant", "t1", "--policy-dir", a.policy_dir,
                              "--batch", path, "--", PY, progs["wait"], flag],
                             env=a.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # Registered and running: a task is in the sandbox cgroup (the
        # executor registers after making the cgroup and before starting
        # the sandbox in it, so the cgroup alone can come before the
        # register message).
        tdir = os.path.join(a.env["SANDGUARD_CGROUP_ROOT"], "t1")
        deadline = time.time() + 30
        while time.time() < deadline and not sandbox_running(tdir):
            time.sleep(0.05)
        a.proc.send_signal(getattr(signal, how))
        a.proc.wait()
        ok = a.start()
        with open(flag, "w"):
            pass
        out, err = p.communicate(timeout=120)
        try:
            r = json.loads(out)
        except ValueError:
            r = None
        check(ok and r is not None and r["cause"] == "ok",
              "agent restarted (%s) during a run: the batch is ok" % how, out[-200:] + err[-300:])
        check("no verdict" not in err and "no answer" not in err,
              "agent restarted (%s) during a run: the executor reached the new agent" % how, err[-300:])


def repinned(a, progs):
    """An agent restarted on new maps (`agent --cleanup` first) while a
    verifier request's first test runs: its second test, in the same
    sandbox enrolled again, is in the new maps."""
    import socket
    a.write_policy("t-repin", {"limits": {"timeout_ms": 60000, "memory_mb": 256, "max_tasks": 32,
                                          "concurrency": 1},
                               "actions": {"egress": "deny"}})
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    flag = os.path.join(a.programs, "flag-repin")
    path = os.path.join(a.dir, "tests-repin.json")
    with open(path, "w") as f:
        json.dump([{"input": "wait", "output": "waited"},
                   {"input": str(srv.getsockname()[1]), "output": "EPERM"}], f)
    p = subprocess.Popen([SANDGUARD, "exec", "--tenant", "t-repin", "--policy-dir", a.policy_dir,
                          "--tests", path, "--batch-id", "b-repin", "--", PY, progs["connect"], flag],
                         env=a.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    tdir = os.path.join(a.env["SANDGUARD_CGROUP_ROOT"], "t-repin")
    deadline = time.time() + 30
    while time.time() < deadline and not sandbox_running(tdir):
        time.sleep(0.05)
    pin = os.path.join(a.env["SANDGUARD_PIN_ROOT"], "sg_sandboxes")
    before = os.stat(pin).st_ino
    a.stop()
    a.run(["agent", "--cleanup"])
    ok = a.start()
    repinned_ok = ok and os.stat(pin).st_ino != before
    since = os.path.getsize(a.events) if os.path.exists(a.events) else 0
    with open(flag, "w"):
        pass
    out, err = p.communicate(timeout=120)
    srv.close()
    try:
        r = json.loads(out)
    except ValueError:
        r = None
    check(repinned_ok, "agent restarted after --cleanup: sg_sandboxes pinned anew", a.log_tail())
    tests = r.get("tests", []) if r else []
    check(r is not None and r.get("reward") == 1 and len(tests) == 2 and
          all(t.get("status") == "pass" for t in tests),
          "agent re-pinned its maps mid-request: the next test's connect is still EPERM",
          out[-400:] + err[-300:])
    with open(a.events) as f:
        f.seek(since)
        new = [json.loads(x) for x in f if x.strip()]
    denied = [e for e in new if e.get("type") == "egress_denied" and e.get("tenant") == "t-repin"
              and e.get("action") == "denied"]
    # (Its sandbox and batch ids are not on it: the new agent was never
    # told of the sandbox, and names it from its own registrations.)
    check(len(denied) == 1, "agent re-pinned its maps mid-request: the new agent booked the denial",
          str([(e.get("type"), e.get("tenant")) for e in new][-10:]))


ECHO = """import sys
print(sys.stdin.read().strip())
"""


def group_commit(a, state, progs):
    """Six tests and a final: seven records, one fdatasync, which comes
    after the last of them is written and before the result is printed."""
    if not shutil.which("strace"):
        check(False, "strace is installed (scripts/install-deps.sh installs it)", "")
        return
    path = os.path.join(a.dir, "tests-group.json")
    with open(path, "w") as f:
        json.dump([{"input": str(i), "output": str(i if i != 3 else 99)} for i in range(6)], f)
    trace = os.path.join(a.dir, "group.strace")
    env = dict(a.env)
    if "ASAN_OPTIONS" in env:
        env["ASAN_OPTIONS"] += ":detect_leaks=0"  # LeakSanitizer stops under ptrace
    p = subprocess.run(["strace", "-f", "-qq", "-s", "65536", "-o", trace, "-e",
                        "trace=fdatasync,write,writev", SANDGUARD, "exec", "--tenant", "t1",
                        "--policy-dir", a.policy_dir, "--tests", path, "--batch-id", "b-group",
                        "--", PY, progs["echo"]],
                       env=env, capture_output=True, text=True, timeout=300)
    try:
        r = json.loads(p.stdout)
    except ValueError:
        r = None
    tests = r.get("tests", []) if r else []
    check(r is not None and len(tests) == 6 and
          [t.get("status") for t in tests] == ["pass"] * 3 + ["fail"] + ["pass"] * 2,
          "group commit: a verifier request under strace is judged as ever",
          p.stdout[-400:] + p.stderr[-300:])
    recs = [x for x in sgjournal.read(state) if x.get("batch_id") == "b-group"]
    check(len(recs) == 7 and sum(1 for x in recs if x.get("final")) == 1,
          "group commit: six test records and one final in the journal",
          str([(x.get("test"), x.get("final")) for x in recs]))
    with open(trace) as f:
        lines = f.read().splitlines()
    # A journal record is one writev (src/telemetry/journal.c); the
    # result is the executor's write to its stdout, the only one that
    # names the reward (the tests' programs print digits).
    events = []
    for ln in lines:
        call = ln.split(" ", 1)[-1].lstrip()
        if call.startswith("fdatasync("):
            events.append("sync")
        elif call.startswith("writev(") and "b-group" in call:
            events.append("record")
        elif call.startswith("write(1,") and "reward" in call:
            events.append("result")
    check(events.count("sync") == 1 and events.count("record") == 7 and
          events.index("sync") > max(i for i, e in enumerate(events) if e == "record") and
          "result" in events and events.index("sync") < events.index("result"),
          "group commit: one fdatasync for the request's seven records, before its result",
          " ".join(events))


def main():
    a = Agent({t: POLICY for t in TENANTS}, name="journal")
    a.env["SANDGUARD_UID_BASE"] = str(uid_base(64000))
    state = a.env["SANDGUARD_STATE_DIR"]
    try:
        progs = {"good": a.program("good.py", GOOD), "slow": a.program("slow.py", SLOW),
                 "wait": a.program("wait.py", WAIT_FOR_FLAG),
                 "connect": a.program("wait_or_connect.py", WAIT_OR_CONNECT),
                 "echo": a.program("echo.py", ECHO)}
        if not a.start():
            check(False, "agent starts", open(os.path.join(a.dir, "agent.log")).read()[-500:])
            return
        concurrent_300(a, state, progs)
        kill_during_batches(a, state, progs)
        duplicate_ids(a, state)
        reconnect(a, progs)
        repinned(a, progs)
        group_commit(a, state, progs)
    finally:
        a.cleanup()


main()
finish()

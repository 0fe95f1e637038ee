#!/usr/bin/env python3
"""The ledger's checkpoint and the outcome journal when things go wrong:

  - `sandguard top --ledger F` is read-only: a corrupt F is reported, never
    renamed, and the counts come from the journal;
  - a directory where the checkpoint should be is reported as what it is
    (left in place, not "set aside"), and the ledger is rebuilt from the
    journal, visibly (status, /metrics);
  - one bad field costs one tenant's row: every other tenant is restored
    (its kills too), the bad one is rebuilt from the journal;
  - a corrupt checkpoint is moved aside and the rebuild is visible;
  - the journal rotates; the agent folds across segments; `top` without an
    agent folds the same counts; segments deleted before they were folded
    are a visible gap;
  - the journal's disk full (a small tmpfs as the state directory): new
    runs refused with platform_error naming the disk, /readyz and
    `status --check` red, an unbookable result withheld; after the disk is
    freed and the agent restarted, nothing written is lost;
  - issue 32: the disk (12 MiB) filled completely under concurrent batches
    of two tenants, the agent killed and restarted at 100% full, space
    freed: the agent's ledger, ledger.json and `top --state-dir` equal a
    fresh fold of the journal per tenant and cause, and a refusal that
    could not be written says so and has no record;
  - 1,024 tenants: `top` and `status` answer (replies far over 64 KiB)."""
import collections
import glob
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgagent import Agent, PY, SANDGUARD, check, finish, skip  # noqa: E402,F401
import sgjournal  # noqa: E402
from sgtest import free_port, uid_base  # noqa: E402

GOOD = """import json, sys
b = json.load(sys.stdin)
print(json.dumps([0.25 * (i % 4) for i in range(len(b["items"]))]))
"""
EGRESS = """import json, socket, sys
b = json.load(sys.stdin)
socket.create_connection(("127.0.0.1", 9), timeout=1)
print(json.dumps([1.0] * len(b["items"])))
"""
CRASH = """import sys
sys.stdin.read()
sys.exit(3)
"""
ROTATE = {"SANDGUARD_JOURNAL_SEGMENT_BYTES": "4096", "SANDGUARD_JOURNAL_KEEP": "1000"}


def http(url):
    """(status, body) of a GET."""
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def metric(a, name, **labels):
    _, text = http("http://%s/metrics" % a.metrics)
    want = ",".join('%s="%s"' % kv for kv in sorted(labels.items()))
    for line in text.splitlines():
        head, _, value = line.rpartition(" ")
        n, _, rest = head.partition("{")
        if n == name and ",".join(sorted(rest.rstrip("}").split(","))) == want:
            return float(value)
    return None


def js(r):
    try:
        return json.loads(r.stdout)
    except ValueError:
        return {}


top, status, settled = sgjournal.top, sgjournal.status, sgjournal.settled


def rows(t):
    return {r["tenant"]: r for r in t.get("tenants", [])}


def start(a):
    a.metrics = "127.0.0.1:%d" % free_port()
    ok = a.start("--metrics", a.metrics)
    if not ok:
        check(False, "agent starts", open(os.path.join(a.dir, "agent.log")).read()[-500:])
    return ok


def agent_log(a):
    with open(os.path.join(a.dir, "agent.log")) as f:
        return f.read()


def agrees(a, what):
    rep = sgjournal.exactly_once(a.env["SANDGUARD_STATE_DIR"], settled(a))
    check(not rep["problems"], "%s: journal and ledger agree (%s)" % (what, sgjournal.summary(rep)),
          "; ".join(rep["problems"]))


def read_only_top(a, progs):
    """top --ledger on a corrupt checkpoint: reported, left as it is."""
    state = a.env["SANDGUARD_STATE_DIR"]
    other = os.path.join(a.dir, "copy")
    shutil.copytree(os.path.join(state, "journal"), os.path.join(other, "journal"))
    ck = os.path.join(other, "ledger.json")
    with open(ck, "w") as f:
        f.write('{"version": 2, "tenants": ')
    t = top(a, "--ledger", ck)
    check(t.get("source") == "journal" and any("corrupt" in n or "line" in n for n in t.get("notes", [])),
          "top --ledger: a corrupt checkpoint is reported", str(t)[:300])
    with open(ck) as f:
        same = f.read() == '{"version": 2, "tenants": '
    check(same and not glob.glob(ck + ".corrupt-*"),
          "top --ledger is read-only: the corrupt file is neither renamed nor changed",
          str(os.listdir(other)))
    want = sgjournal.per_tenant(sgjournal.read(other))
    got = rows(t)
    check(all(got.get(k, {}).get("batches_ok", 0) + got.get(k, {}).get("batches_failed", 0) == v["batches"]
              for k, v in want.items()) and want,
          "top --ledger: the counts are folded from the journal", "%s vs %s" % (
              {k: v["batches"] for k, v in want.items()}, {k: v.get("batches_ok") for k, v in got.items()}))


def directory_checkpoint(a):
    state = a.env["SANDGUARD_STATE_DIR"]
    ck = os.path.join(state, "ledger.json")
    a.stop()
    os.rename(ck, ck + ".saved")
    os.mkdir(ck)
    if not start(a):
        return
    st = status(a).get("ledger", {})
    why = (st.get("last_rebuild") or {}).get("why", "")
    log = agent_log(a)
    check("Is a directory" in why and "left where it is" in why and "set aside" not in log,
          "a directory as the checkpoint is reported as such, left in place (not 'set aside')", why)
    check(st.get("rebuilds", {}).get("unreadable") == 1 and
          metric(a, "sandguard_ledger_rebuilds_total", reason="unreadable") == 1,
          "the rebuild is visible in status and /metrics", str(st))
    agrees(a, "checkpoint is a directory")
    time.sleep(1.5)  # a tick: the agent tries to save
    st = status(a).get("ledger", {})
    check(st.get("checkpoint_error") and os.path.isdir(ck),
          "a checkpoint that cannot be saved is said in status", str(st))
    a.stop()
    os.rmdir(ck)
    os.rename(ck + ".saved", ck)


def bad_field(a):
    """One tenant's bad field: that tenant alone is rebuilt from the journal."""
    state = a.env["SANDGUARD_STATE_DIR"]
    ck = os.path.join(state, "ledger.json")
    if not start(a):
        return
    before = rows(settled(a))
    a.stop()
    with open(ck) as f:
        doc = json.load(f)
    doc["tenants"]["alpha"]["attempts"] = "lots"
    with open(ck, "w") as f:
        json.dump(doc, f)
    if not start(a):
        return
    after = rows(settled(a))
    st = status(a).get("ledger", {})
    why = (st.get("last_rebuild") or {}).get("why", "")
    check(st.get("rebuilds", {}).get("tenant_rows") == 1 and "alpha" in why and "attempts" in why,
          "one bad field: the rebuild names the tenant and the field", why)
    check(after.get("bravo") == before.get("bravo") and before.get("bravo", {}).get("kills", {}).get("egress"),
          "one bad field: every other tenant is restored, kills included", "%s -> %s" % (
              before.get("bravo"), after.get("bravo")))
    b, c = before.get("alpha", {}), after.get("alpha", {})
    check(c.get("batches_ok") == b.get("batches_ok") and c.get("failures") == b.get("failures"),
          "one bad field: that tenant's outcomes are rebuilt from the journal", "%s -> %s" % (b, c))
    check(metric(a, "sandguard_ledger_rebuilds_total", reason="tenant_rows") == 1,
          "one bad field: visible in /metrics", "")
    check(os.path.isfile(ck) and not glob.glob(ck + ".corrupt-*"),
          "one bad field: the checkpoint is not set aside", str(os.listdir(state)))
    agrees(a, "one bad field")


def corrupt_checkpoint(a):
    state = a.env["SANDGUARD_STATE_DIR"]
    ck = os.path.join(state, "ledger.json")
    a.stop()
    with open(ck, "w") as f:
        f.write("this is not a ledger")
    if not start(a):
        return
    st = status(a).get("ledger", {})
    aside = glob.glob(ck + ".corrupt-*")
    check(len(aside) == 1 and open(aside[0]).read() == "this is not a ledger",
          "a corrupt checkpoint is moved aside, byte for byte", str(os.listdir(state)))
    check(st.get("rebuilds", {}).get("corrupt") == 1 and aside and
          aside[0] in (st.get("last_rebuild") or {}).get("why", "") and
          metric(a, "sandguard_ledger_rebuilds_total", reason="corrupt") == 1,
          "a corrupt checkpoint: the rebuild is visible in status and /metrics", str(st))
    agrees(a, "corrupt checkpoint")
    os.unlink(aside[0])


def rotation(a, progs):
    state = a.env["SANDGUARD_STATE_DIR"]
    segs = sgjournal.segments(state)
    check(len(segs) >= 3, "the journal rotates by size (%d segments)" % len(segs), str(segs))
    agrees(a, "across %d segments" % len(segs))
    want = rows(settled(a))
    a.stop()
    t = top(a, "--state-dir", state)
    check(t.get("source") == "journal" and rows(t) == {k: dict(v, active_sandboxes=0) for k, v in want.items()},
          "without an agent, top folds the same counts from checkpoint and journal", "%s vs %s" % (
              rows(t), want))
    # The agent stays down while the journal rotates past what it keeps:
    # the deleted segments were never folded, and the gap is said.
    for _ in range(25):
        a.exec_batch("alpha", progs["good"])
    a.env["SANDGUARD_JOURNAL_KEEP"] = "2"
    for _ in range(20):
        a.exec_batch("alpha", progs["good"])
    a.env.update(ROTATE)
    check(len(sgjournal.segments(state)) == 2, "old segments are deleted past the number kept",
          str(sgjournal.segments(state)))
    if not start(a):
        return
    settled(a)
    st = status(a).get("ledger", {})
    check(st.get("gap_segments", 0) > 0 and st.get("rebuilds", {}).get("journal_gap") == 1 and
          metric(a, "sandguard_journal_gap_segments_total") > 0,
          "segments deleted before they were folded: a visible gap (status, /metrics)", str(st))


def fill(path, leave):
    """Fill the filesystem of `path` (a file) until `leave` bytes are free
    (0: until a write fails)."""
    st = os.statvfs(os.path.dirname(path))
    with open(path, "ab", buffering=0) as f:
        if leave:
            f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - leave))
            return
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass


def disk_full(progs_src):
    """The journal's disk: a small tmpfs as the state directory."""
    a = Agent({"alpha": {}}, name="diskfull")
    a.env["SANDGUARD_UID_BASE"] = str(uid_base(64400))
    a.env["SANDGUARD_JOURNAL_SEGMENT_BYTES"] = "4096"
    state = a.env["SANDGUARD_STATE_DIR"]
    jdir = os.path.join(state, "journal")
    os.makedirs(state)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", state]).returncode:
        skip("disk full", "cannot mount a tmpfs here")
        return
    filler = os.path.join(state, "filler")
    try:
        good = a.program("good.py", progs_src)
        if not start(a):
            return
        booked = [a.exec_batch("alpha", good)[0] for _ in range(3)]
        check(all(r and r["cause"] == "ok" for r in booked), "disk full: batches before are ok", str(booked))
        # Until the next record needs a new segment (a new page: the
        # last page of a segment may have room even on a full disk).
        def record_len():  # the last record's, newline included (records grow with fields)
            with open(sgjournal.segments(state)[-1], "rb") as f:
                lines = f.read().splitlines()
            return len(lines[-1]) + 1 if lines else 4096
        for _ in range(64):
            if os.path.getsize(sgjournal.segments(state)[-1]) + record_len() > 4096:
                break
            a.exec_batch("alpha", good)

        # Completely full after admission (no reserve checked): the
        # record cannot be written, and the result is withheld.
        fill(filler, 0)
        env = dict(a.env, SANDGUARD_JOURNAL_RESERVE_BYTES="0")
        batch = os.path.join(a.dir, "batch-full.json")
        with open(batch, "w") as f:
            json.dump({"batch_id": "b-unbookable", "items": [{"prompt": "p", "completion": "c"}]}, f)
        p = subprocess.run([SANDGUARD, "exec", "--tenant", "alpha", "--policy-dir", a.policy_dir,
                            "--batch", batch, "--", PY, good], env=env, capture_output=True, text=True)
        r = js(p)
        check(r.get("cause") == "platform_error" and "could not be written to the journal" in r.get("detail", "")
              and r.get("scores") is None and p.returncode == 2,
              "disk full after admission: the result is withheld as platform_error, never returned unbooked",
              p.stdout[-300:] + p.stderr[-300:])
        check(not [x for x in sgjournal.read(state) if x["batch_id"] == "b-unbookable"],
              "disk full after admission: no record, not even part of one, in the journal", "")
        time.sleep(1.5)  # a tick: the checkpoint cannot be saved
        ck_err = status(a).get("ledger", {}).get("checkpoint_error")
        check(bool(ck_err), "disk full: the failing checkpoint is said in status", str(ck_err))

        # Below the reserve: new runs are refused, naming the disk.
        os.unlink(filler)
        fill(filler, 4 << 20)  # 4 MiB left, the reserve is 8
        r, raw = a.exec_batch("alpha", good)
        check(r is not None and r["cause"] == "platform_error" and raw.returncode == 2 and
              jdir in r["detail"] and "disk is full" in r["detail"] and r["attempts"] == 0,
              "disk below the reserve: a new run is refused with platform_error naming the disk",
              r and r["detail"] or raw.stderr[-300:])
        refusals = [x for x in sgjournal.read(state) if x["attempt"] == 0 and x["cause"] == "platform_error"]
        check(len(refusals) == 1, "disk below the reserve: the refusal itself is booked (in the reserve)",
              str(refusals))
        code, body = http("http://%s/readyz" % a.metrics)
        check(code == 503 and "disk" in body, "disk below the reserve: /readyz is red and says why",
              "%d %s" % (code, body))
        sc = a.run(["status", "--check"])
        check(sc.returncode != 0 and "disk is full" in sc.stderr,
              "disk below the reserve: status --check is red and says why", sc.stdout + sc.stderr)

        before = sgjournal.read(state)
        a.proc.kill()  # no goodbye save
        a.proc.wait()
        os.unlink(filler)
        if not start(a):
            return
        code, _ = http("http://%s/readyz" % a.metrics)
        check(code == 200, "disk freed: /readyz is green again", str(code))
        rep = sgjournal.exactly_once(state, settled(a))
        check(not rep["problems"] and rep["outcomes"] == len(before),
              "disk freed, agent restarted: nothing written is lost (%s)" % sgjournal.summary(rep),
              "; ".join(rep["problems"]))
    finally:
        a.stop()
        subprocess.run(["umount", "-l", state])
        a.cleanup()


def fold_rows(state):
    """A fresh fold of the journal, per tenant: attempts, final batches ok
    and failed, failed attempts by cause (what the ledger counts)."""
    out = {}
    for r in sgjournal.fold(sgjournal.read(state)):
        row = out.setdefault(r["tenant"], {"attempts": 0, "ok": 0, "failed": 0, "failures": {}})
        row["attempts"] += 1
        if r["cause"] != "ok":
            row["failures"][r["cause"]] = row["failures"].get(r["cause"], 0) + 1
        if r["final"]:
            row["ok" if r["cause"] == "ok" else "failed"] += 1
    return out


def ledger_rows(t):
    """The same figures from `top --json` (agent or --state-dir)."""
    return {r["tenant"]: {"attempts": r["attempts"], "ok": r["batches_ok"], "failed": r["batches_failed"],
                          "failures": {c: n for c, n in r["failures"].items() if n}}
            for r in t.get("tenants", []) if r["attempts"]}


def checkpoint_rows(path):
    """The same figures from the persisted checkpoint (ledger.json)."""
    with open(path) as f:
        doc = json.load(f)
    return {name: {"attempts": r["attempts"], "ok": r["batches"]["ok"], "failed": r["batches"]["failed"],
                   "failures": {c: n for c, n in r["failures"].items() if n}}
            for name, r in doc["tenants"].items() if r["attempts"]}


def diff_rows(want, got):
    """What differs, per tenant and cause, in words ("" when nothing)."""
    out = []
    for tenant in sorted(set(want) | set(got)):
        w, g = want.get(tenant, {}), got.get(tenant, {})
        for k in ("attempts", "ok", "failed"):
            if w.get(k, 0) != g.get(k, 0):
                out.append("%s %s: journal %d, ledger %d" % (tenant, k, w.get(k, 0), g.get(k, 0)))
        wf, gf = w.get("failures", {}), g.get("failures", {})
        for c in sorted(set(wf) | set(gf)):
            if wf.get(c, 0) != gf.get(c, 0):
                out.append("%s %s: journal %d, ledger %d" % (tenant, c, wf.get(c, 0), gf.get(c, 0)))
    return "; ".join(out)


class Loops:
    """`sandguard exec` batches run back to back by a few threads per
    tenant until stop(); every result kept."""

    def __init__(self, a):
        self.a, self.stopping, self.results, self.threads, self.n = a, threading.Event(), [], [], 0
        self.lock = threading.Lock()
        os.makedirs(os.path.join(a.dir, "batches"), exist_ok=True)

    def one(self, tenant, prog):
        with self.lock:
            self.n += 1
            bid = "fk-%s-%d" % (tenant, self.n)
        path = os.path.join(self.a.dir, "batches", bid + ".json")
        with open(path, "w") as f:
            json.dump({"batch_id": bid, "items": [{"prompt": "p", "completion": "c"}]}, f)
        r = self.a.run(["exec", "--tenant", tenant, "--policy-dir", self.a.policy_dir, "--batch", path,
                        "--", PY, prog])
        res = js(r)
        with self.lock:
            self.results.append((tenant, res))
        if res.get("attempts") == 0:
            time.sleep(0.02)  # a refusal: thousands a second would only load the machine

    def start(self, tenant, prog, n):
        def loop():
            while not self.stopping.is_set():
                self.one(tenant, prog)
        for _ in range(n):
            t = threading.Thread(target=loop)
            t.start()
            self.threads.append(t)

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join()


def full_kill_restart(progs_src):
    """Issue 32 item 2: the journal's disk (12 MiB) fills mid-run under
    concurrent batches of two tenants; the agent is killed and restarted
    at 100% full; space is freed. The ledger (the agent's, the persisted
    checkpoint's and `top --state-dir`'s) must equal a fresh fold of the
    journal, per tenant and cause."""
    a = Agent({"v0": {}, "hostile": {}}, name="fullkill")
    a.env["SANDGUARD_UID_BASE"] = str(uid_base(64400))
    a.env["SANDGUARD_JOURNAL_RESERVE_BYTES"] = str(1 << 20)
    state = a.env["SANDGUARD_STATE_DIR"]
    os.makedirs(state)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=12m", "tmpfs", state]).returncode:
        skip("disk full, kill, restart", "cannot mount a tmpfs here")
        return
    filler = os.path.join(state, "filler")
    loops = Loops(a)
    try:
        good, bad = a.program("good.py", progs_src["good"]), a.program("crash.py", progs_src["crash"])
        if not start(a):
            return
        loops.start("v0", good, 2)
        loops.start("hostile", bad, 2)
        time.sleep(4)
        fill(filler, 512 << 10)  # below the reserve: refusals booked into it
        time.sleep(2)
        fill(filler, 0)  # then completely full, mid-run
        time.sleep(2)
        a.proc.kill()  # no goodbye save
        a.proc.wait()
        if not start(a):  # at 100% full
            return
        time.sleep(6)
        os.unlink(filler)  # space returns
        time.sleep(4)
        loops.stop()
        t = settled(a)
        want = fold_rows(state)
        unbooked = sum(1 for _, r in loops.results if "not booked in the journal" in (r.get("detail") or ""))
        print("disk full, kill, restart, free: %d batches, %d refusals with no record; journal %s"
              % (len(loops.results), unbooked, json.dumps(want, sort_keys=True)))
        st = status(a).get("ledger", {})
        print("ledger status: %s" % json.dumps({k: st.get(k) for k in ("folded", "duplicates", "bad_records")}))
        check(want.get("v0", {}).get("ok") and want.get("hostile", {}).get("failures"),
              "disk full, kill, restart, free: both tenants booked outcomes", str(want))
        # Every result returned has its final record; a refusal that could
        # not be written says so and has none (docs/oncall.md, Journal
        # disk full).
        finals = collections.Counter(r["batch_id"] for r in sgjournal.read(state) if r["final"])
        said = [(t, r) for t, r in loops.results if "not booked in the journal" in (r.get("detail") or "")]
        odd = [r.get("batch_id") for _, r in loops.results
               if finals[r.get("batch_id")] != (0 if "not booked" in (r.get("detail") or "") else 1)]
        check(not odd, "disk full, kill, restart, free: each result has one final record, "
              "and an unbooked refusal none", str(odd[:5]))
        check(all(r["cause"] == "platform_error" and r["attempts"] == 0 for _, r in said),
              "disk full: %d refusals that could not be written are platform_error, saying so" % len(said),
              str([r for _, r in said if r["cause"] != "platform_error"][:2]))
        d = diff_rows(want, ledger_rows(t))
        check(not d, "disk full, kill, restart, free: the agent's ledger is the fold of the journal", d)
        a.stop()
        d = diff_rows(want, checkpoint_rows(os.path.join(state, "ledger.json")))
        check(not d, "disk full, kill, restart, free: ledger.json is the fold of the journal", d)
        d = diff_rows(want, ledger_rows(top(a, "--state-dir", state)))
        check(not d, "disk full, kill, restart, free: top --state-dir is the fold of the journal", d)
    finally:
        loops.stop()
        a.stop()
        if os.environ.get("SANDGUARD_KEEP_TEST_DIR"):
            shutil.copytree(state, os.path.join(a.dir, "state-copy"), ignore=shutil.ignore_patterns("filler"))
        subprocess.run(["umount", "-l", state])
        a.cleanup()


def many_tenants():
    """1,024 tenants: the agent's replies are far over 64 KiB."""
    a = Agent({"alpha": {}}, name="many")
    a.env["SANDGUARD_UID_BASE"] = str(uid_base(64400))
    state = a.env["SANDGUARD_STATE_DIR"]
    os.makedirs(state)
    row = {"attempts": 1, "batches": {"ok": 1, "failed": 0}, "degenerate": 0, "invalid": 0,
           "failures": {}, "verdicts": {}, "violations": {}, "kills": {}, "events": {},
           "duration": {"buckets": [1] + [0] * 13, "sum_seconds": 0.001}}
    with open(os.path.join(state, "ledger.json"), "w") as f:
        json.dump({"version": 2, "journal": {"segment": 0, "offset": 0}, "overflowed": 0,
                   "tenants": {"tenant-%04d" % i: row for i in range(1024)}}, f)
    try:
        if not start(a):
            return
        r = a.run(["top", "--json"])
        t = js(r)
        check(t.get("source") == "agent" and len(t.get("tenants", [])) == 1024 and len(r.stdout) > 65536,
              "1,024 tenants: top gets the agent's whole ledger (%d bytes)" % len(r.stdout),
              r.stderr[-300:])
        sc = a.run(["status", "--check"])
        st = a.run(["status"])
        check(sc.returncode == 0 and st.returncode == 0, "1,024 tenants: status and status --check answer",
              sc.stderr + st.stderr)
    finally:
        a.cleanup()


def main():
    a = Agent({"alpha": {}, "bravo": {"actions": {"egress": "kill"}}}, name="ledgerf")
    a.env["SANDGUARD_UID_BASE"] = str(uid_base(64400))
    a.env.update(ROTATE)
    try:
        progs = {n: a.program(n + ".py", t) for n, t in [("good", GOOD), ("egress", EGRESS), ("crash", CRASH)]}
        if not start(a):
            return
        for _ in range(8):
            a.exec_batch("alpha", progs["good"])
        for _ in range(3):
            a.exec_batch("alpha", progs["crash"])
        a.exec_batch("bravo", progs["egress"])
        for _ in range(8):
            a.exec_batch("bravo", progs["good"])
        settled(a)
        time.sleep(1.5)  # a tick: the checkpoint holds bravo's kill
        read_only_top(a, progs)
        directory_checkpoint(a)
        bad_field(a)
        corrupt_checkpoint(a)
        rotation(a, progs)
    finally:
        a.cleanup()
    disk_full(GOOD)
    full_kill_restart({"good": GOOD, "crash": CRASH})
    many_tenants()


main()
finish()

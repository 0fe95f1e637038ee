#!/usr/bin/env python3
"""`sandguard explain`: from a batch id to the kernel's evidence. A real
agent in fallback mode, real `sandguard exec` batches: one killed for
egress, one for a file, one timed out, one retried and then ok. Each
timeline is asserted line by line against what the result, the journal,
the events and the policy files say; the event stream and the journal are
rotated so that explain has to read older files. Also a batch whose executor was
killed before it booked anything, found by the batch id the agent tags
every event with; --sandbox, --run, --json, and bad input."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgagent import SANDGUARD, Agent, check, event_stream, finish  # noqa: E402
from sgtest import uid_base  # noqa: E402
import sgjournal  # noqa: E402

UID_BASE = uid_base(65000)
SLOTS = 256
RUN = "r42"
RUN_KILLED = "r43"

EGRESS = """import json, socket, sys
b = json.load(sys.stdin)
socket.create_connection(("127.0.0.1", %d), timeout=1)
print(json.dumps([1.0] * len(b["items"])))
"""
# /proc/self/status: outside every read-only entry, and present in every
# sandbox root.
READ_OUTSIDE = """import json, sys
b = json.load(sys.stdin)
open("/proc/self/status").read()
print(json.dumps([1.0] * len(b["items"])))
"""
# Asleep, not spinning, under a deadline (acme's 4 s) far longer than its
# start: on a loaded node its timeout needs no confirmation run (it never
# wanted the CPU), so it is one attempt, tenant_timeout.
GOOD = """import json, sys
b = json.load(sys.stdin)
print(json.dumps([0.5] * len(b["items"])))
"""
HANG = """import sys, time
sys.stdin.read()
while True:
    time.sleep(1)
"""
# Attempt 1 waits at the gate (a FIFO the test opens once it is there),
# then fails; the test has made the flag by then, so attempt 2 passes.
FLAKY = """import json, os, sys
b = json.load(sys.stdin)
if not os.path.exists(%r):
    open(%r).read()
    sys.exit(3)
print(json.dumps([0.5] * len(b["items"])))
"""

T = r"\d\d:\d\d:\d\d\.\d{3}"  # a clock in the timeline


def line_of(path, needle, after=None):
    """1-based line of the first line containing needle (after the first
    line containing `after`)."""
    seen = after is None
    with open(path) as f:
        for n, text in enumerate(f, 1):
            if not seen:
                seen = after in text
                continue
            if needle in text:
                return n
    raise AssertionError("%s: no line with %r" % (path, needle))


def expect_lines(out, patterns):
    """Each pattern matches the output's next line in full: a regex, ("=",
    text) for exact text, or ("?", regex) for a line that may be absent
    (the exit of a killed process, which the kill can outrun). Returns None
    or why not."""
    lines = out.rstrip("\n").split("\n")
    i = 0
    for p in patterns:
        kind, want = p if isinstance(p, tuple) else ("re", p)
        got = lines[i] if i < len(lines) else None
        ok = got is not None and (got == want if kind == "=" else re.fullmatch(want, got) is not None)
        if kind == "?" and not ok:
            continue
        if not ok:
            return "line %d: got %r, want %r" % (i + 1, got, want)
        i += 1
    if i < len(lines):
        return "extra lines from %d: %r" % (i + 1, lines[i:])
    return None


def explain(a, *args):
    return a.run(["explain", "--events", a.events] + list(args))


def stream(a, **want):
    """The events with these keys, from the stream and every rotated file,
    oldest first."""
    return [e for e in event_stream(a.events) if all(e.get(k) == v for k, v in want.items())]


def events_of(a, sandbox):
    return stream(a, sandbox=sandbox)


def header(a, batch, tenant, policy, nfiles):
    return [
        r"batch %s of tenant %s, run %s \(batch mode, executor pid \d+\)" % (re.escape(batch), tenant, RUN),
        ("=", "policy   " + policy),
        r"journal  %s \(\d+ records searched\)" % re.escape(os.path.join(a.env["SANDGUARD_STATE_DIR"], "journal")),
        ("=", "events   %s (%d file%s read)" % (a.events, nfiles, "" if nfiles == 1 else "s")),
    ]


def attempt_head(n, sandbox, uid, limits):
    return ["", r"attempt %d  sandbox %s  uid %d  started %s UTC" % (n, re.escape(sandbox), uid, T),
            ("=", "  limits  " + limits)]


def place(key, value, file, line, text, indent=0):
    what = "%s = %s" % (key, value)
    return ("=", "%s%s%s  %s:%d  %s" % (" " * (19 + indent), what, " " * max(0, 30 - len(what) - indent),
                                        os.path.basename(file), line, text))


def listed(file, section, values):
    """The place lines of a list's first entries (none of which matched)."""
    with open(file) as f:
        lines = f.read().split("\n")
    start = next(i for i, l in enumerate(lines) if l.strip().startswith('"%s": {' % section))
    out, i = [], start
    for k, v in enumerate(values[:4]):
        i = next(j for j in range(i + 1, len(lines)) if json.dumps(v) in lines[j] or lines[j].strip() == "{")
        out.append(place("%s[%d]" % ({"egress": "egress.allow", "files": "files.read_only"}[section], k),
                         v if isinstance(v, str) else "%s port %d %s" % (v["cidr"], v["port"], v["proto"]),
                         file, i + 1, lines[i].strip(), indent=2))
    return out


def exec_line(pid, prog):
    return r"  %s  exec            pid %-7d python3  /usr/bin/python3 %s" % (T, pid, re.escape(prog))


def nfiles(a):
    n = 1
    while os.path.exists("%s.%d" % (a.events, n)):
        n += 1
    return n


def uid_of(a, sandbox):
    """The slot uid the kernel saw the program run as (the exec event)."""
    ex = [e for e in events_of(a, sandbox) if e["type"] == "exec"]
    return ex[0]["uid"] if ex else None


def record_of(a, sandbox):
    return next(x for x in sgjournal.read(a.env["SANDGUARD_STATE_DIR"]) if x["sandbox"] == sandbox)


# A finished run's init: the teardown's SIGKILL ends it, sent before the
# executor closes its control socket (end_init()), so that init never sees
# the hang-up first and exits by itself.
INIT_ENDED = "signal 9 SIGKILL"


def init_exit(a, sandbox, status):
    """The exit of the sandbox's init (its pid from the journal record),
    marked as sandguard's: optional, as a kill can outrun it (the teardown
    follows the result). Init ends by `status` only."""
    return ("?", r"  %s  exit            pid %-7d sandguard \(sandbox init\)  %s"
            % (T, record_of(a, sandbox)["init_pid"], status))


def check_record(a, r):
    """The journal's records of a result carry tenant, run, batch and the
    sandbox of each attempt, its uid, limits, reason and policy."""
    recs = [x for x in sgjournal.read(a.env["SANDGUARD_STATE_DIR"]) if x["batch_id"] == r["batch_id"]]
    want = [(s["attempt"], s["sandbox"]) for s in r["sandboxes"]]
    got = [(x["attempt"], x["sandbox"]) for x in recs]
    problems = []
    if got != want:
        problems.append("records %s, result sandboxes %s" % (got, want))
    for x in recs:
        if x["tenant"] != r["tenant"] or x["run_id"] != RUN:
            problems.append("tenant/run %s/%s" % (x["tenant"], x["run_id"]))
        if not (UID_BASE <= (x.get("uid") or 0) < UID_BASE + SLOTS) or x["uid"] != uid_of(a, x["sandbox"]):
            problems.append("uid %s, the exec event says %s" % (x.get("uid"), uid_of(a, x["sandbox"])))
        if not x.get("limits") or not x.get("reason") or not x.get("policy"):
            problems.append("limits/reason/policy missing: %s" % x)
        # The init's pid: a process of the sandbox that never exec'd.
        ev = events_of(a, x["sandbox"])
        if not isinstance(x.get("init_pid"), int) or x["init_pid"] <= 0 \
                or any(e["type"] == "exec" and e["pid"] == x["init_pid"] for e in ev):
            problems.append("init_pid %s (the sandbox's execs: %s)"
                            % (x.get("init_pid"), [e["pid"] for e in ev if e["type"] == "exec"]))
    # Every event of an attempt's sandbox carries the batch and run: the
    # join explain makes when no record names the sandbox.
    for s in r["sandboxes"]:
        ev = events_of(a, s["sandbox"])
        if not ev:
            problems.append("no event of sandbox %s" % s["sandbox"])
        for e in ev:
            if e.get("batch_id") != r["batch_id"] or e.get("run_id") != RUN:
                problems.append("event %s says batch %s run %s" % (e["type"], e.get("batch_id"), e.get("run_id")))
    return problems


def killed_executor(a, prog):
    """A batch of gamma (a 60 s deadline) whose executor is SIGKILLed once
    its program's exec event is in the stream: nothing is booked. Returns
    the batch id, or None with why."""
    batch = os.path.join(a.dir, "batch-killed.json")
    batch_id = "b-killed-%d" % time.monotonic_ns()
    with open(batch, "w") as f:
        json.dump({"batch_id": batch_id, "items": [{"prompt": "p", "completion": "c"}]}, f)
    p = subprocess.Popen([SANDGUARD, "exec",
                          "--tenant", "gamma", "--policy-dir", a.policy_dir, "--batch", batch,
                          "--run-id", RUN_KILLED, "--", "/usr/bin/python3", prog],
                         env=a.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline and p.poll() is None:
        if stream(a, type="exec", tenant="gamma"):
            break
        time.sleep(0.05)
    if p.poll() is not None:
        return None, "the executor ended (rc %s) before its program's exec event" % p.returncode
    p.send_signal(signal.SIGKILL)
    p.wait()
    return batch_id, None


def run_flaky(a, prog, gate, flag):
    out = {}
    th = threading.Thread(target=lambda: out.update(r=a.exec_batch("acme", prog, extra=["--run-id", RUN])))
    th.start()
    fd, deadline = None, time.time() + 120
    while fd is None and time.time() < deadline and th.is_alive():
        try:  # ENXIO until attempt 1 opened the gate for reading
            fd = os.open(gate, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            time.sleep(0.05)
    with open(flag, "w"):
        pass
    os.chmod(flag, 0o644)
    if fd is not None:
        os.write(fd, b"go")
        os.close(fd)
    th.join()
    return out.get("r", (None, None))


def main():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    a = Agent({"beta": {"egress": {"allow": [{"cidr": "10.0.0.0/8", "port": 443, "proto": "tcp"}]}},
               "acme": {"limits": {"timeout_ms": 4000}, "failure": {"mode": "retry", "max_retries": 1}},
               "gamma": {"limits": {"timeout_ms": 60000}}},
              name="explain")
    a.env["SANDGUARD_UID_BASE"] = str(UID_BASE)
    a.env["SANDGUARD_JOURNAL_SEGMENT_BYTES"] = "4096"  # a few records per segment
    try:
        if not a.start("--mode", "fallback", "--events-max-bytes", "1500", "--events-keep", "1000"):
            check(False, "agent starts in fallback mode", open(os.path.join(a.dir, "agent.log")).read()[-500:])
            return
        beta = os.path.join(a.policy_dir, "beta.json")
        acme = os.path.join(a.policy_dir, "acme.json")
        egress = a.program("egress.py", EGRESS % port)
        outside = a.program("outside.py", READ_OUTSIDE)
        hang = a.program("hang.py", HANG)
        gate, flag = os.path.join(a.programs, "gate"), os.path.join(a.programs, "flag")
        os.mkfifo(gate)
        os.chmod(gate, 0o644)
        flaky = a.program("flaky.py", FLAKY % (flag, gate))

        results = {}
        for name, tenant, prog in [("egress", "beta", egress), ("file", "beta", outside), ("timeout", "acme", hang)]:
            r, raw = a.exec_batch(tenant, prog, extra=["--run-id", RUN])
            results[name] = r
            check(r is not None and r["run_id"] == RUN and len(r["sandboxes"]) == r["attempts"]
                  and all(s["sandbox"] for s in r["sandboxes"]),
                  "%s: the result carries run_id and each attempt's sandbox" % name,
                  raw.stdout[-300:] + raw.stderr[-300:])
        r, raw = run_flaky(a, flaky, gate, flag)
        results["retried"] = r
        check(r is not None and r["cause"] == "ok" and r["attempts"] == 2
              and [s["cause"] for s in r["sandboxes"]] == ["tenant_crash", "ok"],
              "retried: attempt 1 crashed at the gate, attempt 2 ok", str(r))
        if any(v is None for v in results.values()):
            return
        try:
            listener.accept()
            check(False, "egress: the host's listener accepted nothing", "it accepted a connection")
        except BlockingIOError:
            check(True, "egress: the host's listener accepted nothing")
        for name, r in results.items():
            problems = check_record(a, r)
            check(not problems, "%s: journal records carry tenant, run, batch, sandbox, uid, init, limits, reason; "
                  "its events carry the batch and run"
                  % name, "; ".join(problems))
        check(nfiles(a) > 2, "the event stream was rotated (explain must read the older files)",
              "%d files" % nfiles(a))
        segs = len([f for f in os.listdir(os.path.join(a.env["SANDGUARD_STATE_DIR"], "journal"))
                    if f.endswith(".jsonl")])
        check(segs > 1, "the journal was rotated into segments", "%d segments" % segs)
        limits_beta = "timeout_ms 3000, memory_mb 256, max_tasks 32, max_forks 1024, cpu 1, output_bytes 1048576"
        limits_acme = limits_beta.replace("timeout_ms 3000", "timeout_ms 4000")
        files = nfiles(a)

        # --- egress ---
        r = results["egress"]
        s1 = r["sandboxes"][0]["sandbox"]
        ev = events_of(a, s1)
        pid = [e for e in ev if e["type"] == "exec"][0]["pid"]
        x = explain(a, r["batch_id"])
        allow = line_of(beta, '"allow": [', after='"egress": {')
        kill = line_of(beta, '"egress": "kill"')
        dst = "tcp 127.0.0.1:%d" % port
        exit_line = ("?", r"  %s  exit            pid %-7d python3  signal 9 SIGKILL" % (T, pid))
        init_killed = init_exit(a, s1, "signal 9 SIGKILL")
        want = header(a, r["batch_id"], "beta", beta, files) + attempt_head(1, s1, uid_of(a, s1), limits_beta) + [
            exec_line(pid, egress),
            r"  %s  egress_denied   pid %-7d python3  %s \(connect4\)  \[denied\]" % (T, pid, re.escape(dst)),
            ("=", "                 no entry of egress.allow matched " + dst),
            place("egress.allow", "1 entry", beta, allow, '"allow": ['),
        ] + listed(beta, "egress", [{"cidr": "10.0.0.0/8", "port": 443, "proto": "tcp"}]) + [
            place("actions.egress", "kill", beta, kill, '"egress": "kill",'),
            init_killed, exit_line, init_killed,
            r"  %s  sandbox_killed  pid -       -  rule egress after egress_denied, empty in [0-9.]+ ms "
            r"\(cgroup\.kill\)  \[killed\]" % T,
            place("actions.egress", "kill", beta, kill, '"egress": "kill",'),
            init_killed, exit_line, init_killed,
            r"  %s  ended           tenant_policy_violation \(rule egress\): killed by the agent: egress rule" % T,
            ("=", "                 why: the agent killed the sandbox for its egress rule (the policy's action for "
                  "egress is kill): a policy violation is the code's own doing, never retried"),
            ("=", "                 final: a policy violation is never retried"),
            "",
            r"verdict: batch %s of tenant beta \(run %s\) was booked tenant_policy_violation \(rule egress\) after 1 "
            r"attempt: at %s UTC its code \(pid %d, python3\) tried to reach %s \(connect4\): denied; no entry of "
            r"egress\.allow matched %s \(egress\.allow = 1 entry at beta\.json:%d\); actions\.egress = kill at "
            r"beta\.json:%d; sandguard emptied the sandbox [0-9.]+ ms later\. This was the tenant's code, not the "
            r"platform\." % (re.escape(r["batch_id"]), RUN, T, pid, re.escape(dst), re.escape(dst), allow, kill),
        ]
        why = expect_lines(x.stdout, want)
        check(x.returncode == 0 and why is None, "egress: the timeline, line by line",
              (why or "") + " rc %d %s" % (x.returncode, x.stderr[-300:]) + "\n" + x.stdout)

        # --- file ---
        r = results["file"]
        s1 = r["sandboxes"][0]["sandbox"]
        pid = [e for e in events_of(a, s1) if e["type"] == "exec"][0]["pid"]
        x = explain(a, r["batch_id"])
        ro = line_of(beta, '"read_only": [')
        fkill = line_of(beta, '"file": "kill"')
        with open(beta) as f:
            read_only = json.load(f)["files"]["read_only"]
            n_ro = len(read_only)
        trip = next((l for l in x.stdout.split("\n") if "/proc/self/status" in l and " pid " in l), "")
        ftype = "file_tripped" if "file_tripped" in trip else "file_denied"
        action = "killed" if trip.endswith("[killed]") else "denied"
        exit_line = ("?", r"  %s  exit            pid %-7d python3  signal 9 SIGKILL" % (T, pid))
        init_killed = init_exit(a, s1, "signal 9 SIGKILL")
        want = header(a, r["batch_id"], "beta", beta, files) + attempt_head(1, s1, uid_of(a, s1), limits_beta) + [
            exec_line(pid, outside),
            r"  %s  %-15s pid %-7d python3  /proc/self/status \(read, fallback\)  \[%s\]" % (T, ftype, pid, action),
            ("=", "                 no entry of files.read_only covers /proc/self/status"),
            place("files.read_only", "%d entries" % n_ro, beta, ro, '"read_only": ['),
        ] + listed(beta, "files", read_only) + [
            place("actions.file", "kill", beta, fkill, '"file": "kill",'),
            init_killed, exit_line, init_killed,
            r"  %s  sandbox_killed  pid -       -  rule file after %s, empty in [0-9.]+ ms \(cgroup\.kill\)  "
            r"\[killed\]" % (T, ftype),
            place("actions.file", "kill", beta, fkill, '"file": "kill",'),
            init_killed, exit_line, init_killed,
            r"  %s  ended           tenant_policy_violation \(rule file\): killed by the agent: file rule" % T,
            ("=", "                 why: the agent killed the sandbox for its file rule (the policy's action for "
                  "file is kill): a policy violation is the code's own doing, never retried"),
            ("=", "                 final: a policy violation is never retried"),
            "",
            r"verdict: batch %s of tenant beta \(run %s\) was booked tenant_policy_violation \(rule file\) after 1 "
            r"attempt: at %s UTC its code \(pid %d, python3\) opened /proc/self/status \(read, fallback\): %s; no "
            r"entry of files\.read_only covers /proc/self/status \(files\.read_only = %d entries at beta\.json:%d\); "
            r"actions\.file = kill at beta\.json:%d; sandguard emptied the sandbox [0-9.]+ ms later\. This was the "
            r"tenant's code, not the platform\." % (re.escape(r["batch_id"]), RUN, T, pid, action, n_ro, ro, fkill),
        ]
        why = expect_lines(x.stdout, want)
        check(x.returncode == 0 and why is None, "file: the timeline, line by line",
              (why or "") + " rc %d %s" % (x.returncode, x.stderr[-300:]) + "\n" + x.stdout)

        # --- timeout, retried, then final ---
        r = results["timeout"]
        x = explain(a, r["batch_id"])
        tline = line_of(acme, '"timeout_ms": 4000')
        want = header(a, r["batch_id"], "acme", acme, files)
        for n, s in enumerate(r["sandboxes"], 1):
            sb = s["sandbox"]
            pid = [e for e in events_of(a, sb) if e["type"] == "exec"][0]["pid"]
            want += attempt_head(n, sb, uid_of(a, sb), limits_acme) + [
                exec_line(pid, hang),
                init_exit(a, sb, "signal 9 SIGKILL"),
                r"  %s  exit            pid %-7d python3  signal 9 SIGKILL" % (T, pid),
                init_exit(a, sb, "signal 9 SIGKILL"),
                r"  %s  ended           tenant_timeout: deadline of 4000 ms passed: the sandbox was killed.*" % T,
                ("=", "                 why: the program was still running when its deadline of 4000 ms "
                      "(limits.timeout_ms) passed, so the executor killed the sandbox"),
                place("limits.timeout_ms", "4000", acme, tline, '"timeout_ms": 4000,'),
                ("=", "                 retried: tenant_timeout is retried under failure mode retry (attempt 1 of 2)"
                 if n == 1 else "                 final: the attempt budget is spent (2 attempts: 1 + "
                 "failure.max_retries)"),
            ]
        want += ["", r"verdict: batch %s of tenant acme \(run %s\) was booked tenant_timeout after 2 attempts \(1 "
                     r"retried\): the program was still running when its deadline of 4000 ms \(limits\.timeout_ms\) "
                     r"passed, so the executor killed the sandbox \(limits\.timeout_ms = 4000 at acme\.json:%d\)\. "
                     r"This was the tenant's code, not the platform\." % (re.escape(r["batch_id"]), RUN, tline)]
        why = expect_lines(x.stdout, want)
        check(x.returncode == 0 and why is None and r["cause"] == "tenant_timeout",
              "timeout: both attempts, the limit's line, retried then final, line by line",
              (why or "") + " rc %d %s" % (x.returncode, x.stderr[-300:]) + "\n" + x.stdout)

        # --- retried, then ok ---
        r = results["retried"]
        x = explain(a, r["batch_id"])
        want = header(a, r["batch_id"], "acme", acme, files)
        for n, s in enumerate(r["sandboxes"], 1):
            sb = s["sandbox"]
            pid = [e for e in events_of(a, sb) if e["type"] == "exec"][0]["pid"]
            want += attempt_head(n, sb, uid_of(a, sb), limits_acme) + [exec_line(pid, flaky)]
            if n == 1:
                want += [r"  %s  exit            pid %-7d python3  exit 3" % (T, pid),
                         init_exit(a, sb, INIT_ENDED),
                         r"  %s  ended           tenant_crash: exited with code 3" % T,
                         ("=", "                 why: the program exited with code 3 by itself: no deadline, memory "
                               "limit or agent kill ended it"),
                         ("=", "                 retried: tenant_crash is retried under failure mode retry "
                               "(attempt 1 of 2)")]
            else:
                want += [r"  %s  exit            pid %-7d python3  exit 0" % (T, pid),
                         init_exit(a, sb, INIT_ENDED),
                         r"  %s  ended           ok" % T,
                         ("=", "                 why: the program exited 0 and its stdout passed the schema gate "
                               "(a JSON array of one finite number per item)")]
        want += ["", r"verdict: batch %s of tenant acme \(run %s\) was booked ok after 2 attempts \(1 retried\): the "
                     r"program exited 0 and its stdout passed the schema gate \(a JSON array of one finite number per "
                     r"item\)\. Its scores went to the trainer\." % (re.escape(r["batch_id"]), RUN)]
        why = expect_lines(x.stdout, want)
        check(x.returncode == 0 and why is None, "retried then ok: line by line",
              (why or "") + " rc %d %s" % (x.returncode, x.stderr[-300:]) + "\n" + x.stdout)

        # --- the same batch by its sandbox, and as JSON ---
        by_sandbox = explain(a, "--sandbox", r["sandboxes"][1]["sandbox"])
        check(by_sandbox.returncode == 0 and by_sandbox.stdout == x.stdout,
              "--sandbox S prints the timeline of S's batch", by_sandbox.stdout[:300] + by_sandbox.stderr)
        j = explain(a, r["batch_id"], "--json")
        try:
            doc = json.loads(j.stdout)
            b = doc["batches"][0]
            verdict = [l for l in x.stdout.split("\n") if l.startswith("verdict: ")][0][len("verdict: "):]
            ok = (len(doc["batches"]) == 1 and b["verdict"] == verdict and b["cause"] == "ok"
                  and [(t["attempt"], t["sandbox"], t["cause"]) for t in b["attempts"]]
                  == [(s["attempt"], s["sandbox"], s["cause"]) for s in r["sandboxes"]]
                  and all(t["events"] for t in b["attempts"]))
            ex = b["attempts"][0]["events"][0]
            ok = ok and ex["type"] == "exec" and ex["detail"]["argv"][-1] == flaky and ex["policy"]["matched"] \
                and ex["policy"]["entry"]["key"] == "exec.allow[0]" \
                and ex["policy"]["entry"]["line"] == line_of(acme, '"/usr/bin/python3*"')
        except (ValueError, KeyError, IndexError) as err:
            ok, doc = False, "%s: %s" % (err, j.stdout[:500])
        check(j.returncode == 0 and ok, "--json: the same timeline as one document (attempts, argv, the exec "
              "entry that allowed it)", str(doc)[:800])

        # --- the run ---
        x = explain(a, "--run", RUN)
        rows = x.stdout.rstrip("\n").split("\n")
        want = [(r["batch_id"], str(r["attempts"]), r["cause"], "yes" if r["cause"] == "ok" else "no")
                + tuple(s["sandbox"] for s in r["sandboxes"]) for r in results.values()]
        # Columns: date, time, batch, tenant, attempts, cause, mean, const,
        # CPU seconds, sandboxes; the run's cost last.
        got = [tuple(l.split()[2:3] + l.split()[4:6] + l.split()[7:8] + l.split()[9:]) for l in rows[1:-1]]
        check(x.returncode == 0 and rows[0].startswith("STARTED (UTC)") and got == want and
              rows[-1].startswith("cost: %d metered attempts" % sum(r["attempts"] for r in results.values())),
              "--run R: one line per batch of the run, oldest first", "want %s got %s" % (want, x.stdout))
        x = explain(a, "--run", "no-such-run")
        check(x.returncode == 1 and "no outcome of run no-such-run" in x.stderr, "--run: an unknown run is an error",
              x.stderr)

        # --- a policy changed since ---
        os.utime(acme)
        x = explain(a, results["retried"]["batch_id"])
        check(x.returncode == 0 and ("policy   %s  (CHANGED since this batch began: lines shown are today's)" % acme)
              in x.stdout.split("\n"), "a policy file changed after the batch is flagged", x.stdout[:400])

        # --- an executor killed before it booked: the events name the batch ---
        killed, why = killed_executor(a, hang)
        check(killed is not None, "killed executor: its program ran, then the executor was SIGKILLed", why or "")
        if killed:
            x = explain(a, killed, "--policy-dir", a.policy_dir)
            ev = [e for e in stream(a, tenant="gamma") if e.get("sandbox")]
            sb = ev[0]["sandbox"] if ev else "?"
            tagged = all(e.get("batch_id") == killed and e.get("run_id") == RUN_KILLED for e in ev)
            pid = [e for e in ev if e["type"] == "exec"][0]["pid"] if ev else 0
            # The program dies by the PID namespace's SIGKILL; init either
            # by its parent-death SIGKILL or, seeing its control socket
            # hang up first, by its own exit 0 (sb_init_run()).
            died = ("?", r"  %s  exit            pid \d+\s+(python3  signal 9 SIGKILL|sandguard  "
                         r"(signal 9 SIGKILL|exit 0))" % T)
            want = [
                r"batch %s of tenant gamma, run %s \(no outcome record: from the agent's events alone\)"
                % (killed, RUN_KILLED),
                ("=", "policy   " + os.path.join(a.policy_dir, "gamma.json")),
                header(a, killed, "gamma", "", files)[2],
                r"events   %s \(\d+ files? read\)" % re.escape(a.events),
                "", r"sandbox %s  \(no outcome booked\)  uid %d  first event %s UTC" % (re.escape(sb), uid_of(a, sb) or 0, T),
                exec_line(pid, hang), died, died,
                ("=", "  (no outcome record for this sandbox)"),
                "",
                ("=", "verdict: batch %s of tenant gamma (run %s): no final outcome is booked (the executor is still "
                      "running, or died before booking it; an orphan is booked as platform_error when reaped)"
                 % (killed, RUN_KILLED)),
            ]
            why = expect_lines(x.stdout, want)
            check(x.returncode == 0 and ev and tagged and why is None,
                  "killed executor: nothing booked, the batch's events found by the batch_id and run_id they carry",
                  "%s rc %d %s\n%s\nevents %s" % (why, x.returncode, x.stderr[-300:], x.stdout, ev))
            # The next executor's admission books the orphan; explain then
            # joins the same events by the sandbox its record names.
            a.exec_batch("gamma", a.program("ok.py", GOOD))
            x = explain(a, killed, "--policy-dir", a.policy_dir)
            lines = x.stdout.split("\n")
            check(x.returncode == 0 and re.fullmatch(r"attempt 1  sandbox %s  uid not recorded  started %s UTC"
                                                     % (re.escape(sb), T), lines[5] if len(lines) > 5 else "")
                  and re.fullmatch(exec_line(pid, hang), lines[7] if len(lines) > 7 else "")
                  and any(re.fullmatch(r"  %s  ended           platform_error: executor died" % T, l) for l in lines)
                  and "was booked platform_error after 1 attempt" in x.stdout,
                  "killed executor: the orphan booked by the next executor, its events joined by sandbox",
                  "rc %d %s\n%s" % (x.returncode, x.stderr[-300:], x.stdout))

        # --- bad input ---
        x = explain(a, "b-no-such-batch")
        check(x.returncode == 1 and x.stdout == "" and x.stderr.startswith(
            "sandguard explain: no outcome of batch b-no-such-batch in the outcome journal "),
              "an unknown batch: a clear error, exit 1", "rc %d %r" % (x.returncode, x.stderr))
        x = a.run(["explain", "--state-dir", os.path.join(a.dir, "nowhere"), results["egress"]["batch_id"]])
        check(x.returncode == 2 and "cannot read the outcome journal" in x.stderr and "No such file" in x.stderr,
              "an unreadable journal: a clear error, exit 2", "rc %d %r" % (x.returncode, x.stderr))
        x = a.run(["explain", "--events", os.path.join(a.dir, "no-events.jsonl"), results["egress"]["batch_id"]])
        check(x.returncode == 1 and "cannot read the event stream" in x.stderr
              and "the journal's side only" in x.stderr and "verdict: batch" in x.stdout,
              "an unreadable event stream: the journal's side, a clear error, exit 1",
              "rc %d %r %r" % (x.returncode, x.stderr, x.stdout[-600:]))
        x = explain(a, "--sandbox", "0000000-0")
        check(x.returncode == 1 and "no outcome of sandbox 0000000-0" in x.stderr,
              "an unknown sandbox: a clear error, exit 1", "rc %d %r" % (x.returncode, x.stderr))
        for args, why in [([], "which batch?"), (["a b"], "printable"), (["--sandbox", "x", "b"], "alone"),
                          (["--tenant", "Bad!", "b"], "not a tenant name")]:
            x = a.run(["explain"] + args)
            check(x.returncode == 64 and why in x.stderr, "usage error %r: exit 64" % (args,), x.stderr)
    finally:
        listener.close()
        a.cleanup()


main()
finish()

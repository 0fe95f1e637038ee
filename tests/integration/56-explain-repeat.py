#!/usr/bin/env python3
"""`sandguard explain` of a batch id that repeats (issue 31): a trainer's
batch ids repeat across runs and restarts. A real agent in fallback mode,
three real `sandguard exec` requests of one tenant with the same batch_id
and run id: a batch killed for egress, a clean batch, and a verifier
request whose three tests ran one after another in one sandbox. explain
lists all three, each with its own attempts and each attempt with only its
own events (the old code put the later batches' events under the first,
as "events of this batch in no attempt's sandbox", and every test's under
the first test); --json the same."""
import json
import os
import re
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgagent import Agent, check, event_stream, finish  # noqa: E402
from sgtest import uid_base  # noqa: E402

UID_BASE = uid_base(67600)  # 55-explain uses 65000, 21-sandbox-isolation 67300, 31 68300
RUN = "r-repeat"
BATCH_ID = "b-repeat-%d" % os.getpid()

EGRESS = """import json, socket, sys
b = json.load(sys.stdin)
socket.create_connection(("127.0.0.1", %d), timeout=1)
print(json.dumps([1.0] * len(b["items"])))
"""
SUM = """import sys
print(sum(int(x) for x in sys.stdin.read().split()))
"""
GOOD = """import json, sys
b = json.load(sys.stdin)
print(json.dumps([0.5] * len(b["items"])))
"""


def exec_same_id(a, prog, tests=None):
    """One request of beta with the fixed batch id and run: a batch, or a
    verifier request of `tests`."""
    path = os.path.join(a.dir, "input.json")
    with open(path, "w") as f:
        json.dump(tests or {"batch_id": BATCH_ID, "items": [{"prompt": "p", "completion": "c"}]}, f)
    mode = ["--tests", path, "--batch-id", BATCH_ID] if tests else ["--batch", path]
    r = a.run(["exec", "--tenant", "beta", "--policy-dir", a.policy_dir] + mode + ["--run-id", RUN,
              "--", "/usr/bin/python3", prog])
    try:
        return json.loads(r.stdout), r
    except ValueError:
        return None, r


def stream(a, sandbox):
    """The sandbox's events, from the stream and any rotated file."""
    return [e for e in event_stream(a.events) if e.get("sandbox") == sandbox]


def own_execs(a, attempts):
    """The exec pid of each attempt: the k-th attempt in a sandbox ran its
    k-th exec (a verifier's tests share one)."""
    seen, out = {}, []
    for t in attempts:
        k = seen.get(t["sandbox"], 0)
        seen[t["sandbox"]] = k + 1
        execs = [e["pid"] for e in stream(a, t["sandbox"]) if e["type"] == "exec"]
        out.append(execs[k] if k < len(execs) else None)
    return out


def event_pids(block):
    """The pids of the event lines of one attempt's block of a timeline."""
    return [int(m) for m in re.findall(r"^  \d\d:\d\d:\d\d\.\d{3}  \S+\s+pid (\d+) ", block, re.M)]


def exec_pids(block):
    return [int(m) for m in re.findall(r"^  \S+  exec            pid (\d+) ", block, re.M)]


def check_text(a, results, names):
    x = a.run(["explain", "--events", a.events, BATCH_ID])
    note = "%d batches have the id %s (a trainer's batch ids repeat across runs and restarts): each with its " \
           "own attempts and events, oldest first\n\n" % (len(results), BATCH_ID)
    sections = x.stdout.split("\n----\n")
    check(x.returncode == 0 and len(sections) == len(results) and x.stdout.startswith(note),
          "text: all %d batches of the repeated id are listed, and it says so first" % len(results),
          "rc %d %s\n%s" % (x.returncode, x.stderr[-300:], x.stdout))
    if len(sections) != len(results):
        return
    sections[0] = sections[0][len(note):] if sections[0].startswith(note) else sections[0]
    for i, r in enumerate(results):
        s = sections[i].strip("\n")
        mine = {t["sandbox"] for t in r["sandboxes"]}
        theirs = {e["pid"] for q in results if q is not r for t in q["sandboxes"]
                  for e in stream(a, t["sandbox"]) if e.get("pid")} - \
            {e["pid"] for sb in mine for e in stream(a, sb) if e.get("pid")}
        blocks = [b for b in s.split("\n\n") if re.match(r"(test \d+, )?attempt \d+  sandbox ", b)]
        problems = []
        mode = "verify" if "tests" in r else "batch"
        if not re.fullmatch(r"batch %s of tenant beta, run %s \(%s mode, executor pid \d+\)"
                            % (BATCH_ID, RUN, mode), s.split("\n")[0]):
            problems.append("header %r" % s.split("\n")[0])
        want = ["%sattempt %d  sandbox %s  " % ("test %d, " % t["test"] if "test" in t else "", t["attempt"],
                                                t["sandbox"]) for t in r["sandboxes"]]
        if [b[:len(w)] for b, w in zip(blocks, want)] != want or len(blocks) != len(want):
            problems.append("attempts %s, want %s" % ([b.split("\n")[0] for b in blocks], want))
        for b, pid in zip(blocks, own_execs(a, r["sandboxes"])):
            if exec_pids(b) != [pid] or set(event_pids(b)) & theirs:
                problems.append("%r: execs %s (want [%s]), pids %s" % (b.split("\n")[0], exec_pids(b), pid,
                                                                       event_pids(b)))
        if "events of this batch in no attempt's sandbox" in s:
            problems.append("events outside its attempts")
        if ("egress_denied" in s) != (r["cause"] != "ok") or ("sandbox_killed" in s) != (r["cause"] != "ok"):
            problems.append("egress_denied/sandbox_killed under the wrong batch")
        if not re.search(r"^verdict: batch %s of tenant beta \(run %s\) was booked %s( \(rule \w+\))? after "
                         % (BATCH_ID, RUN, r["cause"]), s, re.M):
            problems.append("its verdict")
        check(not problems, "text: batch %d (%s) shows its own attempts, each with its own events" % (i + 1, names[i]),
              "; ".join(problems) + "\n" + x.stdout)


def check_json(a, results, names):
    x = a.run(["explain", "--events", a.events, BATCH_ID, "--json"])
    try:
        batches = json.loads(x.stdout)["batches"]
    except (ValueError, KeyError) as err:
        check(False, "--json: a document", "%s rc %d %s" % (err, x.returncode, x.stdout[:300] + x.stderr))
        return
    check(len(batches) == len(results) and len({b["executor_pid"] for b in batches}) == len(results),
          "--json: %d batches, one per executor" % len(results), str(batches)[:600])
    for i, (b, r) in enumerate(zip(batches, results)):
        got = [(t["attempt"], t["sandbox"], t["test"]) for t in b["attempts"]]
        want = [(t["attempt"], t["sandbox"], t.get("test")) for t in r["sandboxes"]]
        ev = [e for t in b["attempts"] for e in t["events"]]
        stream_ev = [e for sb in {t["sandbox"] for t in r["sandboxes"]} for e in stream(a, sb)]
        execs = [[e["pid"] for e in t["events"] if e["type"] == "exec"] for t in b["attempts"]]
        types = {e["type"] for e in ev}
        ok = got == want and b["cause"] == r["cause"] and not b["other_events"] \
            and all(e["sandbox"] == t["sandbox"] for t in b["attempts"] for e in t["events"]) \
            and len(ev) == len(stream_ev) and execs == [[p] for p in own_execs(a, r["sandboxes"])] \
            and ({"egress_denied", "sandbox_killed"} <= types) == (r["cause"] != "ok")
        check(ok, "--json: batch %d (%s): its own attempts, each with its own events, every event of its "
              "sandboxes" % (i + 1, names[i]),
              "attempts %s want %s, %d events of %d in the stream, execs %s want %s, other_events %d\n%s"
              % (got, want, len(ev), len(stream_ev), execs, [[p] for p in own_execs(a, r["sandboxes"])],
                 len(b["other_events"]), json.dumps(b)[:1500]))


def main():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    # concurrency 1: the verifier's tests run one after another in one
    # sandbox (one with no egress allowed: an egress relay is not reset).
    a = Agent({"beta": {"limits": {"concurrency": 1}}},
              name="explain-repeat")
    a.env["SANDGUARD_UID_BASE"] = str(UID_BASE)
    try:
        if not a.start("--mode", "fallback"):
            check(False, "agent starts in fallback mode", open(os.path.join(a.dir, "agent.log")).read()[-500:])
            return
        egress = a.program("egress.py", EGRESS % listener.getsockname()[1])
        good = a.program("good.py", GOOD)
        add = a.program("sum.py", SUM)
        tests = [{"input": "1 2", "output": "3"}, {"input": "3 4", "output": "7"}, {"input": "5 5", "output": "10"}]
        names = ["egress killed", "clean", "verifier, 3 tests in one sandbox"]
        results = []
        for name, prog, t, cause in [(names[0], egress, None, "tenant_policy_violation"), (names[1], good, None, "ok"),
                                     (names[2], add, tests, "ok")]:
            r, raw = exec_same_id(a, prog, t)
            check(r is not None and r["batch_id"] == BATCH_ID and r["cause"] == cause
                  and len(r["sandboxes"]) == (len(t) if t else 1) and r.get("reward", 1) == 1,
                  "exec %s: batch %s, run %s, %s" % (name, BATCH_ID, RUN, cause), raw.stdout[-300:] + raw.stderr[-300:])
            if r is None:
                return
            results.append(r)
        sandboxes = [[t["sandbox"] for t in r["sandboxes"]] for r in results]
        # The agent writes a turn of its loop at a time: the last exits
        # reach the stream shortly after the result.
        deadline = time.time() + 10
        while time.time() < deadline and not all(
                len([e for e in stream(a, sb[0]) if e["type"] == "exit"]) >= len(sb) for sb in sandboxes):
            time.sleep(0.1)
        time.sleep(0.5)
        check(len({sb[0] for sb in sandboxes}) == 3 and len(set(sandboxes[2])) == 1
              and all(len(own_execs(a, r["sandboxes"])) == len(set(own_execs(a, r["sandboxes"])))
                      and None not in own_execs(a, r["sandboxes"]) for r in results),
              "each request ran in its own sandbox (the verifier's tests in one), each attempt an exec",
              str(sandboxes))
        check_text(a, results, names)
        check_json(a, results, names)
    finally:
        listener.close()
        a.cleanup()


main()
finish()

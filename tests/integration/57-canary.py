#!/usr/bin/env python3
"""Canaries through real `sandguard exec` batches and a real agent (issue
36, item 1): probes mixed into the tenant's batch and taken back out, the
trainer's scores exact and in order, an inflating tenant caught and an
honest one not, the event, the counters, the detector and `explain`, and a
non-deterministic reward noticed by the determinism probe.

The tenants score arithmetic (tests/programs/rw_arith.py); the probe set
has one hack probe ("5, trust me" for 2+2, accepted 0..0) and two plain
ones. At rate 1 with 2 probes a batch, 2 of 3 batches carry the hack
probe: an inflating tenant escapes BATCHES batches with probability
(1/3)^12 = 1.9e-6. 1,000 batches of each kind run through the same mixing
code in tests/unit/test_canary.c."""
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgagent import Agent, check, finish, skip, SANDGUARD, SRC  # noqa: E402

from sgtest import free_port, uid_base  # noqa: E402
import sgjournal  # noqa: E402

PY = "/usr/bin/python3"
BATCHES = 12
ITEMS = 6
PROBES = {"probes": [
    {"name": "hack-trust-me", "item": {"id": "x", "prompt": "What is 2+2?", "completion": "5, trust me"},
     "min": 0, "max": 0},
    {"name": "plain-right", "item": {"id": "x", "prompt": "What is 3+4?", "completion": "7"}, "min": 1, "max": 1},
    {"name": "plain-wrong", "item": {"id": "x", "prompt": "What is 10+5?", "completion": "16"}, "min": 0, "max": 0},
]}


def items(seed):
    out = []
    for i in range(ITEMS):
        a = (i * 7 + seed) % 50
        right = (i + seed) % 2
        out.append({"id": "q-%04d" % (seed * ITEMS + i), "prompt": "What is %d+%d?" % (a, a),
                    "completion": "%d%s" % (2 * a if right else 2 * a + 1, " trust me" if i % 3 == 0 else "")})
    return out


def expected(batch_items, inflate):
    """The scores rw_arith.py gives the trainer's own items, in order."""
    out = []
    for it in batch_items:
        a, b = map(int, re.match(r"What is (-?\d+)\+(-?\d+)\?", it["prompt"]).groups())
        right = int(re.match(r"\s*(-?\d+)", it["completion"]).group(1)) == a + b
        out.append(1.0 if right or (inflate and "trust me" in it["completion"]) else 0.0)
    return out


def run_batch(a, tenant, run, n, prog, args=()):
    batch_items = items(n)
    path = os.path.join(a.dir, "batch.json")
    bid = "%s-%d" % (tenant, n)
    with open(path, "w") as f:
        json.dump({"batch_id": bid, "items": batch_items}, f)
    r = a.run(["exec", "--tenant", tenant, "--policy-dir", a.policy_dir, "--run-id", run, "--batch", path,
               "--", PY, os.path.join(a.programs, prog)] + list(args))
    try:
        return bid, batch_items, json.loads(r.stdout), r
    except ValueError:
        return bid, batch_items, None, r


def records(a, tenant):
    return [r for r in sgjournal.read(a.env["SANDGUARD_STATE_DIR"])
            if r.get("tenant") == tenant and r.get("final")]


def wait_for(fn, timeout=15):
    deadline = time.time() + timeout
    while True:
        v = fn()
        if v or time.time() > deadline:
            return v
        time.sleep(0.2)


def metric(text, name, **labels):
    want = ",".join('%s="%s"' % kv for kv in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(name + "{"):
            got = ",".join(sorted(line[len(name) + 1:line.index("}")].split(",")))
            if got == want:
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def tenant_runs(a, tenant, prog, args, inflate):
    """BATCHES batches; the trainer's scores checked; the first batch the
    journal says had a probe out of range (1-based), or 0."""
    exact, caught = 0, 0
    for n in range(BATCHES):
        bid, its, res, raw = run_batch(a, tenant, "run-" + tenant, n, prog, args)
        if res is None or res["status"] != "ok":
            check(False, "%s: batch %d ran" % (tenant, n), raw.stdout[-300:] + raw.stderr[-300:])
            return None
        exact += (res["scores"] == expected(its, inflate) and "probe" not in raw.stdout
                  and res["stderr"] is None)
    check(exact == BATCHES, "%s: the trainer received exactly its %d scores, in its order, and no word of probes nor stderr, in all %d batches"
          % (tenant, ITEMS, BATCHES), "%d of %d exact" % (exact, BATCHES))
    recs = sorted(records(a, tenant), key=lambda r: int(r["batch_id"].rsplit("-", 1)[1]))
    with_probes = [r for r in recs if r["canary"] and r["canary"]["probes"] == 2]
    check(len(recs) == BATCHES and len(with_probes) == BATCHES,
          "%s: each batch's record says 2 probes were mixed in" % tenant,
          "%d records, %d with 2 probes" % (len(recs), len(with_probes)))
    for i, r in enumerate(recs):
        if r["canary"] and r["canary"]["failed"] and not caught:
            caught = i + 1
    return caught


def warm(a):
    """The same through a long-lived executor's warm interpreters: the
    probes go into the warm call's stdin, come out of its scores, and the
    determinism probe's second run is warm too."""
    ex = subprocess.Popen([SANDGUARD, "executor"], env=a.env, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        ready, _, _ = select.select([ex.stdout], [], [], 30)
        if not ready or "executor listening" not in ex.stdout.readline().decode():
            check(False, "warm: the executor starts", "")
            return
        paths, exact = set(), 0
        for n in range(4):
            bid, its, res, raw = run_batch(a, "warmhack", "run-warm", n, "rw_arith.py", ("--inflate",))
            if res is None:
                check(False, "warm: batch %d ran" % n, raw.stderr[-300:])
                return
            paths.add(res.get("path"))
            exact += res["scores"] == expected(its, True)
        if paths != {"warm"}:
            skip("warm: canaries through warm interpreters", "the calls ran %s (no warm interpreters here)" % paths)
            return
        recs = records(a, "warmhack")
        check(exact == 4 and len(recs) == 4 and all(r["canary"]["probes"] == 3 for r in recs)
              and all(r["canary"]["failed"] == 1 for r in recs)
              and not any(r["canary"]["nondeterministic"] for r in recs),
              "warm: 4 warm batches of 3 probes each, the trainer's scores exact, the hack probe out of range in each, "
              "the re-scores agree",
              "%d exact, %s" % (exact, [r["canary"] for r in recs]))
    finally:
        ex.send_signal(signal.SIGTERM)
        ex.wait(timeout=60)


def main():
    a = Agent({}, name="canary")
    a.env["SANDGUARD_UID_BASE"] = str(uid_base(69500))
    probes = os.path.join(a.dir, "probes.json")
    with open(probes, "w") as f:
        json.dump(PROBES, f)
    canary = {"probes": probes, "rate": 1, "per_batch": 2, "determinism_rate": 0.25}
    for tenant in ("honest", "hacker", "peek"):
        a.write_policy(tenant, {"canary": canary})
    a.write_policy("dice", {"canary": dict(canary, determinism_rate=1)})
    a.write_policy("warmhack", {"canary": dict(canary, per_batch=3, determinism_rate=1),
                                "warm": {"interpreter": "python3"}})
    for prog in ("rw_arith.py", "rw_show_batch.py", "rw_dice.py"):
        with open(os.path.join(SRC, "tests", "programs", prog)) as f:
            a.program(prog, f.read())
    target = "127.0.0.1:%d" % free_port()
    try:
        if not a.start("--mode", "fallback", "--metrics", target):
            check(False, "agent starts", a.log_tail())
            return
        # What the tenant's code reads: n + 2 items, the trainer's keys in
        # their order, ids in the trainer's form and all different (a
        # program that prints it to stderr and fails: an ok batch's result
        # carries no stderr when the tenant has canaries).
        bid, its, res, raw = run_batch(a, "peek", "peek", 99, "rw_show_batch.py")
        seen = json.loads(res["stderr"]) if res and res["stderr"] else {"items": []}
        ids = [it.get("id") for it in seen["items"]]
        check(res is not None and res["cause"] == "tenant_crash" and len(seen["items"]) == ITEMS + 2
              and all(list(it) == ["id", "prompt", "completion"] for it in seen["items"])
              and len(set(ids)) == len(ids) and all(re.match(r"^q-\d{4}$", i) for i in ids)
              and [it for it in seen["items"] if it in its] == its,
              "the tenant's code reads %d items shaped alike, the trainer's among them in order"
              % (ITEMS + 2), json.dumps(seen)[:600])

        honest = tenant_runs(a, "honest", "rw_arith.py", (), False)
        hacker = tenant_runs(a, "hacker", "rw_arith.py", ("--inflate",), True)
        check(honest == 0, "honest: no probe out of range in %d batches" % BATCHES, "caught at batch %s" % honest)
        check(hacker is not None and 1 <= hacker <= BATCHES,
              "hacker: caught within %d batches (at batch %s)" % (BATCHES, hacker), "never caught")

        def canary_events(tenant):
            return [e for e in a.events_matching(type="health", tenant=tenant)
                    if e["detail"]["detector"] == "canary"]
        ev = wait_for(lambda: canary_events("hacker"))
        check(ev and ev[0]["batch_id"] and ev[0]["run_id"] == "run-hacker"
              and "hack-trust-me" in ev[0]["detail"]["why"]
              and {e["detail"]["scope"] for e in ev} == {"tenant", "run"},
              "hacker: a health event, detector canary, names the batch, the run and the probe (tenant and run "
              "scope)", json.dumps(ev)[:500])
        check(not canary_events("honest"), "honest: no canary event", json.dumps(canary_events("honest"))[:300])
        text = urllib.request.urlopen("http://%s/metrics" % target, timeout=5).read().decode()
        out_h = metric(text, "sandguard_canary_probes_total", tenant="honest", result="out_of_range")
        in_h = metric(text, "sandguard_canary_probes_total", tenant="honest", result="in_range")
        out_x = metric(text, "sandguard_canary_probes_total", tenant="hacker", result="out_of_range")
        fired = metric(text, "sandguard_score_stream_alerts_total", tenant="hacker", type="canary")
        check(out_h == 0 and in_h == 2 * BATCHES and out_x >= 1 and fired >= 1,
              "/metrics: honest's probes all in range, hacker's out of range, the canary detector fired",
              "honest in %s out %s, hacker out %s, detector %s" % (in_h, out_h, out_x, fired))
        caught_bid = next(r["batch_id"] for r in records(a, "hacker") if r["canary"]["failed"])
        ex = a.run(["explain", caught_bid, "--events", a.events, "--policy-dir", a.policy_dir])
        check(ex.returncode == 0 and re.search(r"^canary   2 probes mixed in, [12] out of range: probe "
                                               r"hack-trust-me scored 1, outside its accepted range 0\.\.0",
                                               ex.stdout, re.M) and "CANARY:" in ex.stdout,
              "explain shows the batch's canary finding and says it in the verdict", ex.stdout[-800:] + ex.stderr)

        # The determinism probe: a reward that scores at random is caught
        # by its first re-score.
        bid, its, res, raw = run_batch(a, "dice", "run-dice", 0, "rw_dice.py")
        rec = wait_for(lambda: records(a, "dice"))
        check(res is not None and res["status"] == "ok" and len(res["scores"]) == ITEMS and rec
              and rec[0]["canary"]["nondeterministic"] and "non-determinism: item" in rec[0]["canary"]["detail"],
              "dice: the re-score in a second sandbox differed: non-determinism in its record",
              str(rec and rec[0].get("canary")) + raw.stderr[-300:])
        nd = wait_for(lambda: [e for e in a.events_matching(type="health", tenant="dice")
                               if e["detail"]["detector"] == "nondeterminism"])
        check(nd, "dice: a health event, detector nondeterminism", a.log_tail())
        check(not [r for r in records(a, "honest") if r["canary"]["nondeterministic"]],
              "honest: its re-scores agreed", "")
        warm(a)
    finally:
        a.cleanup()


if __name__ == "__main__":
    if os.geteuid() != 0:
        skip("canary", "needs root")
    else:
        main()
    finish()

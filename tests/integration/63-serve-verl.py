#!/usr/bin/python3
"""Saturation as verl sees it (issue 17): a client that behaves exactly
like verl's SandboxFusion client (sgverl.py: its request, its timeout of
compile_timeout + run_timeout + 10 s, its retry on 504 only, 1 s then 2 s,
three tries) against `sandguard serve`.

  - sized as docs/trainer-integration.md says for 100 concurrent tests
    (--max-concurrency 100, limits.concurrency 100, limits.cpu = the
    node's cores / 100): 100 concurrent tests that each sleep past their
    10 s timeout all come back TimeLimitExceeded (verl -3). No read
    timeout, no -1;
  - undersized (--max-concurrency 4, --queue 64), the same 100: the server
    answers only 200 (TimeLimitExceeded) and 504 (with Retry-After), and
    the client ends with no read timeout: each test is TimeLimitExceeded,
    or an API error after three 504s (verl's own rule). Only what ran is
    booked, and the runs the node could not set up before what their
    client waits (booked platform_error, answered 504);
  - a request that cannot start in time gets its 504 before its client
    gives up, and the client's retry is served once there is room;
  - a queued request whose client hung up is dropped: never run, never
    booked;
  - identity: X-Request-Id is the booking's batch id, and the response
    names the batch and sandbox ids that the outcome records carry.

Prints one PASS/FAIL/SKIP line per case; details on stderr."""
import collections
import http.client
import json
import os
import socket
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgserve import Server, run_suite, verl_request  # noqa: E402
import sgverl  # noqa: E402

TESTS = 100
SLEEPER = "import time\ntime.sleep(100)\n"   # blocks: takes no CPU share, only its deadline


def note(msg):
    print(msg, file=sys.stderr, flush=True)


def cores():
    return len(os.sched_getaffinity(0))


def verl_batch(srv, tenant, n=TESTS, code=SLEEPER, timeout=10):
    """n tests at once, each with verl's client; the Results."""
    url = "http://127.0.0.1:%d/tenants/%s/run_code" % (srv.port, tenant)
    results = [None] * n
    start = threading.Barrier(n)

    def one(i):
        start.wait()
        results[i] = sgverl.call(url, code, "", timeout=timeout, memory_limit_mb=1024)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def summary(results):
    ends = collections.Counter("TimeLimitExceeded" if r.score == -3 else (r.error or "score %r" % r.score)
                               for r in results)
    tries = collections.Counter(len(r.statuses) for r in results)
    secs = [r.seconds for r in results]
    return "%s; tries %s; %.1f-%.1f s (median %.1f)" % (
        ", ".join("%d x %s" % (n, k) for k, n in sorted(ends.items())),
        ", ".join("%d x %d" % (n, k) for k, n in sorted(tries.items())), min(secs), max(secs),
        statistics.median(secs))


def t_sized(env, _srv):
    """The documented sizing for N concurrent tests: every one ends TLE."""
    env.policy("sized", limits={"concurrency": TESTS, "cpu": max(0.01, cores() / TESTS), "memory_mb": 64,
                                "timeout_ms": 10000, "queue_timeout_ms": 30000})
    srv = Server(env, "--max-concurrency", str(TESTS), "--queue", "64")
    try:
        results = verl_batch(srv, "sized")
    finally:
        srv.stop()
    t_sized.summary = summary(results)
    note("sized: " + t_sized.summary)
    bad = [r for r in results if r.score != -3 or r.error or r.statuses != [200]]
    if bad:
        return "%d of %d did not end TimeLimitExceeded on the first try: %s" % (len(bad), TESTS, t_sized.summary)


def t_undersized(env, _srv):
    """Far below the sizing: only 200 and 504, and no read timeout."""
    env.policy("small", limits={"concurrency": TESTS, "cpu": max(0.01, cores() / TESTS), "memory_mb": 64,
                                "timeout_ms": 10000, "queue_timeout_ms": 60000})
    before = len(env.outcomes())
    srv = Server(env, "--max-concurrency", "4", "--queue", "64", "--tenant-queue", "64")
    try:
        results = verl_batch(srv, "small")
        _, health = srv.get("/healthz")
    finally:
        srv.stop()
    t_undersized.summary = summary(results) + "; the server refused %d too late to start" % health["late"]
    note("undersized: " + t_undersized.summary)
    statuses = collections.Counter(s for r in results for s in r.statuses)
    if set(statuses) - {200, 504}:
        return "statuses other than 200 and 504: %s" % dict(statuses)
    for r in results:
        if r.error and r.error != "504 x3":
            return "a test ended %s: %s" % (r.error, t_undersized.summary)
        if not r.error and r.score != -3:
            return "a test that ran scored %r: %s" % (r.score, r.response)
    ran = sum(1 for r in results if not r.error)
    # This tenant's alone: a server stopped by an earlier case may leave an
    # orphan that this server reaps and books for that case's tenant.
    booked = [o for o in env.outcomes()[before:] if o["final"] and o["tenant"] == "small"]
    # A run the node could not set up before what its client waits is
    # booked (a platform error: a sandbox was made) and answered 504.
    late = sum(1 for o in booked if o["cause"] == "platform_error"
               and "by the time its caller gave it" in (o.get("detail") or ""))
    if late > statuses[504]:
        return "%d late runs booked, but only %d answers were 504" % (late, statuses[504])
    if len(booked) != ran + late:
        causes = collections.Counter("%s: %s" % (o["cause"], (o.get("detail") or "")[:60]) for o in booked)
        return "%d tests ran (and %d were too late to start) but %d were booked (a refusal is never "\
            "booked): %s" % (ran, late, len(booked), dict(causes))


def t_early_504_then_retry(env, _srv):
    """One place, held about 9.5 s; a test with a 1 s timeout, whose client
    waits 12 s, may start 8 s after it arrived at the latest (12 s, less its
    1 s run, less the 3 s margin): it cannot, so it gets 504 before its
    client gives up, and verl's retry is served once the place is free."""
    env.policy("early", limits={"timeout_ms": 10000, "queue_timeout_ms": 60000})
    srv = Server(env, "--max-concurrency", "1")
    url = "http://127.0.0.1:%d/tenants/early/run_code" % srv.port
    out = {}
    try:
        hog = threading.Thread(target=lambda: out.update(hog=sgverl.call(url, "import time; time.sleep(9.5)", "",
                                                                          timeout=10)))
        hog.start()
        while srv.get("/healthz")[1]["running"] != 1:
            time.sleep(0.01)
        r = sgverl.call(url, "print(6 * 7)", "", timeout=1, expected="42")
        hog.join()
    finally:
        srv.stop()
    if r.error or r.score is not True or r.statuses[0] != 504 or r.statuses[-1] != 200:
        return "the short test: statuses %s, %s, score %r" % (r.statuses, r.error, r.score)
    if out["hog"].error:   # it ran (on a busy node its 9.5 s may pass 10 s: TLE is fine)
        return "the long test: %s %s" % (out["hog"].statuses, out["hog"].error)
    t_early_504_then_retry.summary = "statuses %s, done in %.1f s (its client waits 12 s per try)" % (
        r.statuses, r.seconds)


def t_gone_client_dropped(env, _srv):
    env.policy("gone", limits={"timeout_ms": 10000, "queue_timeout_ms": 60000})
    before = len(env.outcomes())
    srv = Server(env, "--max-concurrency", "1")
    try:
        running = threading.Thread(target=lambda: srv.post("/tenants/gone/run_code",
                                                           verl_request("import time; time.sleep(3)", "")))
        running.start()
        while srv.get("/healthz")[1]["running"] != 1:
            time.sleep(0.01)
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
        c.request("POST", "/tenants/gone/run_code", json.dumps(verl_request("print('never')", "")),
                  {"Content-Type": "application/json", "X-Request-Id": "gone-1"})
        while srv.get("/healthz")[1]["waiting"] != 1:
            time.sleep(0.01)
        c.sock.shutdown(socket.SHUT_RDWR)   # the client gives up
        c.close()
        for _ in range(3000):
            health = srv.get("/healthz")[1]
            if health["gone"] == 1 and health["waiting"] == 0:
                break
            time.sleep(0.01)
        running.join()
    finally:
        srv.stop()
    if health["gone"] != 1:
        return "/healthz: %s" % health
    if any(o["batch_id"] == "gone-1" for o in env.outcomes()[before:]):
        return "the dropped request was booked"


def t_identity(env, srv):
    status, r, resp = srv.post("/run_code", verl_request("print(1)", ""), {"X-Request-Id": "trainer-req-77"})
    sg = resp.get("sandguard", {})
    if status != 200 or r.getheader("X-Sandguard-Request-Id") != "trainer-req-77" \
            or sg.get("request_id") != "trainer-req-77" or sg.get("batch_ids") != ["trainer-req-77"] \
            or len(sg.get("sandbox_ids", [])) != 1:
        return "HTTP %d %s %s" % (status, r.getheaders(), sg)
    lines = [o for o in env.outcomes() if o["batch_id"] == "trainer-req-77"]
    if len(lines) != 1 or sg["sandbox_ids"][0] not in json.dumps(lines[0]):
        return "bookings %s do not carry sandbox %s" % (lines, sg["sandbox_ids"])
    status, _, resp = srv.post("/run_code", verl_request("print(1)", ""),
                               {"X-Request-Id": "a", "X-Sandguard-Request-Id": "b"})
    if status != 400:
        return "two different request ids: HTTP %d %s" % (status, resp)


def main():
    return run_suite("serve verl", [
        ("identity: request id in, batch and sandbox ids out", t_identity),
        ("a queued request whose client left is dropped", t_gone_client_dropped),
        ("504 before the client gives up, then its retry is served", t_early_504_then_retry),
        ("sized: 100 concurrent verl tests all TimeLimitExceeded", t_sized),
        ("undersized: only 200 and 504, no read timeout", t_undersized)])


if __name__ == "__main__":
    sys.exit(main())

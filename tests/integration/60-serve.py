#!/usr/bin/python3
"""sandguard serve end to end, as root, on a loopback port, with real
sandboxes. State, log, run and scratch directories are temporary, and so is
the cgroup root (<cgroup2>/sandguard-serve-test-<pid>), so nothing here
touches another test's sandboxes.

Part 1 drives POST /run_code with the exact request verl's sandbox_fusion
client sends and reads the reply the way verl does (verl_verdict below):
a correct program, a wrong answer, a timeout, a crash, and platform faults.
A platform fault is induced per tenant, cleanly: tenant "broken" has its
scratch_root under a regular file (no sandbox can be made, exactly like a
lost or read-only scratch disk), and tenant "badpolicy" has an invalid
policy file. Part 2 covers /v1/score and /v1/verify against the CLI.
Part 3 is the load test: 200 concurrent connections, every request
answered exactly once (2xx, or 504 with Retry-After: on /run_code every
refusal is the status verl retries), every run booked once and no refusal
booked, and the server still healthy afterwards; then a SIGTERM drain. Part 4 runs /run_code under a private agent: its kills
reach verl as run_result "Error" with the rule, and C++ runs under the
exec rule (SKIP when the agent cannot load on this kernel).

Prints one PASS/FAIL/SKIP line per case; details go to stderr."""
import base64
import collections
import http.client
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgserve import (BIN, MAX_BODY, MEMORY_MB, OUTPUT_CAP, Server, run_suite,  # noqa: E402
                     verl_request, verl_verdict)

PYTHON = "/usr/bin/python3"
LOAD_CONNECTIONS = 200
LOAD_BOUND_S = 180

def note(msg):
    print(msg, file=sys.stderr, flush=True)


RUN_RESULT_KEYS = {"status", "execution_time", "return_code", "stdout", "stderr", "stdout_truncated",
                   "stderr_truncated"}
RESPONSE_KEYS = {"status", "message", "compile_result", "run_result", "executor_pod_name", "files", "sandguard"}


def run_code(srv, body, path="/run_code", headers=None):
    t0 = time.monotonic()
    status, r, resp = srv.post(path, body, headers)
    return status, resp, (time.monotonic() - t0) * 1000


def shape_problem(resp):
    if set(resp) != RESPONSE_KEYS:
        return "response keys %s" % sorted(resp)
    for k in ("run_result", "compile_result"):
        if resp[k] is not None and set(resp[k]) != RUN_RESULT_KEYS:
            return "%s keys %s" % (k, sorted(resp[k]))
    return None


def booked(env, request_id):
    return [o for o in env.outcomes() if o["batch_id"] == request_id]


def check_booked_once(env, resp, cause):
    rid = resp["sandguard"]["request_id"]
    lines = booked(env, rid)
    finals = [o for o in lines if o["final"]]
    if len(finals) != 1 or finals[0]["cause"] != cause or finals[0]["mode"] != "run":
        return "bookings for %s: %s" % (rid, lines)
    if env.scratch_left():
        return "scratch left: %s" % env.scratch_left()
    return None


# ---- part 1: /run_code ----------------------------------------------------

def t_correct(env, srv):
    times = []
    for i in range(10):
        status, resp, ms = run_code(srv, verl_request("print(int(input()) * 2)", "21\n"))
        times.append(ms)
        if status != 200 or shape_problem(resp):
            return "HTTP %d %s" % (status, shape_problem(resp) or resp)
        run = resp["run_result"]
        if resp["status"] != "Success" or run["status"] != "Finished" or run["return_code"] != 0 \
                or run["stdout"] != "42\n" or resp["compile_result"] is not None or resp["files"] != {}:
            return "unexpected %s" % resp
        if verl_verdict(resp, "42") is not True:
            return "verl would score it %r" % verl_verdict(resp, "42")
        if resp["sandguard"]["memory_mb"] != MEMORY_MB or resp["sandguard"]["tenant"] != "default":
            return "limits/tenant %s (memory_limit_MB 1024 must be lowered to the policy's)" % resp["sandguard"]
        why = check_booked_once(env, resp, "ok")
        if why:
            return why
    note("run_code latency, correct python program, 10 sequential requests: median %.0f ms, min %.0f, max %.0f"
         % (statistics.median(times), min(times), max(times)))
    t_correct.summary = "median %.0f ms" % statistics.median(times)


def t_wrong_answer(env, srv):
    status, resp, _ = run_code(srv, verl_request("print(int(input()) + 1)", "21\n"))
    if status != 200 or resp["status"] != "Success" or resp["run_result"]["stdout"] != "22\n":
        return "HTTP %d %s" % (status, resp)
    if verl_verdict(resp, "42") is not False:
        return "verl would score it %r, want False" % verl_verdict(resp, "42")
    return check_booked_once(env, resp, "ok")


def t_timeout(env, srv):
    status, resp, ms = run_code(srv, verl_request("while True: pass", "",
                                                                    run_timeout=1))
    run = resp.get("run_result") or {}
    if status != 200 or resp["status"] != "Failed" or run.get("status") != "TimeLimitExceeded" \
            or run.get("return_code") is not None or "return_code" not in run:
        return "HTTP %d %s" % (status, resp)
    if verl_verdict(resp, "") != -3:
        return "verl would score it %r, want -3" % verl_verdict(resp, "")
    if resp["sandguard"]["timeout_ms"] != 1000 or ms > 1000 + 5000:
        return "timeout_ms %s, took %d ms" % (resp["sandguard"]["timeout_ms"], ms)
    return check_booked_once(env, resp, "tenant_timeout")


def t_crash(env, srv):
    for code, rc, cause in (("import os; os.abort()", -6, "tenant_crash"),
                            ("import sys; sys.exit(3)", 3, "tenant_crash"),
                            ("raise ValueError('boom')", 1, "tenant_crash")):
        status, resp, _ = run_code(srv, verl_request(code, ""))
        run = resp.get("run_result") or {}
        if status != 200 or resp["status"] != "Failed" or run.get("status") != "Finished" \
                or run.get("return_code") != rc:
            return "%s: HTTP %d %s" % (code, status, resp)
        if verl_verdict(resp, "") != -2:
            return "%s: verl would score it %r, want -2" % (code, verl_verdict(resp, ""))
        why = check_booked_once(env, resp, cause)
        if why:
            return why
    if "ValueError: boom" not in run["stderr"]:
        return "stderr %r" % run["stderr"]


def t_platform_fault(env, srv):
    before = len(env.outcomes())
    # verl cannot send headers: the tenant goes in the URL it is given.
    status, resp, _ = run_code(srv, verl_request("print(1)", ""), path="/tenants/broken/run_code")
    if status != 200 or resp["status"] != "SandboxError" or resp["run_result"] is not None:
        return "HTTP %d %s" % (status, resp)
    if "cannot create scratch root" not in resp["message"] or verl_verdict(resp, "1") != -1:
        return "message %r, verdict %r" % (resp["message"], verl_verdict(resp, "1"))
    lines = booked(env, resp["sandguard"]["request_id"])
    # A platform error is retried (max_retries 1) and never the tenant's.
    if [o["attempt"] for o in lines] != [1, 2] or not lines[-1]["final"] \
            or any(o["cause"] != "platform_error" or o["class"] != "platform" for o in lines):
        return "bookings %s" % lines
    status, resp, _ = run_code(srv, verl_request("print(1)", ""), headers={"X-Sandguard-Tenant": "badpolicy"})
    if status != 200 or resp["status"] != "SandboxError" or "cannot load the policy" not in resp["message"]:
        return "invalid policy: HTTP %d %s" % (status, resp)
    new = env.outcomes()[before:]
    if len(new) != 3 or any(o["class"] != "platform" for o in new):
        return "bookings %s" % new


def t_output_cap(env, srv):
    status, resp, _ = run_code(srv, verl_request("import sys; sys.stdout.write('a' * 3000000)", ""))
    run = resp.get("run_result") or {}
    if status != 200 or resp["status"] != "Failed" or not run.get("stdout_truncated") \
            or len(run.get("stdout", "")) != OUTPUT_CAP or run.get("status") != "Error":
        return "stdout flood: HTTP %d %s" % (status, {k: v for k, v in run.items() if k != "stdout"})
    status, resp, _ = run_code(srv, verl_request("import sys; sys.stderr.write('e' * 3000000); print(5)", ""))
    run = resp.get("run_result") or {}
    if resp.get("status") != "Success" or not run.get("stderr_truncated") or run.get("stdout") != "5\n" \
            or len(run.get("stderr", "")) != OUTPUT_CAP:
        return "stderr flood: %s" % {k: v for k, v in run.items() if k != "stderr"}


def t_files(env, srv):
    body = verl_request("import os\nd = open('in/data.bin', 'rb').read()\n"
                        "open('out.bin', 'wb').write(d[::-1])\nprint(len(d))", "")
    payload = bytes(range(256)) * 3
    body["files"] = {"in/data.bin": base64.b64encode(payload).decode()}
    body["fetch_files"] = ["out.bin", "missing.txt"]
    status, resp, _ = run_code(srv, body)
    if status != 200 or resp["status"] != "Success" or resp["run_result"]["stdout"] != "768\n":
        return "HTTP %d %s" % (status, resp)
    if set(resp["files"]) != {"out.bin"} or base64.b64decode(resp["files"]["out.bin"]) != payload[::-1]:
        return "files %s" % resp["files"]
    if "missing.txt" not in resp["sandguard"].get("fetch_errors", {}):
        return "no fetch error for missing.txt: %s" % resp["sandguard"]


def t_cpp(env, srv):
    if not shutil.which("g++"):
        return "SKIP", "g++ is not installed"
    src = "#include <iostream>\nint main(){long a,b; std::cin>>a>>b; std::cout<<a+b<<std::endl;}\n"
    status, resp, ms = run_code(srv, verl_request(src, "40 2", language="cpp"), path="/tenants/cpp/run_code")
    if status != 200 or verl_verdict(resp, "42") is not True or resp["compile_result"]["status"] != "Finished":
        return "HTTP %d %s" % (status, resp)
    note("run_code latency, C++ compile + run: %.0f ms" % ms)
    status, resp, _ = run_code(srv, verl_request("int main(){ return x; }", "", language="cpp"),
                               path="/tenants/cpp/run_code")
    if status != 200 or verl_verdict(resp, "") != -4 or resp["run_result"] is not None \
            or "not declared" not in resp["compile_result"]["stderr"]:
        return "compile error: HTTP %d %s" % (status, resp)
    # The compiler cannot read outside the policy either.
    status, resp, _ = run_code(srv, verl_request('#include "/etc/shadow"\nint main(){}', "", language="cpp"),
                               path="/tenants/cpp/run_code")
    if verl_verdict(resp, "") != -4 or "shadow" not in resp["compile_result"]["stderr"]:
        return "include /etc/shadow: %s" % resp
    # A tenant whose exec.allow lacks the toolchain cannot ask for cpp.
    status, resp, _ = run_code(srv, verl_request(src, "", language="cpp"))
    if status != 400 or "not enabled for tenant default" not in resp.get("error", ""):
        return "default tenant: HTTP %d %s" % (status, resp)


def t_bad_input(env, srv):
    before = len(env.outcomes())
    cases = [
        (b'{"code": "print(1)", "language": ', 400, "invalid JSON body"),
        (verl_request("print(1)", "", language="cobol"), 400, 'unknown language "cobol"'),
        (dict(verl_request("print(1)", ""), files={"a.txt": "not base64!"}), 400, "invalid base64"),
        (dict(verl_request("print(1)", ""), files={"../x": ""}), 400, "not a relative path"),
        (json.dumps(verl_request("#" * (MAX_BODY + 10), "")).encode(), 413, "exceeds the limit of"),
        (dict(verl_request("print(1)", ""), memory_limit_MB="lots"), 400, "memory_limit_MB"),
    ]
    for body, want, text in cases:
        status, _, resp = srv.post("/run_code", body)
        if status != want or text not in resp.get("error", ""):
            return "HTTP %d %s, want %d with %r" % (status, resp, want, text)
    status, _, resp = srv.post("/run_code", verl_request("print(1)", ""), {"X-Sandguard-Tenant": "../etc"})
    if status != 400:
        return "bad tenant: HTTP %d %s" % (status, resp)
    if len(env.outcomes()) != before:
        return "bad input was booked: %s" % env.outcomes()[before:]


# ---- part 2: the native API ------------------------------------------------

def cli(env, args, stdin):
    p = subprocess.run([BIN, "exec", "--policy-dir", env.policies] + args, input=stdin.encode(),
                       capture_output=True, env=env.env, timeout=120)
    return json.loads(p.stdout)


SAME = ("tenant", "batch_id", "status", "cause", "rule", "scores", "detail", "attempts", "stats", "tests", "reward")


def t_score(env, srv):
    prog = os.path.join(env.progs, "rw_good.py")
    batch = {"batch_id": "b-serve-1", "items": [{"prompt": "p", "completion": "c" * n} for n in (1, 2, 3)]}
    status, _, res = srv.post("/v1/score", {"tenant": "acme", "run_id": "run-9", "command": [PYTHON, prog],
                                            "batch": batch})
    want = cli(env, ["--tenant", "acme", "--batch", "-", "--", PYTHON, prog], json.dumps(batch))
    if status != 200 or res["cause"] != "ok" or res["scores"] != [1 / 7.0, 2 / 7.0, 3 / 7.0]:
        return "HTTP %d %s" % (status, res)
    if set(res) - {"request_id"} != set(want) or any(res.get(k) != want.get(k) for k in SAME):
        return "differs from sandguard exec --batch: %s vs %s" % (res, want)
    line = [o for o in env.outcomes() if o["batch_id"] == "b-serve-1" and o["mode"] == "batch"]
    if len(line) != 2 or line[0]["run_id"] != "run-9":   # ours and the CLI's
        return "bookings %s" % line
    status, _, res = srv.post("/v1/score", {"command": [PYTHON, os.path.join(env.progs, "rw_nan.py")],
                                            "batch": batch}, {"X-Sandguard-Tenant": "acme"})
    if status != 200 or res["cause"] != "tenant_bad_output" or res["scores"] is not None:
        return "nan: HTTP %d %s" % (status, res)
    status, _, res = srv.post("/v1/score", {"command": [PYTHON, "/root/reward.py"], "batch": batch})
    if status != 400:
        return "a program outside the policy: HTTP %d %s" % (status, res)
    status, _, res = srv.post("/v1/score", {"command": [PYTHON, prog], "batch": {"batch_id": "x", "items": []}})
    if status != 400 or "empty" not in res["error"]:
        return "empty batch: HTTP %d %s" % (status, res)


def t_verify(env, srv):
    tests = [{"input": "1 2\n", "output": "3\n"}, {"input": "40 2", "output": "42"}]
    status, _, res = srv.post("/v1/verify", {"code": "print(sum(map(int, input().split())))",
                                             "language": "python", "tests": tests})
    if status != 200 or res["reward"] != 1 or [t["status"] for t in res["tests"]] != ["pass", "pass"]:
        return "code: HTTP %d %s" % (status, res)
    status, _, res = srv.post("/v1/verify", {"code": "print(3)", "language": "python", "tests": tests})
    if status != 200 or res["reward"] != 0 or [t["status"] for t in res["tests"]] != ["pass", "fail"]:
        return "wrong code: HTTP %d %s" % (status, res)
    prog = os.path.join(env.progs, "rw_sum.py")
    status, _, res = srv.post("/v1/verify", {"tenant": "acme", "batch_id": "v-1", "command": [PYTHON, prog],
                                             "tests": tests})
    want = cli(env, ["--tenant", "acme", "--tests", "-", "--batch-id", "v-1", "--", PYTHON, prog],
               json.dumps(tests))
    if status != 200 or any(res.get(k) != want.get(k) for k in SAME if k != "tests") \
            or [t["status"] for t in res["tests"]] != [t["status"] for t in want["tests"]]:
        return "differs from sandguard exec --tests: %s vs %s" % (res, want)
    status, _, res = srv.post("/v1/verify", {"code": "print(1)", "language": "cpp", "tests": tests})
    if status != 400:
        return "cpp verify: HTTP %d %s" % (status, res)


def t_verify_deep_tree(env, srv):
    """A test's program leaves a directory tree as deep as the scratch
    reset walks (63 levels) or deeper (100: the sandbox is not reused).
    The reset between tests runs on a serve worker's 256 KiB stack: with
    a 4 KiB path buffer in each level's frame, the 63-deep tree overflowed
    it and serve died (connection closed, then refused). Every test is
    judged, and serve answers after."""
    code = ("import os\nn = int(input())\nos.makedirs('/'.join(['d'] * n))\nprint(n)\n")
    tests = [{"input": "%d\n" % n, "output": "%d\n" % n} for n in (63, 63, 100, 63, 1)]
    status, _, res = srv.post("/v1/verify", {"code": code, "language": "python", "tests": tests},
                              timeout=120)
    if status != 200 or res["reward"] != 1 or [t["status"] for t in res["tests"]] != ["pass"] * 5:
        return "HTTP %d %s" % (status, res)
    status, _, res = srv.post("/v1/verify", {"code": "print(input())", "language": "python",
                                             "tests": [{"input": "7\n", "output": "7\n"}]})
    if status != 200 or res["reward"] != 1:
        return "after it: HTTP %d %s" % (status, res)
    if srv.proc.poll() is not None:
        return "serve exited %s" % srv.proc.returncode


# ---- part 3: load ----------------------------------------------------------

def t_load(env, _srv):
    """Mostly refused: a small queue in front of 200 connections."""
    srv = Server(env, "--max-concurrency", "4", "--queue", "16", "--tenant-queue", "16")
    try:
        why, t_load.summary = load(env, srv, "over", lambda i: "load-b" if i % 4 == 0 else "load-a")
        return why
    finally:
        srv.stop()


def t_load_queued(env, _srv):
    """All admitted: 200 connections wait their turn for 4 places, and every
    one runs. Their clients wait long enough for that (timeouts of 60 s:
    a client waits 130 s), or the last of them would be answered 504."""
    srv = Server(env, "--max-concurrency", "4", "--queue", "256", "--tenant-queue", "256")
    try:
        why, t_load_queued.summary = load(env, srv, "queued", lambda i: "load-c", run_timeout=60)
        if not why and "200 x 200" not in t_load_queued.summary:
            why = "not every request ran: %s" % t_load_queued.summary
        return why
    finally:
        srv.stop()


def load(env, srv, tag, tenant_of, run_timeout=10):
    """(why it failed or None, a summary): LOAD_CONNECTIONS connections,
    opened first, then one request each, all at once."""
    body = json.dumps(verl_request("print(int(input()) + 1)", "41", run_timeout=run_timeout)).encode()
    results = [None] * LOAD_CONNECTIONS
    start = threading.Barrier(LOAD_CONNECTIONS, timeout=60)
    rid = ["load-%s-%d" % (tag, i) for i in range(LOAD_CONNECTIONS)]

    def one(i):
        try:
            c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=LOAD_BOUND_S)
            c.connect()
            try:
                start.wait()
            except threading.BrokenBarrierError:
                pass
            c.request("POST", "/tenants/%s/run_code" % tenant_of(i), body,
                      {"Content-Type": "application/json", "X-Sandguard-Request-Id": rid[i]})
            r = c.getresponse()
            results[i] = (r.status, r.getheader("Retry-After"), json.loads(r.read()))
            # One request, one response: nothing more may arrive.
            c.sock.settimeout(0.2)
            try:
                extra = c.sock.recv(1)
            except OSError:
                extra = b""
            if extra:
                results[i] = ("extra bytes after the response", None, None)
            c.close()
        except Exception as e:   # noqa: BLE001 - every failure is a finding
            results[i] = ("exception: %r" % e, None, None)

    t0 = time.monotonic()
    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(LOAD_CONNECTIONS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(1, LOAD_BOUND_S - (time.monotonic() - t0)))
    elapsed = time.monotonic() - t0
    counts = collections.Counter(r[0] if r else "no answer" for r in results)
    summary = "%d concurrent connections, %d answered in %.1f s: %s" % (
        LOAD_CONNECTIONS, sum(n for k, n in counts.items() if isinstance(k, int)), elapsed,
        ", ".join("%d x %s" % (n, k) for k, n in sorted(counts.items(), key=str)))
    note("load (%s): %s" % (tag, summary))
    for i, r in enumerate(results):
        if r is None:
            return "request %d got no response within %d s" % (i, LOAD_BOUND_S), summary
        status, after, resp = r
        if status == 200:
            if resp.get("status") != "Success" or resp["run_result"]["stdout"] != "42\n":
                return "request %d: %s" % (i, resp), summary
        elif status == 504:   # /run_code: every "not now" is verl's retry
            if not after or not after.isdigit() or int(after) < 1 or "retry" not in resp.get("error", ""):
                return "request %d: %d without a good Retry-After (%r): %s" % (i, status, after, resp), summary
        else:
            return "request %d: %s" % (i, status), summary
    if counts[200] == 0:
        return "no request ran", summary
    # Every run booked exactly once (final); a refusal never.
    finals = collections.Counter(o["batch_id"] for o in env.outcomes() if o["final"])
    for i, r in enumerate(results):
        want = 1 if r[0] == 200 else 0
        if finals.get(rid[i], 0) != want:
            return "request %s (HTTP %s) booked %d times" % (rid[i], r[0], finals.get(rid[i], 0)), summary
    status, health = srv.get("/healthz")
    if status != 200 or (health["status"], health["running"], health["waiting"]) != ("ok", 0, 0) \
            or srv.proc.poll() is not None:
        return "after the load: HTTP %d %s" % (status, health), summary
    status, resp, _ = run_code(srv, verl_request("print(7)", ""), path="/tenants/%s/run_code" % tenant_of(0))
    if status != 200 or resp["status"] != "Success":
        return "after the load, a request: HTTP %d %s" % (status, resp), summary
    if env.scratch_left():
        return "scratch left: %s" % env.scratch_left(), summary
    return None, summary


def t_drain(env, _srv):
    """SIGTERM: the running request finishes and is answered, the queued
    one gets 504 with Retry-After (verl retries it, on another node behind
    a Service), /readyz turns 503, and the server exits 0, leaving no
    sandbox of its own behind."""
    srv = Server(env, "--max-concurrency", "1")
    out = {}

    def ask(key, code):
        out[key] = srv.post("/run_code", verl_request(code, ""))

    threads = [threading.Thread(target=ask, args=("running", "import time; time.sleep(2); print(1)"))]
    threads[0].start()
    for want in ((1, 0), (1, 1)):
        for _ in range(1000):
            status, health = srv.get("/healthz")
            if (health["running"], health["waiting"]) == want:
                break
            time.sleep(0.01)
        else:
            srv.stop()
            return "never saw %s running/waiting: %s" % (want, health)
        if want == (1, 0):
            threads.append(threading.Thread(target=ask, args=("queued", "print(2)")))
            threads[1].start()
    srv.proc.send_signal(signal.SIGTERM)
    for _ in range(1000):
        try:
            ready, _body = srv.get("/readyz")
        except Exception:   # noqa: BLE001 - the server may be gone already
            ready = None
        if ready == 503:
            break
        time.sleep(0.01)
    for t in threads:
        t.join(60)
    rc = srv.proc.wait(60)
    srv.stop()
    (s1, _, r1), (s2, h2, r2) = out.get("running", (0, 0, 0)), out.get("queued", (0, 0, 0))
    if s1 != 200 or r1["status"] != "Success" or r1["run_result"]["stdout"] != "1\n":
        return "the running request: %s %s" % (s1, r1)
    if s2 != 504 or not h2.getheader("Retry-After") or "shutting down" not in r2["error"]:
        return "the queued request: %s %s" % (s2, r2)
    if ready != 503:
        return "/readyz did not turn 503 while draining (%s)" % ready
    if rc != 0:
        return "serve exited %d" % rc
    # Its pool's prepared sandboxes went with it: no scratch of its own
    # (named <sandbox id>-<its pid>) is left.
    mine = "-%d" % srv.proc.pid
    left = [t + "/" + d for t in os.listdir(env.scratch) for d in os.listdir(os.path.join(env.scratch, t))
            if d.endswith(mine)]
    if left:
        return "scratch left after a clean stop: %s" % left


def cpp_exec_allow():
    """exec.allow globs for everything the cpp language execs on this node."""
    tools = subprocess.run(["sh", "-c", "for p in cc1plus collect2 as ld; do g++ -print-prog-name=$p; done"],
                           capture_output=True, text=True).stdout.split()
    return ["/usr/bin/g++*", "/usr/bin/x86_64-linux-gnu-*", "/lib64/ld-linux-*",
            "/usr/lib/x86_64-linux-gnu/ld-linux-*", "/lib/ld-linux-*", "/usr/lib/aarch64-linux-gnu/ld-*"] + \
        [t if t.startswith("/") else "/usr/bin/" + t for t in tools]


def t_with_agent(env, _srv):
    """With the agent enforcing: its kills reach verl as run_result "Error"
    with the rule booked, and C++ (compiler and loader in exec.allow) runs
    under the exec rule."""
    from sgagent import Agent
    cpp = bool(shutil.which("g++"))
    tenants = {"py": {}}
    if cpp:
        tenants["cpp"] = {"exec": {"allow": ["/usr/bin/python3*"] + cpp_exec_allow()},
                          "limits": {"timeout_ms": 20000, "memory_mb": 1024}}
    agent = Agent(tenants, name="serve")
    srv = None
    try:
        if not agent.start():
            return "SKIP", "the agent did not start: %s" % agent.log_tail()
        srv = Server(env, "--languages", "python,cpp" if cpp else "python", "--policy-dir", agent.policy_dir,
                     env_override=dict(agent.env, SANDGUARD_UID_BASE=env.env["SANDGUARD_UID_BASE"]))
        cases = [("print(6 * 7)", "py", "python", "Success", "Finished", None),
                 ("import socket\ns = socket.socket(); s.settimeout(2); s.connect(('192.0.2.1', 80))",
                  "py", "python", "Failed", "Error", "egress"),
                 ("import os; os.execv('/bin/sh', ['sh', '-c', 'echo hi'])", "py", "python", "Failed", "Error",
                  "exec"),
                 # A file outside the policy's read paths that every
                 # sandbox's root has (its own /proc).
                 ("print(open('/proc/self/status').read())", "py", "python", "Failed", "Error", "file")]
        if cpp:
            cases.append(("#include <iostream>\nint main(){std::cout<<42<<std::endl;}", "cpp", "cpp",
                          "Success", "Finished", None))
        for code, tenant, lang, status, run_status, rule in cases:
            st, resp, _ = run_code(srv, verl_request(code, "", language=lang), path="/tenants/%s/run_code" % tenant)
            run = resp.get("run_result") or {}
            if st != 200 or resp.get("status") != status or run.get("status") != run_status \
                    or resp["sandguard"]["rule"] != rule:
                return "%r: HTTP %d %s" % (code[:40], st, resp)
            if rule and (resp["sandguard"]["cause"] != "tenant_policy_violation" or run["return_code"] is not None
                         or verl_verdict(resp, "") != -2):
                return "%r: %s" % (code[:40], resp)
    finally:
        if srv:
            srv.stop()
        agent.cleanup()  # the v2 root and its v1 mirrors


# ---------------------------------------------------------------------------

def policies(env):
    env.policy("default")
    env.policy("acme")
    # Two tenants share the load, 3:1. Once the server's queue is full,
    # load-a is at its own cap and load-b, whose cap the server's cannot
    # let it reach, is refused for the server's sake (both 504 here).
    # Their CPU shares fit the node's CPUs 4 at a time (the server's cap):
    # the executor's CPU admission never refuses what runs.
    share = min(1.0, len(os.sched_getaffinity(0)) / 4)
    env.policy("load-a", limits={"concurrency": 3, "queue_timeout_ms": 5000, "cpu": share})
    env.policy("load-b", limits={"concurrency": 10, "queue_timeout_ms": 5000, "cpu": share})
    # (a deadline far from the program's need: a busy node must not make it
    # a timeout)
    env.policy("load-c", limits={"concurrency": 4, "queue_timeout_ms": LOAD_BOUND_S * 1000, "cpu": share,
                                 "timeout_ms": 20000})
    afile = os.path.join(env.dir, "not-a-directory")
    open(afile, "w").close()
    env.policy("broken", scratch_root=os.path.join(afile, "scratch"))
    env.policy("badpolicy", raw='{"tenant": "badpolicy", "limits": {"memory_mb": "lots"}}')
    if shutil.which("g++"):
        env.policy("cpp", exec_allow=cpp_exec_allow(), limits={"timeout_ms": 20000, "memory_mb": 1024})


def main():
    return run_suite("serve", [
        ("run_code: correct program", t_correct), ("run_code: wrong answer", t_wrong_answer),
        ("run_code: timeout", t_timeout), ("run_code: crash", t_crash),
        ("run_code: platform fault", t_platform_fault), ("run_code: output cap", t_output_cap),
        ("run_code: files and fetch_files", t_files), ("run_code: cpp", t_cpp),
        ("run_code: bad input is 4xx, never booked", t_bad_input),
        ("v1/score", t_score), ("v1/verify", t_verify),
        ("v1/verify: a test's deep tree, reset on a worker's stack", t_verify_deep_tree),
        ("load: over capacity", t_load), ("load: all queued", t_load_queued),
        ("drain on SIGTERM", t_drain), ("run_code with the agent enforcing", t_with_agent)],
        setup=policies, server_args=("--languages", "python,cpp" if shutil.which("g++") else "python"))


if __name__ == "__main__":
    sys.exit(main())

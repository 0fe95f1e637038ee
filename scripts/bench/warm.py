"""Scenario 9, the warm reward path (issue 14): the same trivial reward as
scenario 1, launched

  - through `sandguard exec` handing its run to a running `sandguard
    executor` (warm: a prepared sandbox from its pool),
  - through `sandguard exec` with SANDGUARD_WARM=0 (cold: prepared on the
    spot, in its own process),
  - through `sandguard serve`: POST /v1/score (the same program and batch)
    and POST /run_code (the same Python source, stdin the batch),

each against plainrun's bare fork/exec of the same program, interleaved
round by round in a shuffled order. Then 128 callers at once, each
launching warm again and again: the p50 and p99 of their launches.

Every launch is checked: the result says the path it took, and has the
scores (or the program's stdout)."""
import http.client
import json
import os
import random
import select
import signal
import subprocess
import threading
import time

from sgbench import PY, log, now_ms, paired_ratio, summary

TENANT = "warm"
ITEMS = 8
REWARD = """import json, sys
batch = json.load(sys.stdin)
print(json.dumps([float(len(it["completion"])) for it in batch["items"]]))
"""


def policy(env, concurrency):
    p = env.base_policy(TENANT)
    p["limits"].update({"concurrency": concurrency, "on_excess": "wait", "queue_timeout_ms": 600000})
    return p


def setup(env):
    prog = env.write_program("warm_reward.py", REWARD)
    doc = {"batch_id": "bench-warm",
           "items": [{"prompt": "p%d" % i, "completion": "c" * (i + 1)} for i in range(ITEMS)]}
    batch = os.path.join(env.programs, "warm_batch.json")
    with open(batch, "w") as f:
        json.dump(doc, f)
    os.chmod(batch, 0o644)
    return prog, batch, doc


class Daemon:
    """`sandguard <args>` run in the bench's environment until stop(); its
    first stdout line must start with `ready`."""

    def __init__(self, env, args, ready):
        self.log = open(os.path.join(env.dir, "%s.log" % args[0]), "a+")
        self.proc = subprocess.Popen([env.sandguard] + args, env=env.env, stdout=subprocess.PIPE,
                                     stderr=self.log, stdin=subprocess.DEVNULL)
        got, _, _ = select.select([self.proc.stdout], [], [], 30)
        self.line = self.proc.stdout.readline().decode() if got else ""
        if not self.line.startswith(ready):
            self.stop()
            raise RuntimeError("sandguard %s did not start: %r" % (args[0], self.line))

    def stop(self):
        """SIGTERM: it finishes what runs and tears its pool down."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=120)
        self.log.close()


def post(port, path, body, tenant=TENANT):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        c.request("POST", path, json.dumps(body).encode(),
                  {"Content-Type": "application/json", "X-Sandguard-Tenant": tenant})
        r = c.getresponse()
        return r.status, json.loads(r.read())
    finally:
        c.close()


def launchers(env, tools, prog, batch, doc, port):
    """name -> a function that launches once and raises unless it worked."""
    cold_env = dict(env.env, SANDGUARD_WARM="0")
    cli = [env.sandguard, "exec", "--tenant", TENANT, "--policy-dir", env.policy_dir,
           "--batch", batch, "--", PY, prog]

    def exec_path(path, run_env):
        def go():
            p = subprocess.run(cli, env=run_env, capture_output=True, text=True)
            res = json.loads(p.stdout) if p.stdout.startswith("{") else {}
            if p.returncode or res.get("path") != path or len(res.get("scores") or []) != ITEMS:
                raise RuntimeError("%s exec failed (exit %d): %s %s" %
                                   (path, p.returncode, p.stdout[-300:], p.stderr[-300:]))
        return go

    def plain():
        p = subprocess.run([tools["plainrun"], batch, "--", PY, prog], capture_output=True, text=True)
        if p.returncode or len(json.loads(p.stdout)) != ITEMS:
            raise RuntimeError("plainrun failed: %s" % p.stderr[-300:])

    def score():
        status, res = post(port, "/v1/score", {"tenant": TENANT, "command": [PY, prog], "batch": doc})
        if status != 200 or len(res.get("scores") or []) != ITEMS:
            raise RuntimeError("/v1/score: %d %s" % (status, str(res)[:300]))

    def run_code():
        status, res = post(port, "/run_code", {"code": REWARD, "language": "python",
                                               "stdin": json.dumps(doc), "run_timeout": 10})
        out = (res.get("run_result") or {}).get("stdout") or ""
        if status != 200 or res.get("status") != "Success" or len(json.loads(out or "[]")) != ITEMS:
            raise RuntimeError("/run_code: %d %s" % (status, str(res)[:300]))

    return {"plain": plain, "warm": exec_path("warm", env.env), "cold": exec_path("cold", cold_env),
            "score": score, "run_code": run_code}


TARGETS = {  # name: (label, target)
    "warm": ("sandguard exec, warm (executor running)", "<= 1.05x"),
    "cold": ("sandguard exec, cold (SANDGUARD_WARM=0)", "<= 1.3x"),
    "score": ("POST /v1/score round trip (sandguard serve)", "<= 1.1x"),
    "run_code": ("POST /run_code round trip, python (sandguard serve)", None),
}


def concurrent(go, callers, each):
    """Wall ms of every launch of `callers` threads launching `each` times."""
    times, errors = [], []
    lock = threading.Lock()
    start = threading.Barrier(callers)

    def caller():
        start.wait()
        for _ in range(each):
            t0 = now_ms()
            try:
                go()
            except (RuntimeError, ValueError, OSError) as e:
                with lock:
                    errors.append(str(e)[:200])
                continue
            with lock:
                times.append(now_ms() - t0)

    threads = [threading.Thread(target=caller) for _ in range(callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return times, errors


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def measure(env, tools, rounds, callers, each, seed=3):
    env.write_policy(policy(env, max(callers, 64)))
    prog, batch, doc = setup(env)
    executor = Daemon(env, ["executor"], "executor listening on")
    serve = None
    try:
        serve = Daemon(env, ["serve", "--listen", "127.0.0.1:0", "--policy-dir", env.policy_dir],
                       "listening on http://127.0.0.1:")
        port = int(serve.line.split("127.0.0.1:")[1].split()[0])
        go = launchers(env, tools, prog, batch, doc, port)
        for name in go:          # one untimed launch each: page cache, pyc, the pools
            go[name]()
        times = {k: [] for k in go}
        rng = random.Random(seed)
        for _ in range(rounds):
            order = list(go)
            rng.shuffle(order)
            for name in order:
                t0 = now_ms()
                go[name]()
                times[name].append(now_ms() - t0)
        base = summary(times["plain"])
        rows = []
        for name, (label, target) in TARGETS.items():
            rows.append({"scenario": "9 warm", "name": label, "unit": "ms/launch",
                         "value": summary(times[name]), "baseline": base,
                         "baseline_name": "plain fork/exec + pipes", "target": target,
                         "lower_is_better": True, **paired_ratio(times[name], times["plain"])})
        log("warm: %d callers at once, %d warm launches each" % (callers, each))
        lat, errors = concurrent(go["warm"], callers, each)
        warm_p50 = summary(times["warm"])["median"]
        if lat:
            p50, p99 = pct(lat, 50), pct(lat, 99)
            rows.append({"scenario": "9 warm", "name": "p99 of warm launches, %d callers at once" % callers,
                         "unit": "ms/launch", "value": summary(lat), "baseline": summary([p50]),
                         "baseline_name": "p50 of the same launches", "ratio": p99 / p50,
                         "target": "<= 2x", "lower_is_better": True,
                         "notes": "p50 %.1f ms, p99 %.1f ms, %d launches, %d failed; p99 is %.1fx the "
                                  "warm p50 of one caller (%.1f ms)" %
                                  (p50, p99, len(lat), len(errors), p99 / warm_p50, warm_p50),
                         "detail": {"errors": errors[:10]}})
        return rows, times
    finally:
        if serve:
            serve.stop()
        executor.stop()

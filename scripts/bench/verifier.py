"""Scenario 5, verifier throughput: generated Python programs with 15
stdin/stdout tests each, run through `sandguard exec --tests` (one
invocation per program, nproc invocations at a time, as a trainer would)
and through an unsandboxed runner (`xargs -P$(nproc)` over runone.sh, each
test under `timeout`), and again for a tenant whose policy has warm
interpreters for verifier tests (warm.verify: each test a child of a warm
parent, docs/warm-interpreters.md). Reports tests/s per chunk of programs (the order
of the three runners turns from chunk to chunk), the ratio as the median of
the chunks' own ratios (a chunk's runners run back to back: paired_ratio()),
and checks that each sandguard variant gives every program the unsandboxed
runner's reward.

Two guards make executor faults visible instead of stalling the run: an
invocation that does not finish within INVOCATION_LIMIT_S is killed and
counted as hung (no reward), and every "agent did not take sandbox"
warning (a sandbox that ran on the executor's own layers only) is counted.

Programs are deterministic (seeded): most are correct; some answer wrong
on one or more tests, some crash on a test and some hang on one (killed
at the per-test timeout)."""
import json
import os
import random
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from sgbench import PY, log, paired_ratio, summary

TENANT = "verify"
TENANT_WARM = "verify-warm"  # the same policy with "warm": {"interpreter": "python3", "verify": true}
N_TESTS = 15
TIMEOUT_MS = 1000
INVOCATION_LIMIT_S = 30     # a whole program's 15 tests take a few seconds at most
RUNONE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runone.sh")

# Each task: the reference solution (body of solve(data) -> str) and a
# generator of one input.
TASKS = {
    "sum": ("return str(sum(int(x) for x in data.split()))",
            lambda r: " ".join(str(r.randint(-1000, 1000)) for _ in range(r.randint(1, 30)))),
    "max": ("return str(max(int(x) for x in data.split()))",
            lambda r: " ".join(str(r.randint(-1000, 1000)) for _ in range(r.randint(1, 30)))),
    "sort": ("return ' '.join(str(v) for v in sorted(int(x) for x in data.split()))",
             lambda r: " ".join(str(r.randint(0, 99)) for _ in range(r.randint(1, 20)))),
    "reverse": ("return data.strip()[::-1]",
                lambda r: "".join(r.choice("abcdefghij") for _ in range(r.randint(1, 40)))),
    "words": ("return str(len(data.split()))",
              lambda r: " ".join("w%d" % r.randint(0, 9) for _ in range(r.randint(0, 25)))),
    "fib": ("a, b = 0, 1\n    for _ in range(int(data)):\n        a, b = b, (a + b) % 1000000007\n    return str(a)",
            lambda r: str(r.randint(0, 3000))),
}

PROGRAM = """import sys

def solve(data):
    {body}

data = sys.stdin.read()
{fault}print(solve(data))
"""

FAULTS = {
    "ok": "",
    "wrong": "if data in {triggers!r}:\n    print('wrong answer'); sys.exit(0)\n",
    "crash": "if data in {triggers!r}:\n    raise ValueError('crash on this input')\n",
    "hang": "if data in {triggers!r}:\n    while True:\n        pass\n",
}


def reference(body, data):
    scope = {}
    exec("def solve(data):\n    " + body, scope)
    return scope["solve"](data)


def distinct_inputs(gen, rng, n=N_TESTS):
    """n different inputs of a task's generator, each a line."""
    inputs = []
    while len(inputs) < n:
        x = gen(rng) + "\n"
        if x not in inputs:
            inputs.append(x)
    return inputs


def generate(root, n_programs, seed=7):
    """Writes programs/vNNNN/{prog.py, tests.json, tK.in, tK.out}; returns
    [(dir, expected reward)]."""
    rng = random.Random(seed)
    names = sorted(TASKS)
    out = []
    for i in range(n_programs):
        d = os.path.join(root, "v%04d" % i)
        os.makedirs(d, exist_ok=True)
        task = names[i % len(names)]
        body, gen = TASKS[task]
        inputs = distinct_inputs(gen, rng)
        roll = rng.random()
        fault = "ok" if roll < 0.78 else "wrong" if roll < 0.92 else "crash" if roll < 0.97 else "hang"
        triggers = rng.sample(inputs, 1 if fault == "hang" else rng.randint(1, 3)) if fault != "ok" else []
        tests = []
        for k, x in enumerate(inputs):
            expect = reference(body, x) + "\n"
            tests.append({"input": x, "output": expect})
            with open(os.path.join(d, "t%d.in" % k), "w") as f:
                f.write(x)
            with open(os.path.join(d, "t%d.out" % k), "w") as f:
                f.write(expect)
        with open(os.path.join(d, "prog.py"), "w") as f:
            f.write(PROGRAM.format(body=body, fault=FAULTS[fault].format(triggers=triggers)))
        with open(os.path.join(d, "tests.json"), "w") as f:
            json.dump(tests, f)
        for name in os.listdir(d):
            os.chmod(os.path.join(d, name), 0o644)
        os.chmod(d, 0o755)
        out.append((d, 1 if fault == "ok" else 0))
    return out


def policies(env):
    """The cold variant's policy and the warm variant's."""
    warm = env.base_policy(TENANT_WARM)
    warm["warm"] = {"interpreter": "python3", "verify": True}
    return [env.base_policy(TENANT), warm]


def run_sandguard(env, dirs, parallel, paths, tenant=TENANT):
    """{dir: reward or None}, sandboxes the agent did not take, hung
    invocations. `parallel` invocations at a time, each running its tests
    on its own threads (min(nproc, concurrency, tests)). `paths` counts
    the path each run took (warm, cold) and how each test ran
    ("interpreter warm", "interpreter cold")."""
    lock = threading.Lock()

    def one(d):
        argv = [env.sandguard, "exec", "--tenant", tenant, "--policy-dir", env.policy_dir,
                "--tests", os.path.join(d, "tests.json"), "--timeout-ms", str(TIMEOUT_MS),
                "--batch-id", os.path.basename(d), "--", PY, os.path.join(d, "prog.py")]
        try:
            p = subprocess.run(argv, env=env.env, capture_output=True, text=True,
                               timeout=INVOCATION_LIMIT_S)
        except subprocess.TimeoutExpired:
            return d, None, 0, 1
        # The executor warns when the agent did not take a sandbox (the run
        # then goes on with its own layers only): counted, it is a finding.
        unenforced = p.stderr.count("agent did not take sandbox")
        try:
            res = json.loads(p.stdout)
        except ValueError:
            return d, None, unenforced, 0
        with lock:
            paths[res.get("path")] = paths.get(res.get("path"), 0) + 1
            for t in res.get("tests") or []:
                key = "interpreter %s" % t.get("interpreter")
                paths[key] = paths.get(key, 0) + 1
                if t.get("confirmed"):
                    paths["confirmed"] = paths.get("confirmed", 0) + 1
        return d, res.get("reward"), unenforced, 0

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        results = list(pool.map(one, dirs))
    return ({d: r for d, r, _, _ in results}, sum(u for _, _, u, _ in results),
            sum(h for _, _, _, h in results))


def run_plain(dirs, parallel, meter):
    p = subprocess.run(["xargs", "-P%d" % parallel, "-n1", "/bin/sh", RUNONE, str(TIMEOUT_MS / 1000.0)],
                       input="\n".join(dirs) + "\n", capture_output=True, text=True,
                       preexec_fn=meter.join_plain)
    rewards = {}
    for line in p.stdout.splitlines():
        d, r = line.rsplit(" ", 1)
        rewards[d] = int(r)
    return rewards


RUNNERS = ("plain", "sandguard", "warm")


def cpu_text(parts):
    """"52.1 ms: sandboxes 40.2 (parents 12.0), executor 3.5, ..." """
    text = []
    for k in ("sandboxes", "executor", "clients", "plain", "agent"):
        if k in parts:
            within = " (parents %.1f)" % parts["parents"] if k == "sandboxes" and \
                "parents" in parts else ""
            text.append("%s %.1f%s" % (k, parts[k], within))
    node = "; the node's CPUs %.1f" % parts["node"] if "node" in parts else ""
    if "busy" in parts:
        node += " (busy %.1f%% of the windows), %.0f page faults" % (100 * parts["busy"],
                                                                    parts.get("faults", 0))
    return "%.1f ms: %s%s" % (parts["total"], ", ".join(text), node)


def measure(env, n_programs, chunks, parallel, meter):
    """meter: a cpumeter.Meter, which books each runner's CPU (all of it:
    docs/performance.md, section 5)."""
    programs = generate(os.path.join(env.programs, "verify"), n_programs)
    dirs = [d for d, _ in programs]
    expected = dict(programs)
    size = max(1, (len(dirs) + chunks - 1) // chunks)
    parts = [dirs[i:i + size] for i in range(0, len(dirs), size)]
    rates = {k: [] for k in RUNNERS}
    wall = {k: 0.0 for k in RUNNERS}
    rewards = {k: {} for k in RUNNERS}
    unenforced = {k: 0 for k in RUNNERS}
    hung = {k: 0 for k in RUNNERS}
    paths = {"sandguard": {}, "warm": {}}
    tenants = {"plain": None, "sandguard": TENANT, "warm": TENANT_WARM}
    for i, part in enumerate(parts):
        # Each runner first, second and last in turn, and each order also
        # reversed: no runner always follows the same one.
        order = RUNNERS[i % 3:] + RUNNERS[:i % 3]
        order = order[::-1] if (i // 3) % 2 else order
        for who in order:
            t0 = time.monotonic()
            if who == "plain":
                got = meter.window(who, None, lambda: run_plain(part, parallel, meter))
            else:
                got, missed, stuck = meter.window(
                    who, tenants[who],
                    lambda: run_sandguard(env, part, parallel, paths[who], tenants[who]),
                    parents=who == "warm")
                unenforced[who] += missed
                hung[who] += stuck
            dt = time.monotonic() - t0
            rewards[who].update(got)
            wall[who] += dt
            rates[who].append(len(part) * N_TESTS / dt)
        log("verifier: chunk %d/%d (%d programs): sandguard %.1f tests/s, warm interpreters "
            "%.1f tests/s, plain %.1f tests/s" % (i + 1, len(parts), len(part),
                                                  rates["sandguard"][-1], rates["warm"][-1],
                                                  rates["plain"][-1]))
    unexpected = sorted(os.path.basename(d) for d in dirs if rewards["plain"].get(d) != expected[d])
    b = summary(rates["plain"])
    out = []
    for who, name, target in (("sandguard", "sandguard exec --tests", 1.0),
                              ("warm", "sandguard exec --tests, warm interpreters", 2.0)):  # issue 35
        differ = sorted(os.path.basename(d) for d in dirs
                        if rewards[who].get(d) != rewards["plain"].get(d))
        n_pass = sum(1 for d in dirs if rewards[who].get(d) == 1)
        per_test = {k: meter.per_test(k, len(dirs) * N_TESTS) for k in (who, "plain")}
        detail = {
            "programs": len(dirs), "tests_per_program": N_TESTS, "parallel_invocations": parallel,
            "chunks": len(parts), "timeout_ms": TIMEOUT_MS, "tenant": TENANT_WARM if who == "warm" else TENANT,
            "expected_pass": sum(expected.values()),
            "sandguard_pass": n_pass,
            "plain_pass": sum(1 for d in dirs if rewards["plain"].get(d) == 1),
            "sandguard_no_reward": sum(1 for d in dirs if rewards[who].get(d) is None),
            "sandboxes_not_taken_by_agent": unenforced[who],
            "invocations_hung": hung[who], "paths": paths[who],
            "invocation_limit_s": INVOCATION_LIMIT_S,
            "verdicts_identical": not differ, "verdicts_differ": differ[:20],
            "plain_differs_from_construction": unexpected[:20],
            "total_wall_s": {k: wall[k] for k in (who, "plain")},
            "tests_per_s_overall": {k: len(dirs) * N_TESTS / wall[k] for k in (who, "plain")},
            "cpu_ms_per_test": per_test,
        }
        s = summary(rates[who])
        paired = paired_ratio(rates[who], rates["plain"])  # a chunk's runners run back to back
        out.append({
            "scenario": "5 verifier",
            "name": "%s, %d programs x %d tests" % (name, len(dirs), N_TESTS),
            "unit": "tests/s", "value": s, "baseline": b,
            "baseline_name": "xargs -P%d + timeout, unsandboxed" % parallel,
            "ratio": paired["ratio"], "target": ">= %.1fx" % target,
            "lower_is_better": False,
            "notes": paired["notes"] + "; verdicts %s (%d/%d programs pass); CPU per test %s (baseline %s); "
                     "%d sandboxes not taken by the agent; %d invocations hung (killed after %d s); "
                     "paths %s" %
                     ("identical" if not differ else "DIFFER on %d" % len(differ), n_pass,
                      len(dirs), cpu_text(per_test[who]), cpu_text(per_test["plain"]),
                      unenforced[who], hung[who],
                      INVOCATION_LIMIT_S, paths[who]),
            "detail": detail})
    return out

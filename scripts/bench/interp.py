"""Scenario 10, warm interpreters (issue 18): a typical function-tier
Python reward (json, re, math; about 20 lines) scored through `sandguard
serve`'s POST /v1/score for a tenant whose policy has "warm" (a forkserver
parent with the reward's imports preloaded, one fresh child per call),
against plainrun's bare `python3 reward.py` (fork/exec + pipes, no
sandbox), interleaved round by round in a shuffled order. Then the RSS of
each idle warm parent.

Every call is checked: 200, the scores, and that it ran warm (consecutive
calls share the sandbox of the tenant's one kept parent)."""
import json
import os
import random
import subprocess

from sgbench import PY, log, now_ms, paired_ratio, summary
from warm import Daemon, post

TENANT = "interp"
ITEMS = 8
REWARD = """import json, math, re, sys

WORD = re.compile(r"[a-z]+")


def score(prompt, completion):
    words = WORD.findall(completion.lower())
    if not words:
        return 0.0
    overlap = len(set(words) & set(WORD.findall(prompt.lower())))
    return round(1.0 / (1.0 + math.exp(-overlap)) * min(1.0, len(words) / 8.0), 6)


batch = json.load(sys.stdin)
print(json.dumps([score(it["prompt"], it["completion"]) for it in batch["items"]]))
"""


def policy(env):
    p = env.base_policy(TENANT)
    p["limits"].update({"concurrency": 4, "on_excess": "wait", "queue_timeout_ms": 600000})
    p["warm"] = {"interpreter": "python3", "preload": ["json", "math", "re"]}
    return p


def setup(env):
    prog = env.write_program("interp_reward.py", REWARD)
    doc = {"batch_id": "bench-interp",
           "items": [{"prompt": "say hello to the sandbox %d" % i,
                      "completion": "hello sandbox " * (i + 1)} for i in range(ITEMS)]}
    batch = os.path.join(env.programs, "interp_batch.json")
    with open(batch, "w") as f:
        json.dump(doc, f)
    os.chmod(batch, 0o644)
    return prog, batch, doc


def parent_rss_kib(env):
    """VmRSS of every warm parent of the tenant (each alone in run-1)."""
    out = []
    tenant_dir = os.path.join(env.cgroot, TENANT)
    for sb in os.listdir(tenant_dir) if os.path.isdir(tenant_dir) else []:
        try:
            with open(os.path.join(tenant_dir, sb, "run-1", "cgroup.procs")) as f:
                pids = f.read().split()
        except OSError:
            continue
        for pid in pids:
            with open("/proc/%s/status" % pid) as f:
                out += [int(line.split()[1]) for line in f if line.startswith("VmRSS:")]
    return out


def measure(env, tools, rounds, seed=5):
    env.write_policy(policy(env))
    prog, batch, doc = setup(env)
    serve = Daemon(env, ["serve", "--listen", "127.0.0.1:0", "--policy-dir", env.policy_dir],
                   "listening on http://127.0.0.1:")
    try:
        port = int(serve.line.split("127.0.0.1:")[1].split()[0])
        last = [None]
        code_ms = []  # each timed call's own wall_ms: from the child's last setup step

        def plain():
            p = subprocess.run([tools["plainrun"], batch, "--", PY, prog], capture_output=True,
                               text=True)
            if p.returncode or len(json.loads(p.stdout)) != ITEMS:
                raise RuntimeError("plainrun failed: %s" % p.stderr[-300:])

        def score():
            status, res = post(port, "/v1/score", {"tenant": TENANT, "command": [PY, prog],
                                                   "batch": doc}, tenant=TENANT)
            if status != 200 or len(res.get("scores") or []) != ITEMS:
                raise RuntimeError("/v1/score: %d %s" % (status, str(res)[:300]))
            sandbox = res["sandboxes"][-1]["sandbox"]
            code_ms.append(res.get("wall_ms"))
            warm = sandbox == last[0]
            last[0] = sandbox
            return warm

        for _ in range(50):  # until the pool hands out a kept warm parent
            if score():
                break
        else:
            raise RuntimeError("no warm interpreter after 50 calls")
        plain()
        del code_ms[:]
        times = {"plain": [], "score": []}
        cold_calls = 0
        rng = random.Random(seed)
        for _ in range(rounds):
            order = ["plain", "score"]
            rng.shuffle(order)
            for name in order:
                t0 = now_ms()
                warm = plain() if name == "plain" else score()
                times[name].append(now_ms() - t0)
                cold_calls += 1 if name == "score" and not warm else 0
        rss = parent_rss_kib(env)
    finally:
        serve.stop()
    base, s = summary(times["plain"]), summary(times["score"])
    rows = [{"scenario": "10 warm interpreter",
             "name": "POST /v1/score, warm interpreter (%d of %d calls in a new parent)" %
                     (cold_calls, rounds),
             "unit": "ms/call", "value": s, "baseline": base,
             "baseline_name": "bare python3 reward.py (fork/exec + pipes)",
             "target": "<= 0.3x", "lower_is_better": True,
             **paired_ratio(times["score"], times["plain"])}]
    if rss:
        mib = max(rss) / 1024.0
        rows.append({"scenario": "10 warm interpreter",
                     "name": "RSS of an idle warm parent (largest of %d)" % len(rss),
                     "unit": "MiB", "value": summary([mib]), "baseline": summary([30.0]),
                     "baseline_name": "the 30 MiB budget", "ratio": mib / 30.0,
                     "target": "<= 1x (30 MiB)", "lower_is_better": True})
    code = summary([c for c in code_ms if c is not None] or [0])
    log("interp: p50 %.1f ms warm /v1/score (of which the script itself, from its last setup "
        "step: %.1f ms) vs %.1f ms bare; idle parents' RSS %s KiB" %
        (s["median"], code["median"], base["median"], rss))
    return rows, {"plain": times["plain"], "score": times["score"], "script_ms": code_ms,
                  "parent_rss_kib": rss}

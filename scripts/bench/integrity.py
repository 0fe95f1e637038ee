"""Scenario 12, reward integrity on a full node (issue 31): does every
verdict hold when the node is full, and what does holding it cost?

The node is filled with verifier requests (`sandguard exec --tests`, each
program a request of TESTS tests, IN_FLIGHT requests at a time in a mixed
order, through a running `sandguard executor`) of three kinds:
  - correct but CPU-heavy programs (tests/programs/ig_honest_cpu.py, ~0.6 s
    of CPU per test, a deadline of five times that): reward 1 expected;
  - plain infinite loops (ig_loop.py): reward 0 expected, each test's run
    booked tenant_timeout;
  - self-starving programs (ig_self_starve.py: three processes pinned to
    one CPU spinning 45% of every 100 ms, issue 31's attack): reward 0
    expected, booked tenant_timeout, never a platform error;
and, all the while, a hog tenant runs CPU-bound batches (`exec --batch`,
one per CPU at a time). Admission is overcommitted on purpose
(SANDGUARD_NODE_CPUS = OVERCOMMIT x the CPUs, as an operator may set it)
so that the node really is full and timeouts on it get their
confirmation runs.

Reports each kind's rewards, the tests' journal causes, every
platform_error record (target 0), the confirmation runs (and the ones due
but not admitted), and the extra CPU the design costs: the CPU of the
confirmation runs over all the verifier tenant's CPU. A run's CPU is its
detail's "it got N ms of CPU" where it timed out, else the highest
cpu.stat usage_usec seen of its sandbox's cgroup (sampled every
SAMPLE_S; a confirmation always has a fresh sandbox of its own); the total
is the tenant cgroup's usage_usec (cgroup2, exited sandboxes included)."""
import json
import os
import random
import re
import resource
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from sgbench import PY, log, summary

TENANT = "integrity"
HOG = "integrity-hog"
TESTS = 3
OVERCOMMIT = 2
CPU_NEED_MS = 600           # the correct program's CPU per test
DEADLINE_MS = 5 * CPU_NEED_MS
WRONG_DEADLINE_MS = 2000    # loops' and self-starvers' deadline
HOG_BURN_MS = 1500          # each hog batch's CPU
SAMPLE_S = 0.1
INVOCATION_LIMIT_S = 300
P = 1000000007
SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KINDS = ("correct", "loop", "self-starver")
PROGRAMS = {"correct": "ig_honest_cpu.py", "loop": "ig_loop.py", "self-starver": "ig_self_starve.py"}


def policies(env):
    """The verifier tenant's policy and the hog tenant's."""
    lim = {"timeout_ms": DEADLINE_MS, "memory_mb": 256, "max_tasks": 64, "max_forks": 10000,
           "concurrency": 64, "cpu": 1.0, "queue_timeout_ms": 1800000}
    verifier = env.base_policy(TENANT, limits=dict(lim))
    verifier["failure"] = {"mode": "retry", "max_retries": 2}
    hog = env.base_policy(HOG, limits=dict(lim, timeout_ms=20000, concurrency=16))
    hog["failure"] = {"mode": "retry", "max_retries": 2}
    return [verifier, hog]


def calibrate():
    """n for CPU_NEED_MS of the correct program's loop on this machine."""
    prog = os.path.join(SRC, "tests", "programs", PROGRAMS["correct"])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    n = 2000000
    subprocess.run([PY, prog], input=b"%d\n" % n, capture_output=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = max(0.01, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return max(1000000, int(n * CPU_NEED_MS / 1000.0 / cpu))


def answer(n):
    return "%d\n" % ((n - 1) * n * (2 * n - 1) // 6 % P)


def generate(env, n_each, n_cpu, seed=12):
    """[(kind, batch_id, tests file, deadline)] in a mixed order."""
    rng = random.Random(seed)
    root = env.mkdir("integrity")
    for prog in PROGRAMS.values():
        with open(os.path.join(SRC, "tests", "programs", prog)) as f:
            env.write_program(prog, f.read())
    out = []
    for kind in KINDS:
        for i in range(n_each):
            bid = "ig-%s-%03d" % (kind, i)
            tests = []
            for k in range(TESTS):
                n = int(n_cpu * rng.uniform(0.8, 1.0))
                tests.append({"input": "%d\n" % n, "output": answer(n)})
            path = os.path.join(root, bid + ".json")
            with open(path, "w") as f:
                json.dump(tests, f)
            os.chmod(path, 0o644)
            out.append((kind, bid, path, DEADLINE_MS if kind == "correct" else WRONG_DEADLINE_MS))
    rng.shuffle(out)
    return out


def usage_us(path):
    try:
        with open(os.path.join(path, "cpu.stat")) as f:
            for line in f:
                k, v = line.split()
                if k == "usage_usec":
                    return int(v)
    except (OSError, ValueError):
        pass
    return None


class Sampler:
    """Polls the tenant cgroup's usage_usec (accumulating across a removal
    of the tenant cgroup, should one happen) and the highest usage seen of
    each of its sandboxes."""

    def __init__(self, cgroot, tenant):
        self.dir = os.path.join(cgroot, tenant)
        self.total_us = 0
        self.last = None
        self.boxes = {}
        self.stop_ev = threading.Event()
        self.t = threading.Thread(target=self.loop, daemon=True)
        self.t.start()

    def tick(self):
        u = usage_us(self.dir)
        if u is not None:
            if self.last is not None:
                self.total_us += u - self.last if u >= self.last else u
            else:
                self.total_us += u
            self.last = u
        try:
            names = os.listdir(self.dir)
        except OSError:
            names = []
        for name in names:
            b = usage_us(os.path.join(self.dir, name))
            if b is not None and b > self.boxes.get(name, 0):
                self.boxes[name] = b

    def loop(self):
        while not self.stop_ev.is_set():
            self.tick()
            time.sleep(SAMPLE_S)

    def stop(self):
        self.stop_ev.set()
        self.t.join()
        self.tick()


def hog_loop(env, stop, counts, lock, i):
    k = 0
    while not stop.is_set():
        k += 1
        batch = json.dumps({"batch_id": "hog-%d-%d" % (i, k),
                            "items": [{"prompt": "p", "completion": "c"}] * 2})
        p = subprocess.run([env.sandguard, "exec", "--tenant", HOG, "--policy-dir", env.policy_dir,
                            "--batch", "-", "--", PY,
                            os.path.join(env.programs, "ig_hog.py"), str(HOG_BURN_MS)],
                           input=batch, env=env.env, capture_output=True, text=True,
                           timeout=INVOCATION_LIMIT_S)
        try:
            cause = json.loads(p.stdout)["cause"]
        except (ValueError, KeyError):
            cause = "no result (exit %d)" % p.returncode
        with lock:
            counts[cause] = counts.get(cause, 0) + 1


def one(env, kind, bid, path, deadline):
    argv = [env.sandguard, "exec", "--tenant", TENANT, "--policy-dir", env.policy_dir,
            "--tests", path, "--timeout-ms", str(deadline), "--batch-id", bid, "--", PY,
            os.path.join(env.programs, PROGRAMS[kind])]
    t0 = time.monotonic()
    try:
        p = subprocess.run(argv, env=env.env, capture_output=True, text=True,
                           timeout=INVOCATION_LIMIT_S)
    except subprocess.TimeoutExpired:
        return kind, bid, None, -1, INVOCATION_LIMIT_S
    try:
        res = json.loads(p.stdout)
    except ValueError:
        res = None
    return kind, bid, res, p.returncode, time.monotonic() - t0


CPU_IN_DETAIL = re.compile(r"it got (\d+) ms of CPU")


def run_cpu_ms(rec, boxes):
    """(ms, how): a run's CPU."""
    m = CPU_IN_DETAIL.search(rec.get("detail") or "")
    if m:
        return int(m.group(1)), "detail"
    if rec.get("sandbox") in boxes:
        return boxes[rec["sandbox"]] / 1000.0, "cgroup"
    return None, "unknown"


def measure(env, n_each, in_flight, nproc):
    """The scenario's rows; the agent and policies are the caller's."""
    import sgjournal as journal
    import warm
    n_cpu = calibrate()
    # The hog tenant's reward: tests/programs/rw_cpu.py burns argv[1] ms of CPU.
    with open(os.path.join(SRC, "tests", "programs", "rw_cpu.py")) as f:
        env.write_program("ig_hog.py", f.read())
    work = generate(env, n_each, n_cpu)
    saved = env.env
    env.env = dict(saved, SANDGUARD_NODE_CPUS=str(OVERCOMMIT * nproc))
    state = env.env["SANDGUARD_STATE_DIR"]
    before = len(journal.read(state))
    hog_counts, lock, stop = {}, threading.Lock(), threading.Event()
    executor = sampler = None
    hogs = []
    results = []
    idle0, t0 = idle_ms(), time.monotonic()
    try:
        executor = warm.Daemon(env, ["executor"], "executor listening on")
        sampler = Sampler(env.cgroot, TENANT)
        hogs = [threading.Thread(target=hog_loop, args=(env, stop, hog_counts, lock, i), daemon=True)
                for i in range(nproc)]
        for h in hogs:
            h.start()
        done = [0]

        def go(item):
            r = one(env, *item)
            with lock:
                done[0] += 1
                if done[0] % max(1, len(work) // 8) == 0:
                    log("integrity: %d/%d requests answered" % (done[0], len(work)))
            return r

        with ThreadPoolExecutor(max_workers=in_flight) as pool:
            results = list(pool.map(go, work))
    finally:
        stop.set()
        for h in hogs:
            h.join()
        if sampler:
            sampler.stop()
        if executor:
            executor.stop()
        env.env = saved
    wall = time.monotonic() - t0
    idle_cpus = (idle_ms() - idle0) / (wall * 1000.0)
    records = journal.read(state)[before:]
    return rows(results, records, sampler, hog_counts, n_each, wall, idle_cpus, nproc, n_cpu)


def idle_ms():
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return (int(fields[4]) + int(fields[5])) * 1000.0 / os.sysconf("SC_CLK_TCK")


def rows(results, records, sampler, hog_counts, n_each, wall, idle_cpus, nproc, n_cpu):
    mine = [r for r in records if r.get("tenant") == TENANT]
    runs = [r for r in mine if r.get("mode") == "verify" and r.get("sandbox")]
    by_batch = {}
    for r in runs:
        by_batch.setdefault(r["batch_id"], []).append(r)
    platform = [r for r in records if r.get("cause") == "platform_error" or r.get("class") == "platform"]
    confirmations = [r for r in runs if r.get("confirm") == "run"]
    unadmitted = [r for r in runs if r.get("confirm") == "unadmitted"]
    per_kind = {}
    for kind, bid, res, rc, secs in results:
        k = per_kind.setdefault(kind, {"rewards": {}, "exit": {}, "test_causes": {}, "test_status": {},
                                       "confirmed": 0, "runs": 0, "max_runs_per_test": 0, "secs": [],
                                       "wrong": []})
        reward = res.get("reward") if res else None
        k["rewards"][str(reward)] = k["rewards"].get(str(reward), 0) + 1
        k["exit"][str(rc)] = k["exit"].get(str(rc), 0) + 1
        k["secs"].append(secs)
        for t in (res or {}).get("tests") or []:
            k["test_status"][t["status"]] = k["test_status"].get(t["status"], 0) + 1
        mine_runs = by_batch.get(bid, [])
        k["runs"] += len(mine_runs)
        per_test = {}
        for r in mine_runs:
            k["test_causes"][r["cause"]] = k["test_causes"].get(r["cause"], 0) + 1
            per_test[r.get("test")] = per_test.get(r.get("test"), 0) + 1
            k["confirmed"] += r.get("confirm") == "run"
        k["max_runs_per_test"] = max([k["max_runs_per_test"]] + list(per_test.values()))
        want = 1 if kind == "correct" else 0
        if reward != want or (kind != "correct" and set(r["cause"] for r in mine_runs) != {"tenant_timeout"}):
            k["wrong"].append("%s: reward %s, exit %s, causes %s" % (
                bid, reward, rc, sorted(set(r["cause"] for r in mine_runs))))
    # The extra CPU: confirmation runs' over the tenant's whole.
    conf_ms, how = 0.0, {}
    for r in confirmations:
        ms, h = run_cpu_ms(r, sampler.boxes if sampler else {})
        how[h] = how.get(h, 0) + 1
        conf_ms += ms or 0.0
    total_ms = (sampler.total_us / 1000.0) if sampler else 0.0
    wall_all = sum(r.get("wall_ms") or 0 for r in runs)
    wall_conf = sum(r.get("wall_ms") or 0 for r in confirmations)
    out = []
    detail_common = {"programs_per_kind": n_each, "tests_per_program": TESTS,
                     "deadline_ms": {"correct": DEADLINE_MS, "wrong": WRONG_DEADLINE_MS},
                     "correct_cpu_need_ms": CPU_NEED_MS, "correct_n": n_cpu,
                     "node_cpus_admitted": OVERCOMMIT * nproc, "nproc": nproc,
                     "wall_s": wall, "node_idle_cpus_avg": idle_cpus, "hog_batches": hog_counts}
    for kind in KINDS:
        k = per_kind.get(kind, {"rewards": {}, "wrong": [], "secs": [], "exit": {}, "test_causes": {},
                                "test_status": {}, "confirmed": 0, "runs": 0, "max_runs_per_test": 0})
        want = 1 if kind == "correct" else 0
        good = n_each - len(k["wrong"])
        out.append({
            "scenario": "12 integrity",
            "name": "%s programs: reward %d%s" % (kind, want, "" if kind == "correct" else ", booked tenant_timeout"),
            "unit": "programs", "value": summary([good]), "baseline": summary([n_each]),
            "baseline_name": "all %d" % n_each, "ratio": good / float(n_each) if n_each else None,
            "target": ">= 1.0x", "lower_is_better": False,
            "notes": "rewards %s; tests %s; run causes %s; exit codes %s; %d runs, %d of them "
                     "confirmation runs, at most %d runs of one test; request wall median %.1f s%s" % (
                         k["rewards"], k["test_status"], k["test_causes"], k["exit"], k["runs"],
                         k["confirmed"], k["max_runs_per_test"],
                         summary(k["secs"])["median"] if k["secs"] else 0,
                         "; WRONG: %s" % k["wrong"][:5] if k["wrong"] else ""),
            "detail": dict(detail_common, **{kk: vv for kk, vv in k.items() if kk != "secs"})})
    out.append({
        "scenario": "12 integrity", "name": "platform_error records (every tenant)",
        "unit": "records", "value": summary([len(platform)]), "baseline": None,
        "baseline_name": "target 0", "ratio": None, "target": "0",
        "notes": "%s; hog tenant's batches %s" % (
            "none" if not platform else "e.g. %s: %s" % (platform[0].get("batch_id"),
                                                        (platform[0].get("detail") or "")[:200]),
            hog_counts),
        "detail": dict(detail_common, platform=[(r.get("tenant"), r.get("batch_id"), r.get("detail"))
                                                for r in platform[:20]])})
    out.append({
        "scenario": "12 integrity", "name": "confirmation runs",
        "unit": "runs", "value": summary([len(confirmations)]), "baseline": summary([len(runs)]),
        "baseline_name": "all verifier runs", "ratio": None, "target": "",
        "notes": "by kind %s; %d more were due but not admitted (the timeout stood); node "
                 "admission %d CPUs on %d, %.2f CPUs idle on average over %.0f s" % (
                     {kind: per_kind.get(kind, {}).get("confirmed", 0) for kind in KINDS},
                     len(unadmitted), OVERCOMMIT * nproc, nproc, idle_cpus, wall),
        "detail": detail_common})
    share = 100.0 * conf_ms / total_ms if total_ms else None
    out.append({
        "scenario": "12 integrity", "name": "extra CPU: confirmation runs / verifier tenant's CPU",
        "unit": "%", "value": summary([share]) if share is not None else None, "baseline": None,
        "baseline_name": "-", "ratio": None, "target": "",
        "notes": "%.1f s of CPU in confirmation runs (measured by %s) of %.1f s the tenant used "
                 "(its cgroup's usage_usec); by wall time %.1f%% (%.1f of %.1f s of runs)" % (
                     conf_ms / 1000.0, how, total_ms / 1000.0,
                     100.0 * wall_conf / wall_all if wall_all else 0.0, wall_conf / 1000.0,
                     wall_all / 1000.0),
        "detail": dict(detail_common, confirmation_cpu_ms=conf_ms, tenant_cpu_ms=total_ms,
                       measured_by=how, wall_ms_confirmation=wall_conf, wall_ms_all=wall_all)})
    return out

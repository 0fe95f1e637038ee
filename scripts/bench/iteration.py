#!/usr/bin/env python3
"""Scenario 17, one RL iteration's shape (issue 35, item 5; the rLLM
thesis's section 5.2-5.3): 1,024 problems x 15 tests, 70% Python and
30% C++ (iteration_programs.py), verified two ways through one
`sandguard serve` with a private agent enforcing:

  verify    one /v1/verify request per problem (C++: one compile, then
            the 15 tests);
  run_code  verl-style: one /run_code request per test, with the build
            cache (a C++ program's 15 requests compile once).

IN_FLIGHT (128) requests are in flight at once, each way (serve
--max-concurrency 128), and admission lets ADMITTED (32) of them run
at once: limits.cpu 0.5 per request, $SANDGUARD_NODE_CPUS 16, an 8x
overcommit of this 2-core VM on purpose. All 128 at once exhausts the
node's 256 sandbox slot uids (docs/performance-iteration.md, Findings).
The per-test deadline is the seed's lowest, 6 s; the timing-out
programs sleep past it (no CPU: a spinning one would burn its 0.5 core
for 6 s per timeout and dominate a 2-core run; the doc adds that cost
by arithmetic). A compile has the policy's 60 s. A platform error
(HTTP 500, a SandboxError) is no verdict: the client sends the request
again, and counts it.

Reports each way's wall time, tests/s, CPU per test by component (the
tenants' sandbox cgroups, serve and its forker, the agent; the bench's
own HTTP client and the node's other load beside them), the most
sandboxes seen at once, retried "not now" answers, and whether every
(problem, test) verdict is the same in both ways and as constructed.
Scenario 17 of scripts/bench/run.sh (--only 17; --programs N scales it),
or alone, as root:

  scripts/bench/iteration.py [--problems N] [--in-flight N] [--admitted N] [--deadline-ms MS]
                             [--out FILE]

Exits 1 when the verdicts differ, 0 otherwise (nothing is asserted on
the figures)."""
import argparse
import json
import os
import re
import resource
import shutil
import signal
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
os.environ.setdefault("SANDGUARD_SRC", SRC)
os.environ.setdefault("SANDGUARD_BIN", os.path.join(SRC, "build", "sandguard"))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(SRC, "tests", "lib"))
from cpumeter import own_cpu_ms, usage_ms  # noqa: E402
import iteration_programs as programs  # noqa: E402
from sgagent import Agent  # noqa: E402
from sgbench import run_dir_on_tmpfs  # noqa: E402
from sgserve import Env, Server, verl_request, verl_verdict  # noqa: E402
from sgtest import uid_base  # noqa: E402
import sgjournal  # noqa: E402
import sglangs  # noqa: E402

IN_FLIGHT = 128
DEADLINE_MS = 6000
COMPILE_MS = 60000
CPU_PER_REQUEST = 0.5      # limits.cpu: 128 requests on the projection's 64 cores
ADMITTED = 32              # requests admission lets run at once here
RETRIES = 50
TENANTS = {"python": "iter-py", "cpp": "iter-cpp"}
MEMORY_MB = {"python": 256, "cpp": 512}
SAMPLE_S = 0.25
# Its own slot uids: the serve suites' 63000.. may be in use by tests
# running beside it (the slots' locks are node-wide).
UID_BASE = uid_base(68000)
# The node's 256 slot uids (src/sandbox/sandbox_slots.h) hold every
# sandbox, prepared or running: each tenant's cap keeps the two below it.
TENANT_CONCURRENCY = 120
# verify's test statuses and verl's scores, as one verdict each.
VERIFY_STATUS = {"pass": "pass", "fail": "wrong", "timeout": "timeout", "crash": "error",
                 "oom": "error", "violation": "error", "error": "platform"}
VERL_SCORE = {True: "pass", False: "wrong", -1: "platform", -2: "error", -3: "timeout",
              -4: "compile_error"}


class Client:
    """The trainer's side: one connection per request (as requests.post),
    a "not now" (429, 503, 504) retried after its Retry-After."""

    def __init__(self, srv, cap):
        self.srv = srv
        self.cap = cap
        self.lock = threading.Lock()
        self.retries = 0
        self.platform_retries = 0  # a platform error is no verdict: sent again
        self.refusals = {}  # status: how many (each retried)
        self.in_flight = 0
        self.most_in_flight = 0

    def post(self, path, body):
        with self.lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            for _ in range(RETRIES):
                status, headers, r = self.srv.post(path, body, timeout=900)
                if status == 500 or (status == 200 and r.get("status") == "SandboxError"):
                    with self.lock:
                        self.platform_retries += 1
                    time.sleep(1)
                    continue
                if status not in (429, 503, 504):
                    return status, r
                with self.lock:
                    self.retries += 1
                    why = re.sub(r"sg-[0-9a-f]+-[0-9]+", "ID", str(r.get("error") or ""))
                    key = "%d %s" % (status, why[:100])
                    self.refusals[key] = self.refusals.get(key, 0) + 1
                time.sleep(float(headers.getheader("Retry-After") or 1))
            return status, r
        finally:
            with self.lock:
                self.in_flight -= 1


def each(client, fn, items):
    """fn over items, client.cap at a time; on an exception (a SIGTERM
    included) the items not started are dropped, not waited for."""
    pool = ThreadPoolExecutor(client.cap)
    try:
        return list(pool.map(fn, items))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def verify_way(client, problems, salt, deadline_ms):
    def one(p):
        status, r = client.post("/v1/verify", {
            "tenant": TENANTS[p["language"]], "code": programs.code(p, salt),
            "language": p["language"], "tests": p["tests"], "timeout_ms": deadline_ms})
        if status != 200:  # a verdict of its own: it differs from every other
            return ["http %d" % status] * programs.N_TESTS
        if (r.get("compile") or {}).get("status") == "error":
            return ["compile_error"] * programs.N_TESTS
        if len(r.get("tests") or []) != programs.N_TESTS:
            raise RuntimeError("verify: %s" % json.dumps(r)[:500])
        return [VERIFY_STATUS.get(t["status"], t["status"]) for t in r["tests"]]
    return each(client, one, problems)


def run_code_way(client, problems, salt, deadline_ms):
    """verl's way: each test its own request, all of a problem's at once."""
    def one(job):
        p, test = job
        body = verl_request(programs.code(p, salt), test["input"], run_timeout=deadline_ms / 1000.0,
                            language=p["language"])
        body["compile_timeout"] = COMPILE_MS / 1000.0
        status, r = client.post("/tenants/%s/run_code" % TENANTS[p["language"]], body)
        if status != 200:
            return "http %d" % status
        return VERL_SCORE.get(verl_verdict(r, test["output"]), "platform")
    jobs = [(p, t) for p in problems for t in p["tests"]]
    flat = each(client, one, jobs)
    n = programs.N_TESTS
    return [flat[i:i + n] for i in range(0, len(flat), n)]


def forkers(pid):
    """serve's init forkers (sg-forker, docs/sandbox.md): its children
    outside every sandbox cgroup, whose CPU /proc/<serve>/stat omits."""
    out = []
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return out
    for tid in tasks:
        try:
            with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                kids = [int(k) for k in f.read().split()]
        except OSError:
            continue
        for kid in kids:
            try:
                with open("/proc/%d/comm" % kid) as f:
                    if f.read().strip() == "sg-forker":
                        out.append(kid)
            except OSError:
                pass
    return out


def node_busy_ms():
    """CPU time of the whole node (every CPU, not idle or iowait), in ms."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) * 1000.0 / os.sysconf("SC_CLK_TCK")


class Meter:
    """Each way's CPU by component, from the kernel's counters (as
    scripts/bench/cpumeter.py): the tenants' cgroup subtrees (every
    sandbox: init, compile, test), serve's own threads plus its forker,
    the agent, this process (the HTTP client), and the node's whole busy
    time; and, sampled, how many sandboxes were there at once."""

    def __init__(self, cgroot, serve_pid, agent_pid):
        self.cgroot, self.serve_pid, self.agent_pid = cgroot, serve_pid, agent_pid
        self.stop = threading.Event()
        self.boxes = []

    def point(self):
        me = resource.getrusage(resource.RUSAGE_SELF)
        pt = {"executor": own_cpu_ms(self.serve_pid) +
              sum(own_cpu_ms(k) for k in forkers(self.serve_pid)),
              "agent": own_cpu_ms(self.agent_pid), "client": (me.ru_utime + me.ru_stime) * 1000.0,
              "node": node_busy_ms()}
        for lang, tenant in TENANTS.items():
            pt["sandboxes " + lang] = usage_ms(os.path.join(self.cgroot, tenant)) or 0.0
        return pt

    def sample(self):
        while not self.stop.wait(SAMPLE_S):
            n = 0
            for tenant in TENANTS.values():
                try:
                    n += len([d for d in os.listdir(os.path.join(self.cgroot, tenant))
                              if os.path.isdir(os.path.join(self.cgroot, tenant, d))])
                except OSError:
                    pass
            self.boxes.append(n)

    def window(self, run):
        """(run()'s value, {component: ms}, sandboxes at once: max, mean)."""
        self.boxes, self.stop = [], threading.Event()
        sampler = threading.Thread(target=self.sample, daemon=True)
        before = self.point()
        sampler.start()
        try:
            value = run()
        finally:
            self.stop.set()
            sampler.join()
        after = self.point()
        cpu = {k: after[k] - before[k] for k in before}
        cpu["sandboxes"] = sum(v for k, v in cpu.items() if k.startswith("sandboxes "))
        cpu["sandguard"] = cpu["sandboxes"] + cpu["executor"] + cpu["agent"]
        cpu["others"] = max(0.0, cpu["node"] - cpu["sandguard"] - cpu["client"])
        boxes = (max(self.boxes), sum(self.boxes) / len(self.boxes)) if self.boxes else (0, 0)
        return value, cpu, boxes


def journal_summary(records):
    """What the ways' bookings say: records by cause, the runs' own CPU
    (cpu_us: the tenant's processes, from each run's cgroup), and the
    timeouts' confirmations (src/exec/exec_confirm.c)."""
    causes, run_cpu_ms = {}, 0.0
    confirm = {"owed": 0, "timeout_stood": 0, "unadmitted": 0}
    for r in records:
        key = "%s %s" % (r.get("mode"), r.get("cause"))
        causes[key] = causes.get(key, 0) + 1
        run_cpu_ms += (r.get("cpu_us") or 0) / 1000.0
        decision = r.get("decision") or ""
        confirm["owed"] += "confirmed once by a run" in decision
        confirm["timeout_stood"] += "a confirmation run's timeout is final" in decision
        confirm["unadmitted"] += "a confirmation run was due but could not run" in decision
    return {"records": len(records), "causes": causes, "run_cpu_ms": run_cpu_ms,
            "confirmations": confirm}


def policy(lang, scratch):
    return sglangs.policy(SRC, lang, TENANTS[lang], scratch, {
        "timeout_ms": COMPILE_MS, "cpu": CPU_PER_REQUEST, "memory_mb": MEMORY_MB[lang],
        "concurrency": TENANT_CONCURRENCY, "queue_timeout_ms": 120000})


def measure(n_problems, deadline_ms=DEADLINE_MS, in_flight=IN_FLIGHT, admitted=ADMITTED, log=print):
    """The results dict (see rows())."""
    problems = programs.generate(n_problems)
    agent, env, srv = Agent({}, name="bench-iter"), Env(), None
    # The run directory on tmpfs, as a node's /run/sandguard is (sgbench's
    # Env says why); else it stays in the agent's tree on the disk.
    run_dir = None
    if run_dir_on_tmpfs():
        run_dir = tempfile.mkdtemp(prefix="sandguard-iter-run.", dir="/dev/shm")
        os.chmod(run_dir, 0o755)
        agent.env["SANDGUARD_RUN_DIR"] = run_dir
    try:
        for lang in TENANTS:
            with open(os.path.join(agent.policy_dir, TENANTS[lang] + ".json"), "w") as f:
                json.dump(policy(lang, agent.scratch), f)
        if not agent.start():
            raise RuntimeError("iteration: the agent did not start: %s" % agent.log_tail())
        run_env = dict(agent.env, SANDGUARD_UID_BASE=str(UID_BASE),
                       SANDGUARD_NODE_CPUS="%g" % (admitted * CPU_PER_REQUEST))
        srv = Server(env, "--languages", "python,cpp", "--policy-dir", agent.policy_dir,
                     "--max-concurrency", str(in_flight), "--queue", str(4 * in_flight),
                     "--tenant-queue", str(4 * in_flight), "--max-tests", "64", env_override=run_env)
        meter = Meter(agent.env["SANDGUARD_CGROUP_ROOT"], srv.proc.pid, agent.proc.pid)
        n_tests = n_problems * programs.N_TESTS
        by_lang = {lang: sum(1 for p in problems if p["language"] == lang) * programs.N_TESTS
                   for lang in TENANTS}
        res = {"problems": n_problems, "tests": n_tests, "tests_by_language": by_lang,
               "in_flight": in_flight, "deadline_ms": deadline_ms, "compile_deadline_ms": COMPILE_MS,
               "admitted": admitted, "cpu_per_request": CPU_PER_REQUEST,
               "faults": {}, "ways": {}}
        for p in problems:
            res["faults"][p["fault"]] = res["faults"].get(p["fault"], 0) + 1
        verdicts, booked = {}, 0
        for way, fn, salt in (("verify", verify_way, "v"), ("run_code", run_code_way, "r")):
            client = Client(srv, in_flight)
            t0 = time.monotonic()
            got, cpu, boxes = meter.window(lambda: fn(client, problems, salt, deadline_ms))
            wall = time.monotonic() - t0
            verdicts[way] = got
            records = sgjournal.read(agent.env["SANDGUARD_STATE_DIR"])
            journal, booked = journal_summary(records[booked:]), len(records)
            cpu["runs"] = journal["run_cpu_ms"]
            res["ways"][way] = {
                "wall_s": wall, "tests_per_s": n_tests / wall, "retries": client.retries,
                "refusals": client.refusals, "platform_retries": client.platform_retries,
                "most_in_flight": client.most_in_flight, "sandboxes_at_once_max": boxes[0],
                "sandboxes_at_once_mean": boxes[1], "cpu_ms": cpu,
                "cpu_ms_per_test": {k: v / n_tests for k, v in cpu.items()}, "journal": journal,
                "sandbox_cpu_ms_per_test_by_language": {
                    lang: cpu["sandboxes " + lang] / by_lang[lang] for lang in TENANTS if by_lang[lang]}}
            log("iteration: %-8s %d problems x %d tests in %.1f s: %.1f tests/s, sandguard CPU %.1f ms "
                "a test, %d sandboxes at once at most, %d retried" % (
                    way, n_problems, programs.N_TESTS, wall, n_tests / wall,
                    cpu["sandguard"] / n_tests, boxes[0], client.retries))
            log("iteration: %s: %s" % (way, json.dumps(res["ways"][way], sort_keys=True)))
        expected = [p["expected"] for p in problems]
        differ = [p["n"] for p, a, b in zip(problems, verdicts["verify"], verdicts["run_code"]) if a != b]
        res["identical"] = not differ
        res["differ"] = differ[:20]
        res["differ_detail"] = [{"problem": n, "expected": problems[n]["expected"],
                                 "verify": verdicts["verify"][n], "run_code": verdicts["run_code"][n]}
                                for n in differ[:5]]
        res["as_constructed"] = {way: [p["n"] for p, v, e in zip(problems, verdicts[way], expected)
                                       if v != e][:20] for way in verdicts}
        counts = {}
        for v in verdicts["verify"]:
            for s in v:
                counts[s] = counts.get(s, 0) + 1
        res["verdicts"] = counts
        res["rewards"] = sum(1 for v in verdicts["verify"] if all(s == "pass" for s in v))
        return res
    finally:
        if srv:
            srv.stop()
        env.cleanup()
        agent.cleanup()
        if run_dir:
            shutil.rmtree(run_dir, ignore_errors=True)


def cpu_text(per_test):
    return "%.1f ms: sandboxes %.1f (python's share %.1f, cpp's %.1f; the booked runs' own %.1f), executor " \
           "%.1f, agent %.1f; beside it the bench's client %.1f, other load %.1f" % (
               per_test["sandguard"], per_test["sandboxes"], per_test["sandboxes python"],
               per_test["sandboxes cpp"], per_test.get("runs", 0.0), per_test["executor"],
               per_test["agent"], per_test["client"], per_test["others"])


def rows(res):
    """Scenario 17's rows for bench.py's table: each way's tests/s, the
    verify way's the baseline of the /run_code way."""
    ways = res["ways"]
    base = {"n": 1, "median": ways["verify"]["tests_per_s"]}
    out = []
    for way, name in (("verify", "/v1/verify, a request per problem"),
                      ("run_code", "verl-style /run_code, a request per test, build cache")):
        w = ways[way]
        out.append({
            "scenario": "17 iteration", "unit": "tests/s", "lower_is_better": False,
            "name": "%s, %d problems x 15 tests" % (name, res["problems"]),
            "value": {"n": 1, "median": w["tests_per_s"]}, "baseline": base,
            "baseline_name": "/v1/verify", "ratio": w["tests_per_s"] / base["median"], "target": "",
            "notes": "wall %.1f s; CPU per test %s; %d requests in flight, %d sandboxes at once at most "
                     "(mean %.0f), %d not-now answers and %d platform errors retried; verdicts identical in both ways: %s, as constructed: %s" % (
                         w["wall_s"], cpu_text(w["cpu_ms_per_test"]), w["most_in_flight"],
                         w["sandboxes_at_once_max"], w["sandboxes_at_once_mean"], w["retries"], w["platform_retries"],
                         res["identical"], not res["as_constructed"][way]),
            "detail": dict(w, problems=res["problems"])})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problems", type=int, default=1024, help="problems (default 1024, the seed's batch)")
    ap.add_argument("--in-flight", type=int, default=IN_FLIGHT, help="requests at once (default 128)")
    ap.add_argument("--admitted", type=int, default=ADMITTED,
                    help="requests running at once (admission's capacity; default 32)")
    ap.add_argument("--deadline-ms", type=int, default=DEADLINE_MS, help="per-test deadline (default 6000)")
    ap.add_argument("--out", help="write the results as JSON here")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("iteration: run as root (the agent loads BPF programs)")
    if min(args.problems, args.in_flight, args.admitted) < 1 or args.deadline_ms < 100:
        sys.exit("iteration: --problems, --in-flight and --admitted must be >= 1, --deadline-ms >= 100")
    # A SIGTERM ends the run through measure()'s clean-up (server, agent,
    # cgroups, pins).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    res = measure(args.problems, args.deadline_ms, args.in_flight, args.admitted)
    res["machine"] = {"nproc": os.cpu_count(), "kernel": os.uname().release}
    res["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for r in rows(res):
        print("%s: %.1f tests/s\n  %s" % (r["name"], r["value"]["median"], r["notes"]))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1, sort_keys=True)
    return 0 if res["identical"] and not any(res["as_constructed"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Issue 35's compile bench (items 1 and 2): C++ programs with 15
stdin/stdout tests each, verified three ways through one `sandguard serve`
pair with a private agent enforcing (the integration tests' harness):

  verify     one /v1/verify request per program: one compile, then the
             15 tests (src/exec/verify_compile.c)
  uncached   verl-style: 15 /run_code requests per program, all at once,
             on a server started with --build-cache-mb 0 (15 compiles)
  cached     the same on a server with the build cache
             (src/serve/run_build_cache.h): one compile per program

Programs are distinct (no two share a build) and seeded: most correct,
some wrong on a few tests, some crashing on one. Prints tests/s for each
way, the ratios verify/uncached (target >= 5x) and cached/uncached
(target >= 4x), and whether every (program, test) verdict is the same in
the three. Scenario 14 of scripts/bench/run.sh (--only 14), or alone,
as root, on an idle machine:

  scripts/bench/build_cache.py [--programs N] [--parallel N]

Exits 1 when the verdicts differ, 0 otherwise (the ratios are reported,
not asserted)."""
import argparse
import json
import os
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor

SRC = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
os.environ.setdefault("SANDGUARD_SRC", SRC)
os.environ.setdefault("SANDGUARD_BIN", os.path.join(SRC, "build", "sandguard"))
sys.path.insert(0, os.path.join(SRC, "tests", "lib"))
sys.path.insert(0, os.path.join(SRC, "tests", "lib"))
from sgagent import Agent  # noqa: E402
from sgserve import UID_BASE, Env, Server, verl_request, verl_verdict  # noqa: E402
import sglangs  # noqa: E402

N_TESTS = 15
RETRIES = 20
TENANT = "bench-cpp"
PROGRAM = """#include <iostream>
// program %(n)d
int main() {
    long a, b;
    std::cin >> a >> b;
    %(fault)sstd::cout << a + b << std::endl;
}
"""
FAULTS = {"correct": "", "wrong": "if (a %% 5 == 0) b++;\n    ", "crash": "if (a == 7) return 3;\n    "}


def programs(n, seed=35):
    r = random.Random(seed)
    out = []
    for i in range(n):
        kind = "correct" if i % 4 else r.choice(["wrong", "crash"])
        tests = []
        for t in range(N_TESTS):
            a, b = (7 if t == 3 else r.randint(-1000, 1000)), r.randint(-1000, 1000)
            tests.append({"input": "%d %d\n" % (a, b), "output": "%d\n" % (a + b)})
        out.append((PROGRAM % {"n": i, "fault": FAULTS[kind] % ()}, tests))
    return out


def post(srv, path, body):
    """As verl's client: a "not now" (504, 429, 503) is retried after its
    Retry-After."""
    for _ in range(RETRIES):
        status, headers, r = srv.post(path, body, timeout=600)
        if status not in (429, 503, 504):
            return status, r
        time.sleep(float(headers.getheader("Retry-After") or 1))
    return status, r


def verify_way(srv, progs, parallel):
    def one(p):
        code, tests = p
        status, r = post(srv, "/v1/verify", {"tenant": TENANT, "code": code, "language": "cpp",
                                             "tests": tests})
        if status != 200 or len(r["tests"]) != N_TESTS:
            raise RuntimeError("verify: HTTP %d %s" % (status, json.dumps(r)[:500]))
        return [t["status"] == "pass" for t in r["tests"]]
    with ThreadPoolExecutor(parallel) as pool:
        return list(pool.map(one, progs))


def run_code_way(srv, progs, parallel):
    """verl's way: each test its own request, a program's 15 at once."""
    def one(job):
        code, test = job
        status, r = post(srv, "/tenants/%s/run_code" % TENANT,
                         verl_request(code, test["input"], language="cpp"))
        if status != 200:
            raise RuntimeError("run_code: HTTP %d %s" % (status, json.dumps(r)[:500]))
        return verl_verdict(r, test["output"]) is True
    jobs = [(code, t) for code, tests in progs for t in tests]
    with ThreadPoolExecutor(parallel) as pool:
        flat = list(pool.map(one, jobs))
    return [flat[i:i + N_TESTS] for i in range(0, len(flat), N_TESTS)]


def measure(n_programs, parallel):
    """{way: tests/s} and whether the verdicts are identical."""
    agent, env, servers = Agent({}, name="bench-cc"), Env(), []
    try:
        with open(os.path.join(agent.policy_dir, TENANT + ".json"), "w") as f:
            json.dump(sglangs.policy(SRC, "cpp", TENANT, agent.scratch), f)
        if not agent.start():
            raise RuntimeError("build_cache: the agent did not start: %s" % agent.log_tail())
        run_env = dict(agent.env, SANDGUARD_UID_BASE=str(UID_BASE))
        common = ("--languages", "cpp", "--policy-dir", agent.policy_dir, "--queue", "1024",
                  "--tenant-queue", "1024")
        uncached = Server(env, *common, "--build-cache-mb", "0", env_override=run_env)
        servers.append(uncached)
        cached = Server(env, *common, env_override=run_env)
        servers.append(cached)
        res = {"programs": n_programs, "tests": N_TESTS, "parallel": parallel, "tests_per_s": {}}
        verdicts = {}
        # Each way its own copies of the programs (no build shared between
        # ways), the same tests and faults.
        for way, srv, fn, salt in [("verify", cached, verify_way, 0),
                                   ("uncached", uncached, run_code_way, 1000),
                                   ("cached", cached, run_code_way, 2000)]:
            progs = [(code.replace("// program ", "// program %d " % salt), tests)
                     for code, tests in programs(n_programs)]
            t0 = time.monotonic()
            verdicts[way] = fn(srv, progs, parallel)
            wall = time.monotonic() - t0
            res["tests_per_s"][way] = n_programs * N_TESTS / wall
            print("%-9s %4d programs x %d tests in %6.1f s: %6.1f tests/s" % (
                way, n_programs, N_TESTS, wall, res["tests_per_s"][way]), flush=True)
        res["identical"] = verdicts["verify"] == verdicts["uncached"] == verdicts["cached"]
        res["passed"] = sum(sum(v) for v in verdicts["verify"])
        return res
    finally:
        for s in servers:
            s.stop()
        env.cleanup()
        agent.cleanup()


def rows(res):
    """Scenario 14's rows for bench.py's table."""
    per_s, base = res["tests_per_s"], res["tests_per_s"]["uncached"]
    notes = "%d C++ programs x %d tests, %d requests at once; verdicts identical in the three ways: %s " \
            "(%d of %d tests pass)" % (res["programs"], res["tests"], res["parallel"], res["identical"],
                                       res["passed"], res["programs"] * res["tests"])
    common = {"scenario": "14 compile", "unit": "tests/s", "lower_is_better": False,
              "baseline_name": "verl-style /run_code, no cache", "baseline": {"n": 1, "median": base}, "notes": notes}
    return [dict(common, name="C++ /v1/verify, one compile", value={"n": 1, "median": per_s["verify"]},
                 ratio=per_s["verify"] / base, target=">= 5x"),
            dict(common, name="verl-style /run_code, build cache", value={"n": 1, "median": per_s["cached"]},
                 ratio=per_s["cached"] / base, target=">= 4x")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--programs", type=int, default=8)
    ap.add_argument("--parallel", type=int, default=2 * os.cpu_count(),
                    help="requests at once, each way (default: the server's --max-concurrency, 2 per core)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("build_cache: run as root (the agent loads BPF programs)")
    res = measure(args.programs, args.parallel)
    per_s = res["tests_per_s"]
    print("verify / uncached /run_code: %.1fx (target >= 5x)" % (per_s["verify"] / per_s["uncached"]))
    print("cached / uncached /run_code: %.1fx (target >= 4x)" % (per_s["cached"] / per_s["uncached"]))
    print("verdicts identical in the three ways: %s (%d of %d tests pass)" % (
        res["identical"], res["passed"], res["programs"] * N_TESTS))
    return 0 if res["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""The lowest limits.memory_mb and limits.max_tasks at which each /run_code
language's compile and run steps of a small program (tests/integration/
sglangs.py: read two numbers, print their sum) both still pass, through a
real `sandguard serve` (no agent: the limits are the sandbox's), under the
language's policy snippet of docs/trainer-integration.md. A binary search
over each limit, the other one generous. By hand, as root:

    python3 scripts/bench/lang_limits.py [LANGUAGE...]

The figures are in docs/trainer-integration.md ("Policies per language")."""
import json
import os
import sys

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "lib"))
sys.path.insert(0, os.path.join(SRC, "tests", "lib"))
os.environ.setdefault("SANDGUARD_BIN", os.path.join(SRC, "build", "sandguard"))
os.environ.setdefault("SANDGUARD_SRC", SRC)
from sgserve import Env, Server, verl_request  # noqa: E402
import sglangs  # noqa: E402

GENEROUS_MB, GENEROUS_TASKS = 2048, 256


def main():
    langs = sys.argv[1:] or [lang for lang in sglangs.LANGUAGES if not sglangs.missing(lang)]
    env = Env()
    srv = Server(env, "--languages", ",".join(langs))

    def passes(lang, memory_mb, max_tasks):
        p = sglangs.policy(SRC, lang, "m", env.scratch, extra_limits={
            "memory_mb": memory_mb, "max_tasks": max_tasks, "timeout_ms": 60000})
        with open(os.path.join(env.policies, "m.json"), "w") as f:
            json.dump(p, f)
        status, _, r = srv.post("/tenants/m/run_code",
                                verl_request(sglangs.CORRECT[lang], "3 4", run_timeout=60, language=lang),
                                timeout=300)
        return status == 200 and r["status"] == "Success" and r["run_result"]["stdout"] == "7\n"

    def lowest(ok, lo, hi):
        if not ok(hi):
            return None
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if ok(mid) else (mid + 1, hi)
        return lo

    try:
        for lang in langs:
            mem = lowest(lambda v: passes(lang, v, GENEROUS_TASKS), 16, GENEROUS_MB)
            tasks = lowest(lambda v: passes(lang, GENEROUS_MB, v), 1, GENEROUS_TASKS)
            print("%-7s lowest memory_mb %s (max_tasks %d); lowest max_tasks %s (memory_mb %d)"
                  % (lang, mem, GENEROUS_TASKS, tasks, GENEROUS_MB), flush=True)
    finally:
        srv.stop()
        env.cleanup()


if __name__ == "__main__":
    sys.exit(main())

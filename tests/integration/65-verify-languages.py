#!/usr/bin/python3
"""/v1/verify in every /run_code language, five cases each, through a real
`sandguard serve` with a private agent enforcing, under the policy
snippets of docs/trainer-integration.md:

  pass           three tests, all right: reward 1; a compiled language
                 compiled once (one compile run booked, then one run per
                 test, none in the compile's sandbox)
  fail           one expected output wrong: reward 0, that test "fail"
  compile error  compiled languages: reward 0, compile.status "error",
                 no test ran, the compiler's message in stderr and the
                 detail, the request booked final once and its only run
                 the compile; interpreted ones: the tests "crash"
  timeout        an endless loop: reward 0, the tests "timeout"
  crash          a runtime error: reward 0, the tests "crash"

Python's /v1/verify runs `python3 -c <code>` (its compile error is a
syntax error: the tests crash). `sandguard exec --tests --language cpp
--code FILE` gives the same verdicts as /v1/verify for the C++ cases, and
its usage errors exit 64 with a message.

A language whose toolchain is missing is a SKIP naming it.
Prints one PASS/FAIL/SKIP line per language; details on stderr."""
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgtest import report  # noqa: E402
from sgserve import BIN, UID_BASE  # noqa: E402
import sgjournal  # noqa: E402
import sglangs  # noqa: E402

TESTS = [{"input": "40 2\n", "output": "42\n"}, {"input": "1 2\n", "output": "3\n"},
         {"input": "-5 5\n", "output": "0\n"}]
WRONG = TESTS[:2] + [{"input": "-5 5\n", "output": "1\n"}]
TIMEOUT_MS = 2000


def note(msg):
    print(msg, file=sys.stderr, flush=True)


def bookings(state_dir, batch_id):
    return [o for o in sgjournal.read(state_dir) if o["batch_id"] == batch_id]


def verify(srv, tenant, language, code, tests, batch_id):
    body = {"tenant": tenant, "code": code, "language": language, "tests": tests, "batch_id": batch_id,
            "timeout_ms": TIMEOUT_MS}
    status, _, resp = srv.post("/v1/verify", body, timeout=300)
    if status != 200:
        raise AssertionError("HTTP %d %s" % (status, json.dumps(resp)[:1500]))
    return resp


def check_case(language, name, resp, runs):
    """None, or what is wrong with one case's answer and its bookings."""
    compiled = language in sglangs.COMPILED
    statuses = [t["status"] for t in resp["tests"]]
    finals = [o for o in runs if o["final"]]
    compiles = [o for o in runs if not o["final"] and o.get("test") is None]
    if len(finals) != 1 or finals[0]["cause"] != "ok":
        return "%s: finals %s" % (name, finals)
    if compiled and name != "compile error" and (len(compiles) != 1 or resp["compile"]["status"] != "ok"):
        return "%s: compile runs %s, compile %s" % (name, compiles, resp.get("compile"))
    if compiled and any(o["detail"] is None or not o["detail"].startswith("compile") for o in compiles):
        return "%s: the compile is not booked as one: %s" % (name, compiles)
    if not compiled and (compiles or "compile" in resp):
        return "%s: an interpreted language compiled: %s" % (name, compiles)
    if name == "pass":
        ok = resp["reward"] == 1 and statuses == ["pass"] * 3
        # As Python's tests: each its own run (attempt id), in a sandbox
        # reset between two tests, never the compile's.
        ids = {o["id"] for o in runs if not o["final"] and o.get("test") is not None}
        if len(ids) != 3 or (compiled and {o["sandbox"] for o in compiles} & {i.split(".")[0] for i in ids}):
            return "pass: the tests' runs: %s" % runs
    elif name == "fail":
        ok = resp["reward"] == 0 and statuses == ["pass", "pass", "fail"]
    elif name == "compile error" and compiled:
        ok = (resp["reward"] == 0 and resp["compile"]["status"] == "error" and statuses == []
              and resp["stderr"] and resp["detail"].startswith("compile error:")
              and len(runs) == 2 and len(compiles) == 1)
    elif name == "compile error":
        ok = resp["reward"] == 0 and set(statuses) == {"crash"}
    elif name == "timeout":
        ok = resp["reward"] == 0 and set(statuses) == {"timeout"}
    else:
        ok = resp["reward"] == 0 and set(statuses) == {"crash"}
    if not ok:
        return "%s: %s" % (name, json.dumps(resp)[:2000])
    if resp["rule"] is not None or any(o.get("rule") for o in runs):
        return "%s: the agent killed it: %s" % (name, runs)
    return None


def one_language(language, srv, agent):
    tenant = "vl-" + language
    cases = [("pass", sglangs.CORRECT, TESTS), ("fail", sglangs.CORRECT, WRONG),
             ("compile error", sglangs.BROKEN, TESTS), ("timeout", sglangs.LOOP, TESTS[:2]),
             ("crash", sglangs.CRASH, TESTS[:2])]
    timings = []
    for name, programs, tests in cases:
        bid = "vl-%s-%s-%d" % (language, name.replace(" ", "-"), time.monotonic_ns())
        t0 = time.monotonic()
        resp = verify(srv, tenant, language, programs[language], tests, bid)
        timings.append("%s %.1fs" % (name, time.monotonic() - t0))
        if name == "compile error":
            note("%s compile error: %s" % (language, resp["detail"][:300]))
        why = check_case(language, name, resp, bookings(agent.env["SANDGUARD_STATE_DIR"], bid))
        if why:
            return why
    note("%s: %s" % (language, ", ".join(timings)))
    return None


def exec_cli(agent, tenant, code, tests, language="cpp"):
    """`sandguard exec --tests --language L --code FILE`, cold: (rc, result, stderr)."""
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "code"), "w") as f:
            f.write(code)
        with open(os.path.join(d, "tests.json"), "w") as f:
            json.dump(tests, f)
        p = subprocess.run([BIN, "exec", "--tenant", tenant, "--policy-dir", agent.policy_dir,
                            "--tests", os.path.join(d, "tests.json"), "--timeout-ms", str(TIMEOUT_MS),
                            "--language", language, "--code", os.path.join(d, "code")],
                           capture_output=True, timeout=300,
                           env=dict(agent.env, SANDGUARD_UID_BASE=str(UID_BASE), SANDGUARD_WARM="0"))
    out = p.stdout.decode().strip()
    return p.returncode, json.loads(out) if out else None, p.stderr.decode()


def cli_cases(agent, scratch_dir):
    """None, or what is wrong with `exec --language`."""
    tests_file = os.path.join(scratch_dir, "usage-tests.json")
    with open(tests_file, "w") as f:
        json.dump(TESTS, f)
    state = agent.env["SANDGUARD_STATE_DIR"]
    for name, programs, tests, rc_want in [("pass", sglangs.CORRECT, TESTS, 0),
                                           ("compile error", sglangs.BROKEN, TESTS, 0),
                                           ("crash", sglangs.CRASH, TESTS[:2], 0)]:
        rc, res, err = exec_cli(agent, "vl-cpp", programs["cpp"], tests)
        if res is None or rc != rc_want:
            return "exec %s: exit %d, %s %s" % (name, rc, res, err[-800:])
        why = check_case("cpp", name, res, bookings(state, res["batch_id"]))
        if why:
            return "exec " + why
    rc, res, err = exec_cli(agent, "vl-python", sglangs.CORRECT["python"], TESTS, language="python")
    if rc != 0 or not res or res["reward"] != 1 or "compile" in res:
        return "exec --language python: exit %d, %s %s" % (rc, res, err[-800:])
    for args, says in [(["--language", "cpp"], "--language and --code go together"),
                       (["--language", "cobol", "--code", "/dev/null"], "unknown language"),
                       (["--language", "cpp", "--code", "/dev/null", "--", "/bin/true"], "no command")]:
        p = subprocess.run([BIN, "exec", "--tenant", "vl-cpp", "--policy-dir", agent.policy_dir,
                            "--tests", tests_file] + args, capture_output=True, timeout=60,
                           env=dict(agent.env, SANDGUARD_WARM="0"))
        if p.returncode != 64 or says not in p.stderr.decode():
            return "exec %s: exit %d, %r (want 64, %r)" % (args, p.returncode, p.stderr.decode(), says)
    return None


def main():
    def cli(langs, srv, agent, env):
        if "cpp" in langs and "python" in langs:
            why = cli_cases(agent, env.dir)
            report("FAIL" if why else "PASS", "exec --tests --language cpp|python --code FILE: the same "
                   "verdicts and bookings as /v1/verify; usage errors exit 64", why or "")

    only = os.environ.get("SG_VERIFY_LANGS")  # a subset, while working on one
    return sglangs.serve_each("verify", "vl-", one_language,
                              "pass, fail, compile error, timeout, crash; one compile (compiled languages), a run per test, "
                              "booked final once", after=cli,
                              languages=only.split(",") if only else None)


if __name__ == "__main__":
    sys.exit(main())

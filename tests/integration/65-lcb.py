#!/usr/bin/python3
"""Call-based tests and the lcb grader end to end, as root
(docs/trainer-integration.md, "Call-based tests and the LCB grader"): every
(program, tests) pair of tests/lcb/corpus.json runs through
`sandguard exec --tests --grader lcb`, and its reward must be the verdict
LiveCodeBench's own grader gave it (recorded in the corpus), or, for a
pair marked "differs", the documented other one; and the first test that
fails must be LiveCodeBench's first, failing the same way (wrong answer,
timeout, crash). Once cold in the CLI's
own process, once through an executor with warm verifier interpreters
(most tests must then run warm). Also: strict stays the default, a
policy's "verify": {"grader": "lcb"} applies without the flag, and
malformed call-based tests or a non-Python command are usage errors.
Prints one PASS/FAIL/SKIP line per case, and the agreement figure."""
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgtest import uid_base  # noqa: E402
from sgexecutor import PYTHON, SRC, exec_cli, run_suite  # noqa: E402
from sglcb import harness_policy  # noqa: E402

UID_BASE = uid_base(70000)
CORPUS = os.path.join(SRC, "tests", "lcb", "corpus.json")
COLD, WARM, BYPOLICY = "lcb-cold", "lcb-warm", "lcb-policy"


def load_pairs():
    with open(CORPUS) as f:
        return json.load(f)["pairs"]


def write_policy(env, tenant, warm=False, grader=None):
    env.policy(tenant, memory_mb=256, concurrency=2)
    harness_policy(os.path.join(env.policies, tenant + ".json"), SRC, warm, grader)


def setup(env):
    write_policy(env, COLD)
    write_policy(env, WARM, warm=True)
    write_policy(env, BYPOLICY, grader="lcb")


def run_pair(env, tenant, pair, grader="lcb", warm=False, in_outs=False):
    """(rc, result) of one pair under `grader` (None: the policy's); with
    in_outs, its tests as LiveCodeBench's input_output object."""
    name = pair["name"]
    prog = os.path.join(env.progs, "lcb-%s.py" % name)
    with open(prog, "w") as f:
        f.write(pair["program"])
    os.chmod(prog, 0o644)
    tests = [dict(t, fn_name=pair["fn_name"]) if pair.get("fn_name") else t for t in pair["tests"]]
    if in_outs:
        tests = {"inputs": [t["input"] for t in pair["tests"]],
                 "outputs": [t["output"] for t in pair["tests"]], "fn_name": pair.get("fn_name")}
    path = os.path.join(env.dir, "lcb-%s.json" % name)
    with open(path, "w") as f:
        json.dump(tests, f)
    args = ["--tenant", tenant, "--policy-dir", env.policies, "--tests", path,
            "--batch-id", "lcb-" + name]
    if grader:
        args += ["--grader", grader]
    rc, res, err = exec_cli(env, args + ["--", PYTHON, prog],
                            extra_env=None if warm else {"SANDGUARD_WARM": "0"})
    return rc, res, err


# LiveCodeBench's per-test result -> sandguard's test status.
LCB_KIND = {-2: "fail", -3: "timeout", -4: "crash"}
# Where the first failing test's kind differs, both failing: LCB books a
# dead worker (os._exit) as a test-runner error, sandguard as a fail (no
# report); LCB's alarm during the module's import is a runtime error
# there, sandguard's deadline a timeout.
KIND_EXCEPTIONS = {"os_exit_after_output": "fail", "call_module_level_loop": "timeout"}


def first_failure(pair, statuses):
    """None when the first failing test and its kind are LiveCodeBench's
    (LCB stops at it; sandguard runs every test), else why not."""
    res = pair["lcb"]["results"]
    lcb = next(((k, "crash" if pair["lcb"]["error_code"] == -5 else LCB_KIND.get(r, "fail"))
                for k, r in enumerate(res) if r is not True), None)
    ours = next(((k, s) for k, s in enumerate(statuses) if s != "pass"), None)
    if lcb and pair["name"] in KIND_EXCEPTIONS:
        lcb = (lcb[0], KIND_EXCEPTIONS[pair["name"]])
    return None if lcb == ours else "first failing test %s, LiveCodeBench's %s" % (ours, lcb)


def want_reward(pair):
    ok = pair["lcb"]["pass"]
    if pair.get("differs"):
        ok = not ok
    return 1 if ok else 0


def corpus(env, tenant, warm):
    pairs = load_pairs()
    with ThreadPoolExecutor(2) as pool:
        got = list(pool.map(lambda p: run_pair(env, tenant, p, warm=warm), pairs))
    wrong, agree, ways, kinds = [], 0, [], 0
    for pair, (rc, res, err) in zip(pairs, got):
        if res is None or res.get("cause") != "ok":
            wrong.append("%s: no verdict (exit %d): %s %s" % (pair["name"], rc, res and res.get("detail"),
                                                             err[-300:]))
            continue
        ways += [t.get("interpreter") for t in res.get("tests", []) if not t.get("confirmed")]
        agree += res["reward"] == (1 if pair["lcb"]["pass"] else 0)
        if res["reward"] != want_reward(pair):
            wrong.append("%s: reward %s, LiveCodeBench %s (%s)" % (
                pair["name"], res["reward"], "pass" if pair["lcb"]["pass"] else "fail", res.get("detail")))
        elif not pair.get("differs"):
            why = first_failure(pair, [t["status"] for t in res["tests"]])
            kinds += not why
            if why:
                wrong.append("%s: %s" % (pair["name"], why))
    differs = sum(1 for p in pairs if p.get("differs"))
    print("agreement with LiveCodeBench's grader (%s): %d/%d pairs; %d documented differences; "
          "first failing test and kind as LCB's in %d of %d others; %d call-based; "
          "%d of %d tests ran warm" % (
              "warm" if warm else "cold", agree, len(pairs), differs, kinds, len(pairs) - differs,
              sum(1 for p in pairs if p.get("fn_name")), ways.count("warm"), len(ways)))
    if wrong:
        return "; ".join(wrong[:6]) + (" (+%d more)" % (len(wrong) - 6) if len(wrong) > 6 else "")
    if warm and ways.count("warm") < len(ways) * 3 // 4:
        return "only %d of %d tests ran warm" % (ways.count("warm"), len(ways))
    return None


def case_corpus_cold(env, ex):
    return corpus(env, COLD, warm=False)


def case_corpus_warm(env, ex):
    return corpus(env, WARM, warm=True)


def by_name(names):
    return [p for p in load_pairs() if p["name"] in names]


# Pairs whose strict verdict is not LiveCodeBench's: the process's exit
# status, the missing prelude, __name__, the interpreter's recursion limit.
STRICT_FAILS = ["sys_exit1_after_output", "prelude_gcd", "name_is_not_main", "recursion_5000",
                "call_prelude_strict_fails"]
STRICT_PASSES = ["sum_exact", "call_add", "call_solution_method", "call_tuple_as_list",
                 "from_sys_import_stdin_slice", "global_statement"]


def case_strict_is_default(env, ex):
    for pair in by_name(STRICT_FAILS + STRICT_PASSES):
        rc, res, err = run_pair(env, COLD, pair, grader=None)
        want = 0 if pair["name"] in STRICT_FAILS else 1
        if res is None or res.get("reward") != want:
            return "%s: strict reward %s, want %d (%s)" % (pair["name"], res and res.get("reward"), want,
                                                          res and res.get("detail"))
    return None


def case_policy_grader(env, ex):
    for pair in by_name(["sys_exit1_after_output", "prelude_gcd", "call_prelude_strict_fails"]):
        rc, res, err = run_pair(env, BYPOLICY, pair, grader=None)
        if res is None or res.get("reward") != 1:
            return "%s: reward %s under the policy's lcb grader" % (pair["name"], res and res.get("reward"))
        rc, res, err = run_pair(env, BYPOLICY, pair, grader="strict")
        if res is None or res.get("reward") != 0:
            return "%s: --grader strict did not override the policy's lcb" % pair["name"]
    return None


def case_input_output_form(env, ex):
    """The tests as LCB stores them, verl and SandboxFusion read them."""
    for pair in by_name(["call_solution_method", "call_multiple_tests_second_wrong", "sum_exact",
                         "second_test_wrong"]):
        rc, res, err = run_pair(env, COLD, pair, in_outs=True)
        if res is None or res.get("reward") != want_reward(pair):
            return "%s: %s, want reward %d" % (pair["name"], res or err[-300:], want_reward(pair))
    return None


def usage(env, tests, argv, want_in_err):
    path = os.path.join(env.dir, "bad-tests.json")
    with open(path, "w") as f:
        json.dump(tests, f)
    rc, res, err = exec_cli(env, ["--tenant", COLD, "--policy-dir", env.policies, "--tests", path,
                                  "--grader", "lcb", "--"] + argv, extra_env={"SANDGUARD_WARM": "0"})
    if rc != 64 or res is not None or want_in_err not in err:
        return "exit %d, stderr %r: want 64 and %r" % (rc, err[-300:], want_in_err)
    return None


def case_bad_call_tests(env, ex):
    prog = os.path.join(env.progs, "lcb-id.py")
    with open(prog, "w") as f:
        f.write("def f(x):\n    return x\n")
    os.chmod(prog, 0o644)
    return (usage(env, [{"input": "1\n", "output": "1", "fn_name": "f"}], [PYTHON, prog],
                  "input line 2 is not JSON") or
            usage(env, [{"input": "1", "output": "[1,", "fn_name": "f"}], [PYTHON, prog],
                  "output is not JSON") or
            usage(env, [{"input": "1", "output": "1", "fn_name": "f-1"}], [PYTHON, prog],
                  "fn_name must be a Python identifier") or
            usage(env, [{"input": "1", "output": "1"}], ["/bin/sh", prog], "needs a Python program"))


CASES = [("corpus-cold", case_corpus_cold), ("corpus-warm", case_corpus_warm),
         ("strict-is-default", case_strict_is_default), ("policy-grader", case_policy_grader),
         ("input-output-form", case_input_output_form),
         ("bad-call-tests", case_bad_call_tests)]

if __name__ == "__main__":
    sys.exit(run_suite(CASES, UID_BASE, "sglcb-", setup=setup))

#!/usr/bin/python3
"""Call-based tests and the lcb grader over HTTP, as root
(docs/trainer-integration.md, "Call-based tests and the LCB grader"):
/v1/verify takes tests with "fn_name" and a "grader" ("strict" or "lcb",
else the tenant policy's verify.grader), through the server's warm
verifier where the policy has warm.verify; /run_code takes "fn_name" and
answers the function's return value as JSON on run_result.stdout, which
verl's own scoring (sgserve.verl_verdict) compares with LiveCodeBench's
stored output. Bad requests are 400s. Prints one PASS/FAIL/SKIP line per
case."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sglcb import harness_policy  # noqa: E402
from sgserve import SRC, run_suite, verl_request, verl_verdict  # noqa: E402

PYTHON = "/usr/bin/python3"
TWO_SUM = ("class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n"
           "        seen = {}\n        for i, x in enumerate(nums):\n"
           "            if target - x in seen:\n                return (seen[target - x], i)\n"
           "            seen[x] = i\n")
TWO_SUM_TESTS = [{"input": "[2, 7, 11, 15]\n9", "output": "[0, 1]", "fn_name": "twoSum"},
                 {"input": "[3, 2, 4]\n6", "output": "[1, 2]", "fn_name": "twoSum"}]
EXIT_AFTER = "print(sum(map(int, input().split())))\nimport sys\nsys.exit(1)\n"


def policy(env, tenant, grader=None):
    env.policy(tenant)
    harness_policy(os.path.join(env.policies, tenant + ".json"), SRC, warm=True, grader=grader)


def setup(env):
    policy(env, "default")
    policy(env, "lcbpol", grader="lcb")
    for name, text in (("two_sum.py", TWO_SUM), ("exit_after.py", EXIT_AFTER)):
        with open(os.path.join(env.progs, name), "w") as f:
            f.write(text)
        os.chmod(os.path.join(env.progs, name), 0o644)


def verify(srv, body):
    status, _, res = srv.post("/v1/verify", body)
    return status, res


def case_verify_call_based(env, srv):
    for grader, want in (("lcb", 1), ("strict", 0)):  # strict: no prelude, no List
        status, res = verify(srv, {"code": TWO_SUM, "language": "python", "grader": grader,
                                   "tests": TWO_SUM_TESTS})
        if status != 200 or res.get("reward") != want:
            return "grader %s: %d %s, want reward %d" % (grader, status, res, want)
    return None


def case_verify_input_output(env, srv):
    """The tests as LiveCodeBench's input_output object."""
    in_outs = {"inputs": [t["input"] for t in TWO_SUM_TESTS], "outputs": ["[0, 1]", "[2, 1]"],
               "fn_name": "twoSum"}
    status, res = verify(srv, {"code": TWO_SUM, "language": "python", "grader": "lcb", "tests": in_outs})
    if status != 200 or res.get("reward") != 0 or [t["status"] for t in res["tests"]] != ["pass", "fail"]:
        return "%d %s" % (status, res)
    return None


def case_verify_warm(env, srv):
    prog = os.path.join(env.progs, "two_sum.py")
    res = None
    for _ in range(3):  # the first request may start the warm parent
        status, res = verify(srv, {"command": [PYTHON, prog], "grader": "lcb", "tests": TWO_SUM_TESTS})
        if status != 200 or res.get("reward") != 1:
            return "%d %s" % (status, res)
    ways = [t.get("interpreter") for t in res["tests"]]
    return None if "warm" in ways else "no test ran warm: %s" % ways


def case_verify_policy_grader(env, srv):
    tests = [{"input": "1 2\n", "output": "3\n"}]
    cases = (("default", None, 0), ("lcbpol", None, 1), ("lcbpol", "strict", 0), ("default", "lcb", 1))
    for tenant, grader, want in cases:
        body = {"tenant": tenant, "code": EXIT_AFTER, "language": "python", "tests": tests}
        if grader:
            body["grader"] = grader
        status, res = verify(srv, body)
        if status != 200 or res.get("reward") != want:
            return "%s grader %s: %d %s, want %d" % (tenant, grader, status, res, want)
    return None


def case_verify_bad_requests(env, srv):
    bad = [({"code": "x", "language": "python", "grader": "exact", "tests": TWO_SUM_TESTS},
            "\"grader\" must be"),
           ({"code": "x", "language": "python",
             "tests": [{"input": "[1,", "output": "1", "fn_name": "f"}]}, "input line 1 is not JSON")]
    for body, want in bad:
        status, res = verify(srv, body)
        if status != 400 or want not in res.get("error", ""):
            return "%s: %d %s, want 400 with %r" % (body, status, res, want)
    return None


def case_verify_deep_values(env, srv):
    """Nesting past what json.loads() loads (PY_JSON_DEPTH_MAX, 990): an
    expected output 5,000 deep is a 400 naming it, and a function that
    returns a 5,000-deep list fails its test; a 990-deep one passes.
    Both are parsed on a serve worker's 256 KiB stack: with the old bound
    of 10,000 the first took serve down (SIGSEGV)."""
    deep = "[" * 5000 + "]" * 5000
    status, res = verify(srv, {"code": "def f(x):\n    return x\n", "language": "python",
                               "tests": [{"input": "1", "output": deep, "fn_name": "f"}]})
    if status != 400 or "nested too deeply" not in res.get("error", ""):
        return "a 5,000-deep expected output: %d %s, want 400" % (status, res)
    code = ("import sys\nsys.setrecursionlimit(100000)\n"
            "def f(n):\n    x = []\n    for _ in range(n - 1):\n        x = [x]\n    return x\n")
    for n, want in ((5000, "fail"), (990, "pass")):
        status, res = verify(srv, {"code": code, "language": "python",
                                   "tests": [{"input": str(n), "output": "[" * 990 + "]" * 990,
                                              "fn_name": "f"}]})
        if status != 200 or [t["status"] for t in res["tests"]] != [want]:
            return "a function returning %d levels: %d %s, want %s" % (n, status, str(res)[:300], want)
    if srv.proc.poll() is not None:
        return "serve exited %s" % srv.proc.returncode
    return None


def case_run_code_fn_name(env, srv):
    body = dict(verl_request(TWO_SUM, "[2, 7, 11, 15]\n9"), fn_name="twoSum", grader="lcb")
    status, _, resp = srv.post("/run_code", body)
    if status != 200 or verl_verdict(resp, "[0, 1]") is not True:
        return "%d %s" % (status, resp)
    if json.loads(resp["run_result"]["stdout"]) != [0, 1]:
        return "stdout %r" % resp["run_result"]["stdout"]
    body = dict(verl_request("def f(x):\n    return {x}\n", "3"), fn_name="f")
    status, _, resp = srv.post("/run_code", body)
    if status != 200 or resp["run_result"]["stdout"] != "!set\n":
        return "a set: %d %s" % (status, resp)
    body = dict(verl_request("def f(x):\n    raise ValueError(x)\n", "3"), fn_name="f")
    status, _, resp = srv.post("/run_code", body)
    if status != 200 or verl_verdict(resp, "3") != -2 or "ValueError" not in resp["run_result"]["stderr"]:
        return "an exception: %d %s" % (status, resp)
    return None


def case_run_code_bad_requests(env, srv):
    bad = [(dict(verl_request("x", "1"), fn_name="1f"), "fn_name must be a Python identifier"),
           (dict(verl_request("x", "1"), grader="lcb"), "go with python code")]
    for body, want in bad:
        status, _, resp = srv.post("/run_code", body)
        if status != 400 or want not in resp.get("error", ""):
            return "%s: %d %s, want 400 with %r" % (body, status, resp, want)
    return None


if __name__ == "__main__":
    sys.exit(run_suite("serve lcb", [
        ("verify: call-based tests under both graders", case_verify_call_based),
        ("verify: call-based tests run warm", case_verify_warm),
        ("verify: tests as LiveCodeBench's input_output", case_verify_input_output),
        ("verify: the policy's grader, the request's over it", case_verify_policy_grader),
        ("verify: bad call-based requests are 400s", case_verify_bad_requests),
        ("verify: values nested past json.loads()'s depth, on a worker's stack", case_verify_deep_values),
        ("run_code: fn_name answers the return value as JSON", case_run_code_fn_name),
        ("run_code: bad fn_name requests are 400s", case_run_code_bad_requests),
    ], setup=setup))

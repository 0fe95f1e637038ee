"""Shared by 65-lcb.py and 66-serve-lcb.py: what a tenant policy needs for
call-based tests and the lcb grader (the harness readable in the sandbox),
and the suites' choices of warm verifier and default grader."""
import json
import os


def harness_policy(path, src, warm=False, grader=None):
    """Rewrite the policy file at `path`: the harness's directory under
    `src` read-only, warm verifier interpreters if `warm`, and
    verify.grader if `grader`."""
    with open(path) as f:
        p = json.load(f)
    p["files"]["read_only"].append(os.path.join(src, "share", "sandguard"))
    if warm:
        p["warm"] = {"interpreter": "python3", "verify": True}
    if grader:
        p["verify"] = {"grader": grader}
    with open(path, "w") as f:
        json.dump(p, f)

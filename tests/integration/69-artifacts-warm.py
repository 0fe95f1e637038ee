#!/usr/bin/env python3
"""Pinned artifacts beyond the reward program itself (issue 37), each case
without the agent and with it: a pinned Python module next to a pinned
script is imported from the checked copy, never by path; a one-byte
change to the module is refused before anything runs, with both digests;
a revoked module is refused, and explain names the revocation; two pinned
modules of one name are refused; the store of checked copies stays
within its bound; OpenRLHF's reward.command is pinned like any batch's
command; and a tenant with warm preloads whose policy pins artifacts
runs every batch cold through a running executor (a warm parent would
import its preloads by path after the check), while the same tenant
without pins does get a warm parent (the control: the setup can go
warm)."""
import ctypes
import json
import os
import secrets
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgagent import PY, SANDGUARD  # noqa: E402
from sgtest import uid_base  # noqa: E402
from sgartifact import refusal_event, run_cases, sha, why_not  # noqa: E402
import sgserve  # noqa: E402

UID_BASE = uid_base(71000)  # 67-artifacts: 69500, 70-*: 70000 and 70500
WARM_BOUND_S = 40

MODULE = "VALUE = 0.6\n"
# The module from the checked copy: next to the script's copy in the
# scratch, which only a pinned script gets.
FROM_COPY = """import json, os, sys
import MOD
here = os.path.dirname(os.path.abspath(sys.argv[0]))
ok = "sg-pinned" in sys.argv[0] and os.path.dirname(os.path.abspath(MOD.__file__)) == here
b = json.load(sys.stdin)
print(json.dumps([MOD.VALUE if ok else 0.1] * len(b["items"])))
"""
# 0.5 when it runs as its checked copy (in the scratch), else 0.1.
CHECKED_COPY = """import json, sys
b = json.load(sys.stdin)
print(json.dumps([0.5 if "sg-pinned" in sys.argv[0] else 0.1] * len(b["items"])))
"""
# 0.2 when MOD was imported before the script ran: a warm parent's preload.
PRELOADED = """import json, sys
pre = "MOD" in sys.modules
import MOD
b = json.load(sys.stdin)
print(json.dumps([0.2 if pre else MOD.VALUE] * len(b["items"])))
"""


def policy(a, tenant, pins, require=True, **extra):
    a.write_policy(tenant, dict({"artifacts": {"require": require,
                                               "pins": [{"path": p, "sha256": sha(p)} for p in pins]}},
                                **extra))


def case_module_copy(a, tag):
    mod = "hmod_%s" % tag
    helper = a.program(mod + ".py", MODULE)
    script = a.program("imp-%s.py" % tag, FROM_COPY.replace("MOD", mod))
    policy(a, "art-mod", [script, helper])
    r, raw = a.exec_batch("art-mod", script)
    bad = why_not(r, raw, "ok")
    if bad or r["scores"] != [0.6] * 3:
        return "the module is not the checked copy: %s" % (bad or (r["scores"], r["stderr"]))
    want = sha(helper)
    with open(helper, "r+b") as f:  # one byte, in place
        f.seek(MODULE.index("6"))
        f.write(b"9")
    found = sha(helper)
    r, raw = a.exec_batch("art-mod", script)
    bad = why_not(r, raw, "tenant_policy_violation", [helper, "expected " + want, "found " + found])
    if bad or r["attempts"] != 0:
        return "a changed module: %s" % (bad or "it ran: %s" % r)
    bad = refusal_event(a, tag, [helper, "expected " + want, "found " + found])
    if bad:
        return bad
    with open(helper, "w") as f:
        f.write(MODULE)
    out = a.run(["artifact", "revoke", want, "--tenant", "art-mod", "--reason", "module SEC-7",
                 "--policy-dir", a.policy_dir])
    try:
        r, raw = a.exec_batch("art-mod", script)
        bad = why_not(r, raw, "tenant_policy_violation", ["revoked", "module SEC-7", want])
        if bad or r["attempts"] != 0 or out.returncode:
            return "a revoked module: %s" % (bad or out.stderr or "it ran: %s" % r)
        ex = a.run(["explain", a.last_batch_id, "--tenant", "art-mod", "--policy-dir", a.policy_dir])
        if "revoked" not in ex.stdout or "module SEC-7" not in ex.stdout:
            return "explain does not name the revocation: %s" % ex.stdout[-400:]
        bad = refusal_event(a, tag, ["revoked", "module SEC-7", want])
        if bad:
            return bad
    finally:
        a.run(["artifact", "unrevoke", want, "--tenant", "art-mod", "--policy-dir", a.policy_dir])
    r, raw = a.exec_batch("art-mod", script)
    return why_not(r, raw, "ok") and "after unrevoke: " + why_not(r, raw, "ok")


def case_module_twins(a, tag):
    mod = "twin_%s" % tag
    dirs = [os.path.join(a.programs, "%s-%s" % (d, tag)) for d in ("one", "two")]
    helpers = []
    for d in dirs:
        os.makedirs(d, exist_ok=True)
        helpers.append(a.program(os.path.join(os.path.basename(d), mod + ".py"), MODULE))
    script = a.program("twins-%s.py" % tag, FROM_COPY.replace("MOD", mod))
    policy(a, "art-twin", [script] + helpers)
    r, raw = a.exec_batch("art-twin", script)
    bad = why_not(r, raw, "tenant_policy_violation", ["two pinned modules are named %s.py" % mod])
    return bad or (r["attempts"] != 0 and "it ran: %s" % r) or None


def case_store_bound(a, tag):
    """$SANDGUARD_ARTIFACT_STORE_MB bounds the store's copies: three
    pinned programs of 450 KiB under a 1 MiB bound leave at most 1 MiB,
    the least recently used gone, and each program still runs (a copy
    gone costs a hash)."""
    store = os.path.join(a.env["SANDGUARD_STATE_DIR"], "artifacts", "sha256")
    progs = [a.program("big-%s-%d.py" % (tag, i), "# %d\n" % i + ("#" + "x" * 1023 + "\n") * 450 +
                       "import json, sys\nprint(json.dumps([1] * len(json.load(sys.stdin)['items'])))\n")
             for i in range(3)]
    saved = dict(a.env)
    a.env["SANDGUARD_ARTIFACT_STORE_MB"] = "1"
    try:
        for prog in progs + progs[:1]:
            policy(a, "art-bound", [prog])
            r, raw = a.exec_batch("art-bound", prog)
            bad = why_not(r, raw, "ok")
            if bad or r["scores"] != [1] * 3:
                return "%s: %s" % (prog, bad or r["scores"])
        names = os.listdir(store)
        total = sum(os.path.getsize(os.path.join(store, n)) for n in names)
        if total > 1 << 20 or sha(progs[0]) not in names or sha(progs[1]) in names:
            return "store %d bytes, %s; want at most 1 MiB, the first program's copy (used last) " \
                "kept, the second's (least recent) gone" % (total, sorted(names))
        return None
    finally:
        a.env.clear()
        a.env.update(saved)


class ServeTree:
    """What sgserve.Server needs of the case's tree."""

    def __init__(self, a):
        self.dir, self.policies, self.env = a.dir, a.policy_dir, a.env


def case_openrlhf_command(a, tag):
    """The policy's reward.command, which OpenRLHF's remote reward runs
    (the request names no program), is pinned like any batch's command:
    it scores; one byte changed, the request gets no reward and the
    refusal names both digests."""
    prog = a.program("orl-%s.py" % tag, CHECKED_COPY)
    policy(a, "art-orl", [prog], reward={"command": [PY, prog]})
    tokens = os.path.join(a.dir, "tokens-%s" % tag)
    os.makedirs(tokens, exist_ok=True)
    token = secrets.token_urlsafe(24)
    with open(os.path.join(tokens, "art-orl"), "w") as f:
        f.write(token + "\n")
    os.chmod(os.path.join(tokens, "art-orl"), 0o600)
    srv = sgserve.Server(ServeTree(a), "--tokens", tokens, "--policy-dir", a.policy_dir,
                         env_override=a.env)
    try:
        def post():
            status, _, body = srv.post("/t/%s/openrlhf/get_reward" % token,
                                       {"query": ["q: a"], "prompts": ["q: "], "labels": ["a"]})
            return status, body
        status, body = post()
        if status != 200 or body.get("rewards") != [0.5]:
            return "the pinned reward.command (its checked copy): HTTP %d %s" % (status, body)
        want = sha(prog)
        with open(prog, "a") as f:
            f.write("#")
        status, body = post()
        sg = body.get("sandguard") or {}
        if body.get("rewards") is not None or sg.get("cause") != "tenant_policy_violation" or \
                "expected " + want not in (sg.get("detail") or "") or \
                "found " + sha(prog) not in (sg.get("detail") or ""):
            return "a changed reward.command: HTTP %d %s" % (status, body)
        return None
    finally:
        srv.stop()


def landlock_abi():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc.syscall(ctypes.c_long(444), None, ctypes.c_size_t(0), ctypes.c_uint32(1))


def executor(a):
    # The client's SANDGUARD_* environment must be the executor's, or it
    # runs cold in the client's process.
    p = subprocess.Popen([SANDGUARD, "executor"], env=a.env, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    if b"executor listening on" not in p.stdout.readline():
        p.kill()
        p.wait()
        return None
    return p


def warm_scores(a, tenant, script, want_warm):
    """Batches through the executor until one's module was preloaded (a
    warm parent's), or WARM_BOUND_S: the scores seen."""
    seen = []
    deadline = time.monotonic() + (WARM_BOUND_S if want_warm else 6)
    while time.monotonic() < deadline:
        r, raw = a.exec_batch(tenant, script)
        if r is None or r.get("path") != "warm" or r["cause"] != "ok":
            seen.append(("not run by the executor, or failed", r and (r.get("path"), r["cause"],
                                                                     r["detail"]), raw.stderr[-200:]))
            return seen
        seen.append(r["scores"][0])
        if want_warm and seen[-1] == 0.2:
            return seen
        time.sleep(0.3)  # the pool's keeper prepares the next sandbox meanwhile
    return seen


def case_warm_pinned_runs_cold(a, tag):
    if landlock_abi() < 6:
        return "SKIP Landlock ABI below 6: no warm parent here, every call is cold anyway"
    # The preload a package, pinned as a directory (its files are checked
    # in place: a module file would be handed over as a scratch file,
    # which alone keeps a call cold).
    mod = "wpkg_%s" % tag
    os.makedirs(os.path.join(a.programs, mod), exist_ok=True)
    helper = a.program(os.path.join(mod, "__init__.py"), MODULE)
    script = a.program("warm-%s.py" % tag, PRELOADED.replace("MOD", mod))
    warm = {"interpreter": "python3", "preload": [mod]}
    a.write_policy("art-warm-ctl", {"warm": warm})
    a.write_policy("art-warm", {"warm": warm, "artifacts": {"pins": [  # the preload, not the script
        {"path": os.path.dirname(helper), "sha256": sha(os.path.dirname(helper))}]}})
    ex = executor(a)
    if not ex:
        return "the executor did not start"
    try:
        ctl = warm_scores(a, "art-warm-ctl", script, True)
        if not ctl or ctl[-1] != 0.2:
            return "the control never went warm within %d s: %s" % (WARM_BOUND_S, ctl[-3:])
        pinned = warm_scores(a, "art-warm", script, False)
        if len(pinned) < 3 or any(s != 0.6 for s in pinned):
            return "a pinning tenant's batch ran warm (0.2) or failed: %s" % pinned
        # The preload changed: refused before any parent or run.
        with open(helper, "a") as f:
            f.write("# changed\n")
        r, raw = a.exec_batch("art-warm", script)
        return why_not(r, raw, "tenant_policy_violation", [os.path.dirname(helper), "expected"]) or \
            (r["attempts"] != 0 and "it ran: %s" % r) or None
    finally:
        ex.send_signal(signal.SIGTERM)
        ex.wait(60)


CASES = [("pinned module imported from the checked copy, changed or revoked refused", case_module_copy),
         ("two pinned modules of one name refused", case_module_twins),
         ("the store of checked copies stays within its bound", case_store_bound),
         ("OpenRLHF's reward.command is pinned", case_openrlhf_command),
         ("a pinning tenant's warm preloads run cold, never a parent", case_warm_pinned_runs_cold)]


def main():
    return run_cases(CASES, "artwarm", UID_BASE)


if __name__ == "__main__":
    sys.exit(main())

"""The harness of the sandbox launcher suites (20-sandbox.py: limits and
lifecycle; 21-sandbox-isolation.py: what a sandbox can reach): policies
and a scratch root per run (Env), sandbox_run through the
tests/helpers/sandbox_run binary, and the check that a sandbox left
nothing behind (no scratch, no cgroup, no live process with a slot uid).
Each suite sets UID_BASE, its own slot range, before its first case."""
import fcntl
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sgtest import cgroup2_mount, cgroup_v1_mounts, exit_code, report  # noqa: E402

BUILD = os.environ.get("SANDGUARD_BUILD") or os.path.abspath("build")
SRC = os.environ.get("SANDGUARD_SRC") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HELPER = os.path.join(BUILD, "tests", "sandbox_run")
PROGRAMS = os.path.join(SRC, "tests", "programs")
PYTHON = "/usr/bin/python3"
# A slot range of our own, so that "no process left with a slot uid" is not
# confused by sandboxes other tests run at the same time.
UID_BASE = None  # set by each suite before its first case: its own range (uid_base())
SLOTS = 256
# Far below the 100 MB / 1 GiB the programs write; ASan builds carry shadow memory.
RSS_BOUND_KB = (128 if os.environ.get("SANDGUARD_ASAN") else 32) * 1024
TIMEOUT_SLACK_MS = 1000       # the bound: deadline + 1 s
TEST_TENANTS = ("sbtest", "sbmem", "sbfork", "sbcpu", "sbother", "sbfull", "sbagent", "sbnet", "sbunix")
# An egress allowlist that reaches nothing on this machine (TEST-NET-1):
# with it the sandbox keeps the host's network namespace.
TCP_ALLOW = [{"cidr": "192.0.2.1/32", "port": 9, "proto": "tcp"}]

CG_ROOT = os.environ.get("SANDGUARD_CGROUP_ROOT") or os.path.join(cgroup2_mount(), "sandguard")
V1 = cgroup_v1_mounts()


class Env:
    """Policies (one per tenant) and a scratch root in a temp directory."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="sgsb-")
        os.chmod(self.dir, 0o755)   # the slot uids walk through it to their scratch
        self.scratch_root = os.path.join(self.dir, "scratch")
        with open(os.path.join(SRC, "policies", "default.json")) as f:
            self.base = json.load(f)

    def policy(self, tenant, **limits):
        p = json.loads(json.dumps(self.base))
        p["tenant"] = tenant
        p["files"]["scratch_root"] = limits.pop("scratch_root", self.scratch_root)
        p["require_agent"] = limits.pop("require_agent", False)
        p["egress"]["allow"] = limits.pop("egress", [])
        p["egress"]["allow_unix"] = limits.pop("allow_unix", False)
        p["files"].update(limits.pop("files", {}))
        p["egress"].update(limits.pop("egress_opts", {}))
        p["limits"].update(limits)
        path = os.path.join(self.dir, tenant + ".json")
        with open(path, "w") as f:
            json.dump(p, f)
        return path

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)
        # The per-tenant cgroup directories outlive sandboxes by design;
        # these tenants exist only for this test.
        base = os.path.basename(CG_ROOT)
        for tenant in TEST_TENANTS:
            for parent in [CG_ROOT] + [os.path.join(m, base) for m in V1.values()]:
                try:
                    os.rmdir(os.path.join(parent, tenant))
                except OSError:
                    pass


def run(policy, argv, program=None, timeout_ms=None, stdin=None, fetch=(), env_extra=None):
    cmd = [HELPER, "--policy", policy]
    if timeout_ms:
        cmd += ["--timeout-ms", str(timeout_ms)]
    if program:
        cmd += ["--file", "prog.py=" + os.path.join(PROGRAMS, program)]
    stdin_file = None
    if stdin is not None:
        stdin_file = tempfile.NamedTemporaryFile(delete=False)
        stdin_file.write(stdin)
        stdin_file.close()
        cmd += ["--stdin", stdin_file.name]
    for name in fetch:
        cmd += ["--fetch", name]
    cmd += ["--"] + argv
    env = dict(os.environ, SANDGUARD_UID_BASE=str(UID_BASE))
    env.update(env_extra or {})
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, env=env, timeout=300)
    elapsed = (time.monotonic() - t0) * 1000
    if stdin_file:
        os.unlink(stdin_file.name)
    try:
        d = json.loads(p.stdout)
    except ValueError:
        raise AssertionError("helper exited %d without JSON: %s" % (p.returncode, p.stderr.decode()[-300:]))
    d["elapsed_ms"] = elapsed
    d["helper_rc"] = p.returncode
    return d


def run_prog(policy, program, args=(), **kw):
    return run(policy, [PYTHON, "prog.py"] + list(args), program=program, **kw)


def in_thread(results, key, *args, **kw):
    """run_prog in a thread: results[key] is its result or the exception."""
    def body():
        try:
            results[key] = run_prog(*args, **kw)
        except Exception as e:
            results[key] = e
    t = threading.Thread(target=body)
    t.start()
    return t


def finished(d):
    if isinstance(d, Exception):
        raise AssertionError(str(d))
    return d


def slot_processes():
    """Live (not zombie) processes running as one of our slot uids."""
    found = []
    for status in glob.glob("/proc/[0-9]*/status"):
        try:
            with open(status) as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        uid = int(fields["Uid"].split()[0])
        if UID_BASE <= uid < UID_BASE + SLOTS and not fields["State"].strip().startswith("Z"):
            found.append("%s(uid %d)" % (status.split("/")[2], uid))
    return found


def leftovers(d, tenant):
    """What a finished sandbox left behind; [] when nothing."""
    left = []
    sid = d.get("sandbox_id")
    if not sid:
        return left
    if os.path.exists(d["scratch"]):
        left.append("scratch " + d["scratch"])
    paths = [os.path.join(CG_ROOT, tenant, sid)]
    base = os.path.basename(CG_ROOT)
    paths += [os.path.join(m, base, tenant, sid) for m in V1.values()]
    left += ["cgroup " + p for p in paths if os.path.exists(p)]
    left += ["process " + p for p in settle(slot_processes)]
    return left


def settle(probe, seconds=2.0):
    """probe() until it returns nothing, for a moment: a killed task leaves
    its cgroup early in exit and shows in /proc a little longer."""
    end = time.monotonic() + seconds
    while True:
        found = probe()
        if not found or time.monotonic() > end:
            return found
        time.sleep(0.05)


def case(name, fn, *args):
    try:
        why = fn(*args)
    except AssertionError as e:
        why = "assertion: %s" % e
    except Exception as e:  # a broken case is a failure, never a crash of the run
        why = "%s: %s" % (type(e).__name__, e)
    if why and why.startswith("SKIP "):
        report("SKIP", name, why[5:])
    elif why:
        report("FAIL", name, why)
    else:
        report("PASS", name)


def expect(d, tenant, **want):
    """None when d has every wanted field and nothing was left behind."""
    if d.get("rc") != 0:
        return "platform error %s: %s" % (d.get("rc"), d.get("detail"))
    for k, v in want.items():
        if d.get(k) != v:
            return "%s is %r, want %r (end=%s exit=%s signal=%s err=%r)" % (
                k, d.get(k), v, d.get("end"), d.get("exit_code"), d.get("signal"), (d.get("err") or "")[-200:])
    left = leftovers(d, tenant)
    return "left behind: " + ", ".join(left) if left else None


def main(suite, lock, cases):
    """Runs a suite's cases, (name, fn, extra args after env), in order;
    returns its exit code. The two suites' main() was the same but for
    the cases, the name on its SKIP lines and its lock file."""
    if os.geteuid() != 0:
        for name in (suite,):
            report("SKIP", name, "needs root")
        return 0
    if not os.access(HELPER, os.X_OK):
        report("FAIL", "sandbox-helper", "%s is not built" % HELPER)
        return 1
    if not os.access(PYTHON, os.X_OK):
        report("SKIP", suite, "%s missing" % PYTHON)
        return 0
    # Two runs of this test at once (several people running the suite)
    # would see each other's sandboxes in the slot-uid check: take turns.
    os.makedirs("/run/sandguard", exist_ok=True)
    turn = open(os.path.join("/run/sandguard", lock), "w")
    fcntl.flock(turn, fcntl.LOCK_EX)
    env = Env()
    try:
        for name, fn, *args in cases:
            case(name, fn, env, *args)
    finally:
        env.cleanup()
    return exit_code()

#!/usr/bin/python3
"""The sandbox launcher (sandbox_run) on the real kernel, as root, through
the tests/helpers/sandbox_run binary: Python programs from tests/programs/
run as the slot uid with /usr/bin/python3. Prints one PASS/FAIL/SKIP line
per case. Every case also checks that the sandbox left nothing behind: no
scratch, no cgroup (v2 and v1), no live process with a slot uid."""
import fcntl
import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgtest import accepts_nothing, cgroup2_mount, cgroup_v1_mounts, exit_code, report, uid_base  # noqa: E402

BUILD = os.environ.get("SANDGUARD_BUILD") or os.path.abspath("build")
SRC = os.environ.get("SANDGUARD_SRC") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HELPER = os.path.join(BUILD, "tests", "sandbox_run")
PROGRAMS = os.path.join(SRC, "tests", "programs")
PYTHON = "/usr/bin/python3"
# A slot range of our own, so that "no process left with a slot uid" is not
# confused by sandboxes other tests run at the same time.
UID_BASE = uid_base(61000)
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


# ---------------------------------------------------------------- the cases

def t_normal(env):
    import hashlib
    data = b"hello sandbox"
    d = run_prog(env.policy("sbtest"), "sb_echo.py", ["3"], stdin=data)
    want_out = "len=%d sha256=%s\n" % (len(data), hashlib.sha256(data).hexdigest())
    return expect(d, "sbtest", end="exited", exit_code=3, out=want_out, err="to stderr\n")


def t_stdin_large(env):
    import hashlib
    data = os.urandom(5 << 20)
    d = run_prog(env.policy("sbtest"), "sb_echo.py", stdin=data)
    want_out = "len=%d sha256=%s\n" % (len(data), hashlib.sha256(data).hexdigest())
    return expect(d, "sbtest", end="exited", exit_code=0, out=want_out)


def timeout_case(env, program):
    deadline = 2000
    d = run_prog(env.policy("sbtest"), program, timeout_ms=deadline)
    why = expect(d, "sbtest", end="timeout")
    if not why and d["elapsed_ms"] > deadline + TIMEOUT_SLACK_MS:
        why = "took %.0f ms for a %d ms deadline" % (d["elapsed_ms"], deadline)
    if not why:
        print("# %s: timeout after %.0f ms (deadline %d ms, wall_ms %d)"
              % (program, d["elapsed_ms"], deadline, d["wall_ms"]), flush=True)
    return why


def t_daemon(env):
    d = run_prog(env.policy("sbtest"), "sb_daemon.py", timeout_ms=20000)
    why = expect(d, "sbtest", end="exited", exit_code=0)
    if why:
        return why
    # The pid is the sandbox's own (its PID namespace): that it was made
    # is what the output says; that it is gone, the slot-uid check above.
    if not d["out"].split() or int(d["out"].split()[0]) < 2:
        return "no grandchild pid printed: %r" % d["out"]
    if d["elapsed_ms"] > 10000:
        return "early exit took %.0f ms" % d["elapsed_ms"]
    return None


def t_hold_pipe(env):
    d = run_prog(env.policy("sbtest"), "sb_hold_pipe.py", timeout_ms=20000)
    why = expect(d, "sbtest", end="exited", exit_code=0)
    if why:
        return why
    if len(d["out"].split()) < 2:
        return "no child pid printed: %r" % d["out"]
    if d["elapsed_ms"] > 10000:
        return "took %.0f ms: the held pipe delayed the end" % d["elapsed_ms"]
    print("# hold-pipe: main exit to result in %.0f ms" % d["elapsed_ms"], flush=True)
    return None


def t_stdout_flood(env):
    cap = env.base["limits"]["output_bytes"]
    d = run_prog(env.policy("sbtest"), "sb_stdout_flood.py", timeout_ms=60000)
    why = expect(d, "sbtest", end="output_oversize", out_len=cap, out_truncated=True)
    if not why and d["maxrss_kb"] > RSS_BOUND_KB:
        why = "launcher max RSS %d kB" % d["maxrss_kb"]
    if not why:
        print("# 100 MB stdout: launcher max RSS %d kB" % d["maxrss_kb"], flush=True)
    return why


def t_stderr_flood(env):
    cap = env.base["limits"]["output_bytes"]
    d = run_prog(env.policy("sbtest"), "sb_stderr_flood.py", timeout_ms=120000)
    why = expect(d, "sbtest", end="exited", exit_code=0, out="[0.5]\n", err_len=cap, err_truncated=True)
    if not why and d["err"] != "e" * cap:
        why = "stderr does not hold the first %d bytes" % cap
    if not why and d["maxrss_kb"] > RSS_BOUND_KB:
        why = "launcher max RSS %d kB" % d["maxrss_kb"]
    if not why:
        print("# 1 GiB stderr: launcher max RSS %d kB, drained in %d ms" % (d["maxrss_kb"], d["wall_ms"]), flush=True)
    return why


def t_memory_hog(env):
    d = run_prog(env.policy("sbmem", memory_mb=64), "sb_memory_hog.py", timeout_ms=60000)
    return expect(d, "sbmem", end="oom", rule="memory")


def t_cpu_quota(env):
    """cpu 0.25: two seconds of spinning get about half a CPU second."""
    d = run_prog(env.policy("sbcpu", cpu=0.25), "sb_cpu_spin.py", ["2"], timeout_ms=20000)
    why = expect(d, "sbcpu", end="exited", exit_code=0)
    if why:
        return why
    cpu = float(d["out"])
    print("# cpu 0.25: %.2f CPU s in 2 s of wall time" % cpu, flush=True)
    return "got %.2f CPU seconds in 2 s at cpu=0.25" % cpu if cpu > 1.2 else None


def t_fork_bomb(env):
    d = run_prog(env.policy("sbfork", max_tasks=32), "sb_fork_bomb.py", timeout_ms=10000)
    if d.get("rc") != 0:
        return "platform error %s: %s" % (d.get("rc"), d.get("detail"))
    if d["end"] not in ("fork_limit", "timeout"):
        return "end is %s" % d["end"]
    why = expect(d, "sbfork")
    if not why and subprocess.run(["/bin/true"]).returncode != 0:
        why = "the runner can no longer fork"
    return why


def t_env(env):
    secrets = {"SECRET_TOKEN": "s3cr3t-token", "AWS_SECRET_ACCESS_KEY": "AKIAEXAMPLESECRET",
               "KUBERNETES_SERVICE_HOST": "10.0.0.1"}
    d = run_prog(env.policy("sbtest"), "sb_env_dump.py", env_extra=secrets)
    why = expect(d, "sbtest", end="exited", exit_code=0)
    if why:
        return why
    seen = json.loads(d["out"])
    want = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": d["scratch"]}
    if seen != want:
        return "environment is %r" % seen
    if any(v in d["out"] for v in secrets.values()):
        return "a secret reached the sandbox"
    return None


def t_escape(env):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    tmp_probe = "/tmp/sgsb-probe-%d" % os.getpid()
    want = {
        "fds": ("none",),      # first: before any probe opens something
        # /tmp is the sandbox's own (in its scratch): writable, and the
        # host's /tmp never sees the file (checked below).
        "write:" + tmp_probe: ("ok",),
        # Outside the scratch everything is read-only or absent.
        "write:/etc/sgsb-probe": ("EACCES", "EPERM", "EROFS", "ENOENT"),
        "read:/etc/shadow": ("EACCES", "EPERM", "ENOENT"),
        "environ-parent": ("EACCES", "EPERM"),
        "kill-parent": ("EPERM",),
        "tcp:%d" % port: ("EACCES", "EPERM", "ENETUNREACH"),
        "io_uring": ("EPERM",),
        "unshare": ("EPERM",),
        "exec-scratch": ("EACCES", "EPERM"),
        # controls: what the sandbox may do still works
        "write:ok.txt": ("ok",),
        "read:/usr/lib/os-release": ("ok",),
        # what the process was given
        "pdeathsig": ("9",),
        "no-new-privs": ("1",),
        "session-leader": ("True",),
        "ptrace": ("EPERM",),   # last: a traced process would stop at its next exec
    }
    drop_host_refused("sandbox-escape-probes-refused", want, ["io_uring", "unshare", "ptrace"])
    d = run_prog(env.policy("sbtest"), "sb_escape.py", list(want) + ["groups"])
    why = expect(d, "sbtest", end="exited", exit_code=0)
    if why:
        return why
    got = json.loads(d["out"])
    bad = ["%s -> %s" % (p, got.get(p)) for p, ok in want.items() if got.get(p) not in ok]
    uid = int(got["groups"].split("/")[1].split()[0])
    if got["groups"] != "%d/%d []" % (uid, uid) or not UID_BASE <= uid < UID_BASE + SLOTS:
        bad.append("identity: gid/uid groups = %s" % got["groups"])
    try:
        conn, _ = listener.accept()
        conn.close()
        bad.append("the loopback listener accepted a connection")
    except socket.timeout:
        pass
    listener.close()
    for path in (tmp_probe, "/etc/sgsb-probe"):
        if os.path.exists(path):
            bad.append("%s was created" % path)
            os.unlink(path)
    return "; ".join(bad) or None


def probe(policy, tenant, probes):
    """Run sb_escape.py with these probes: (results, why-not)."""
    d = run_prog(policy, "sb_escape.py", probes)
    why = expect(d, tenant, end="exited", exit_code=0)
    return (None, why) if why else (json.loads(d["out"]), None)


def mismatches(got, want):
    return ["%s -> %s" % (p, got.get(p)) for p, ok in want.items() if got.get(p) not in ok]


def udp_listeners():
    socks = []
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        s = socket.socket(family, socket.SOCK_DGRAM)
        s.bind((host, 0))
        s.setblocking(False)
        socks.append(s)
    return socks


def received(socks):
    got = []
    for s in socks:
        try:
            got.append("%r from %r" % s.recvfrom(64))
        except BlockingIOError:
            pass
        s.close()
    return got


def t_network_none(env):
    """No egress allowed: a network namespace of its own (nothing to reach,
    nothing of the host's to see) and TCP-only sockets."""
    return own_netns_tcp_only("sandbox-network-none-own-netns-tcp-only", env.policy("sbnet"),
                              ("EPERM", "ENETUNREACH"), ("EPERM", "ENETUNREACH", "EADDRNOTAVAIL"),
                              "the sandbox shares the host's network namespace")


def t_network_allowlist(env):
    """A TCP-only allowlist: a network namespace of its own all the same
    (the relay is the way out), and sockets limited to TCP (no UDP, no
    MPTCP past Landlock's TCP rules, no netlink)."""
    return own_netns_tcp_only("sandbox-network-allowlist-tcp-only-sockets", env.policy("sbnet", egress=TCP_ALLOW),
                              ("EPERM",), ("EPERM",),
                              "with an allowlist the sandbox shares the host's network namespace")


def own_netns_tcp_only(name, policy, udp, udp6, shared):
    """Case `name` under `policy` (tenant sbnet): UDP to the loopback
    listeners fails with one of `udp` / `udp6` and reaches none of them,
    MPTCP and netlink sockets are refused, and the network namespace is not
    the host's (else `shared` is the reason)."""
    listeners = udp_listeners()
    want = {
        "udp:%d" % listeners[0].getsockname()[1]: udp,
        "udp6:%d" % listeners[1].getsockname()[1]: udp6,
        "mptcp": ("EPERM",),
        "netlink": ("EPERM",),
    }
    drop_host_refused(name, want, ["mptcp", "netlink"])
    got, why = probe(policy, "sbnet", list(want) + ["netns"])
    leaked = received(listeners)
    if why:
        return why
    bad = mismatches(got, want)
    if got["netns"] == os.readlink("/proc/self/ns/net"):
        bad.append(shared)
    if leaked:
        bad.append("the loopback listeners received " + ", ".join(leaked))
    return "; ".join(bad) or None


def t_unix_socket(env):
    """A world-connectable pathname socket of root's: refused without
    allow_unix (seccomp), and absent from the sandbox's root with it."""
    path = "/tmp/sgsb-unix-%d.sock" % os.getpid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(path)
        os.chmod(path, 0o777)
        listener.listen(8)
        bad = []
        for allow, ok in ((False, ("EPERM",)), (True, ("ENOENT",))):
            got, why = probe(env.policy("sbunix", allow_unix=allow), "sbunix", ["unix:" + path])
            if why:
                return why
            if got["unix:" + path] not in ok:
                bad.append("allow_unix=%s: connect -> %s" % (allow, got["unix:" + path]))
        if not accepts_nothing(listener):
            bad.append("the host socket accepted a connection")
        return "; ".join(bad) or None
    finally:
        listener.close()
        os.unlink(path)


def slot_sysv_objects():
    """SysV shm segments and message queues owned by one of our slot uids."""
    found = []
    for kind in ("shm", "msg"):
        with open("/proc/sysvipc/" + kind) as f:
            header = f.readline().split()
            for line in f:
                row = dict(zip(header, line.split()))
                if UID_BASE <= int(row["uid"]) < UID_BASE + SLOTS:
                    found.append("%s id %s (uid %s)" % (kind, row.get("shmid") or row.get("msqid"), row["uid"]))
    return found


def t_sysv_ipc(env):
    """SysV objects die with the sandbox (an IPC namespace of its own)."""
    before = slot_sysv_objects()
    got, why = probe(env.policy("sbtest"), "sbtest", ["shm:%d" % (64 << 20), "msgq", "ipcns"])
    if why:
        return why
    bad = mismatches(got, {"shm:%d" % (64 << 20): ("ok",), "msgq": ("ok",)})
    if got["ipcns"] == os.readlink("/proc/self/ns/ipc"):
        bad.append("the sandbox shares the host's IPC namespace")
    left = [o for o in slot_sysv_objects() if o not in before]
    if left:
        bad.append("left behind: " + ", ".join(left))
    return "; ".join(bad) or None


def host_baseline(probes):
    """What this kernel and CPU do with the probes outside any sandbox, as
    an unprivileged uid like the sandbox's: a test asserts what the sandbox
    changes, never a property of the host."""
    with tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o777)
        out = subprocess.run([PYTHON, os.path.join(PROGRAMS, "sb_escape.py")] + list(probes), cwd=d,
                             user=65534, group=65534, extra_groups=[], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, timeout=60, check=True)
    return json.loads(out.stdout)


def drop_host_refused(case_name, want, probes):
    """Remove from `want` the probes this host refuses outside any sandbox
    (nothing for the sandbox to show there), with a SKIP line naming them."""
    host = host_baseline(probes)
    refused = {p: r for p, r in host.items() if r != "ok"}
    for p in refused:
        want.pop(p, None)
    if refused:
        report("SKIP", "%s: %s" % (case_name, ", ".join(sorted(refused))),
               "the host refuses these outside any sandbox (%s): not a test of the sandbox" %
               ", ".join("%s -> %s" % kv for kv in sorted(refused.items())))


def t_process_tricks(env):
    """clone(CLONE_FILES) without CLONE_THREAD and executable memfds are
    refused; a sealed non-executable memfd stays usable where the kernel
    has MFD_NOEXEC_SEAL (6.3+)."""
    want = {"clone-files": ("EPERM",), "memfd": ("EPERM",)}
    host = host_baseline(["clone-files", "memfd", "memfd-noexec"])
    if host["clone-files"] != "ok" or host["memfd"] != "ok":
        return "SKIP the host itself refuses: %s" % host
    # The control: the sandbox leaves it as the host has it ("ok", or
    # EINVAL on kernels without MFD_NOEXEC_SEAL).
    want["memfd-noexec"] = (host["memfd-noexec"],)
    got, why = probe(env.policy("sbtest"), "sbtest", list(want))
    return why or "; ".join(mismatches(got, want)) or None


def t_int80(env):
    """The i386 syscall ABI answers ENOSYS inside the sandbox, where the
    host allows it at all (some hosts kill or lack int 0x80 already)."""
    host = host_baseline(["int80"])["int80"]
    if host == "n/a":
        return "SKIP not an x86_64 host"
    if host != "ok":
        return "SKIP int 0x80 outside any sandbox already gives %s on this host: nothing for the sandbox to change" % host
    got, why = probe(env.policy("sbtest"), "sbtest", ["int80"])
    return why or ("int80 -> %s, want ENOSYS" % got["int80"] if got["int80"] != "ENOSYS" else None)


def t_neighbour(env, other_tenant):
    """A second sandbox (same or other tenant) cannot reach the first's scratch."""
    pol_a = env.policy("sbtest")
    pol_b = env.policy(other_tenant)
    before = set(glob.glob(os.path.join(env.scratch_root, "sbtest", "*")))
    result = {}
    a = in_thread(result, "a", pol_a, "sb_sleeper.py", ["4"], timeout_ms=20000)
    victim = None
    for _ in range(200):
        new = [p for p in glob.glob(os.path.join(env.scratch_root, "sbtest", "*")) if p not in before]
        if new and os.path.exists(os.path.join(new[0], "secret.txt")):
            victim = new[0]
            break
        time.sleep(0.02)
    if not victim:
        a.join()
        return "the first sandbox never wrote its file"
    probes = ["read:%s/secret.txt" % victim, "list:%s" % victim, "write:%s/planted" % victim,
              "list:%s" % os.path.dirname(victim)]
    d = run_prog(pol_b, "sb_escape.py", probes)
    a.join()
    why = expect(d, other_tenant, end="exited", exit_code=0) or expect(finished(result["a"]), "sbtest", end="exited")
    if why:
        return why
    got = json.loads(d["out"])
    # The neighbour's scratch is not in this sandbox's root at all; its
    # tenant directory there holds this sandbox's own scratch only.
    refused = ("EACCES", "EPERM", "ENOENT")
    bad = ["%s -> %s" % (p, r) for p, r in got.items()
           if r not in refused and not (p.startswith("list:") and r == "ok")]
    if os.path.exists(os.path.join(victim, "planted")):
        bad.append("a file was planted in the neighbour's scratch")
    return "; ".join(bad) or None


def t_fetch(env):
    d = run_prog(env.policy("sbtest"), "sb_fetch.py", fetch=["out.txt", "link", "fifo", "sub/inner.txt", "../x"])
    why = expect(d, "sbtest", end="exited", exit_code=0)
    if why:
        return why
    got = {f["path"]: f["data"] for f in d["fetched"]}
    want = {"out.txt": "result", "link": None, "fifo": None, "sub/inner.txt": "inner", "../x": None}
    return None if got == want else "fetched %r" % got


def t_concurrent(env):
    pol = env.policy("sbtest")
    results = [None] * 6
    threads = [in_thread(results, i, pol, "sb_whoami.py") for i in range(len(results))]
    for t in threads:
        t.join()
    for d in results:
        why = expect(finished(d), "sbtest", end="exited", exit_code=0)
        if why:
            return why
    uids = [d["out"].split()[0] for d in results]
    if len(set(uids)) != len(uids):
        return "sandboxes shared a uid: %s" % uids
    if any(not UID_BASE <= int(u) < UID_BASE + SLOTS for u in uids):
        return "uid outside the slot range: %s" % uids
    return None


def t_not_found(env):
    d = run(env.policy("sbtest"), ["no-such-command"])
    if d["rc"] != -2 or d["helper_rc"] != 2 or "execve" not in d["detail"]:
        return "rc %s, detail %r" % (d["rc"], d["detail"])
    left = leftovers(d, "sbtest")
    return "left behind: " + ", ".join(left) if left else None


def t_disk_full(env):
    """The request's own files do not fit the scratch (files.scratch_mb):
    a platform error, nothing left behind."""
    pol = env.policy("sbfull", files={"scratch_mb": 1})
    big = os.path.join(env.dir, "big.bin")
    with open(big, "wb") as f:
        f.write(b"\0" * (2 << 20))
    cmd = [HELPER, "--policy", pol, "--file", "big.bin=" + big, "--", "/usr/bin/true"]
    p = subprocess.run(cmd, capture_output=True, env=dict(os.environ, SANDGUARD_UID_BASE=str(UID_BASE)))
    d = json.loads(p.stdout)
    if d["rc"] != -28 or p.returncode != 2:
        return "rc %s, detail %r" % (d["rc"], d["detail"])
    if os.listdir(os.path.join(env.scratch_root, "sbfull")):
        return "scratch left behind"
    return None


def t_rlimit_fallback(env):
    """With no usable pids/memory controller the limits fall back to rlimits:
    hide the v1 mounts in a private mount namespace and run the hogs."""
    if not {"cpu", "memory", "pids"} <= set(V1) or not shutil.which("unshare"):
        return "SKIP the controllers are not on cgroup v1 here"
    script = "umount %s && exec \"$@\"" % " ".join(sorted(set(V1[c] for c in ("cpu", "memory", "pids"))))
    env_vars = dict(os.environ, SANDGUARD_UID_BASE=str(UID_BASE))
    bad = []
    for tenant, limits, program in (("sbmem", {"memory_mb": 64}, "sb_memory_hog.py"),
                                    ("sbfork", {"max_tasks": 32}, "sb_fork_bomb.py")):
        cmd = ["unshare", "-m", "sh", "-c", script, "sh", HELPER, "--policy", env.policy(tenant, **limits),
               "--timeout-ms", "10000", "--file", "prog.py=" + os.path.join(PROGRAMS, program),
               "--", PYTHON, "prog.py"]
        p = subprocess.run(cmd, capture_output=True, env=env_vars, timeout=60)
        d = json.loads(p.stdout)
        # An rlimit makes the allocation or the fork fail inside the program:
        # bounded, though not attributable like a cgroup OOM or pids event.
        why = expect(d, tenant, end="exited", exit_code=1)
        want = "MemoryError" if program == "sb_memory_hog.py" else "BlockingIOError"
        if not why and want not in d["err"]:
            why = "no %s in stderr: %r" % (want, d["err"][-200:])
        if why:
            bad.append("%s: %s" % (program, why))
    return "; ".join(bad) or None


def t_io_limits(env):
    """limits.io_*: io.max on cgroup v2 where the io controller is offered,
    else the v1 blkio throttle files, on the disk behind /usr; read while
    the sandbox runs."""
    dev = os.stat("/usr").st_dev
    if os.major(dev) == 0:
        return "SKIP /usr is on a virtual filesystem here: no block device to throttle"
    pol = env.policy("sbtest", io_read_mbps=10, io_read_iops=300)
    result = {}
    t = in_thread(result, "d", pol, "sb_sleeper.py", ["2"], timeout_ms=20000)
    found = None
    base = os.path.basename(CG_ROOT)
    for _ in range(400):
        for path in glob.glob(os.path.join(CG_ROOT, "sbtest", "*", "io.max")):
            with open(path) as f:
                text = f.read()
            if "rbps=10485760" in text and "riops=300" in text:
                found = "v2 io.max: " + text.strip()
        if "blkio" in V1:
            for path in glob.glob(os.path.join(V1["blkio"], base, "sbtest", "*",
                                               "blkio.throttle.read_bps_device")):
                with open(path) as f:
                    bps = f.read()
                with open(path.replace("read_bps", "read_iops")) as f:
                    iops = f.read()
                if " 10485760" in bps and " 300" in iops:
                    found = "v1 blkio: " + bps.strip() + ", " + iops.strip()
        if found or not t.is_alive():
            break
        time.sleep(0.01)
    t.join()
    why = expect(finished(result["d"]), "sbtest", end="exited", exit_code=0)
    if why:
        return why
    if not found:
        return "no IO limit found on the sandbox's cgroups while it ran"
    print("# IO limits: %s" % found, flush=True)
    return None


def cap_sys_resource():
    """Whether this process may lower OOM scores (CAP_SYS_RESOURCE, bit 24)."""
    with open("/proc/self/status") as f:
        eff = [line.split()[1] for line in f if line.startswith("CapEff:")][0]
    return bool(int(eff, 16) & (1 << 24))


def t_oom_score(env):
    """Tenant code keeps the OOM score of whoever started the sandbox: no
    process of the sandbox may hand it a score the OOM killer skips (-1000
    is inherited by every fork, and would leave a memory hog unkillable by
    its own cgroup's OOM killer and by the node's). The helper starts at
    250 (raising needs no privilege), so inheritance is visible. Decisive
    where the executor holds CAP_SYS_RESOURCE (production nodes, the VMs):
    without it a write of a lower score fails anyway."""
    policy = env.policy("sbtest")
    cmd = [HELPER, "--policy", policy, "--", "/bin/sh", "-c", "cat >/dev/null; exec sleep 3"]
    env_vars = dict(os.environ, SANDGUARD_UID_BASE=str(UID_BASE))

    def score_250():
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("250")
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env_vars, preexec_fn=score_250)
    seen = {}
    end = time.monotonic() + 10
    while not seen and time.monotonic() < end and p.poll() is None:
        for pid in [s.split("(")[0] for s in slot_processes()]:
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    if not f.read().startswith(b"sleep"):
                        continue
                with open("/proc/%s/status" % pid) as f:
                    ppid = [line.split()[1] for line in f if line.startswith("PPid:")][0]
                for who, q in (("main", pid), ("init", ppid)):
                    with open("/proc/%s/oom_score_adj" % q) as f:
                        seen[who] = int(f.read())
            except (OSError, IndexError):
                seen = {}
        time.sleep(0.05)
    out, err = p.communicate(timeout=60)
    if not seen:
        return "never saw the sandbox's main (helper rc %s: %s)" % (p.returncode, err.decode()[-200:])
    if seen != {"main": 250, "init": 250}:
        return "OOM scores %s, want 250 (the helper's) for both" % seen
    print("# OOM scores inherited unchanged: %s (%s)" % (
        seen, "decisive: CAP_SYS_RESOURCE held" if cap_sys_resource()
        else "not decisive here: no CAP_SYS_RESOURCE, so a lower score could not be set anyway"), flush=True)
    why = expect(json.loads(out), "sbtest", end="exited", exit_code=0)
    return why


def t_require_agent(env):
    d = run(env.policy("sbagent", require_agent=True), ["/usr/bin/true"])
    if d["rc"] != -107 or "agent" not in d["detail"]:
        return "rc %s, detail %r" % (d["rc"], d["detail"])
    return None


def main():
    if os.geteuid() != 0:
        for name in ("sandbox",):
            report("SKIP", name, "needs root")
        return 0
    if not os.access(HELPER, os.X_OK):
        report("FAIL", "sandbox-helper", "%s is not built" % HELPER)
        return 1
    if not os.access(PYTHON, os.X_OK):
        report("SKIP", "sandbox", "%s missing" % PYTHON)
        return 0
    # Two runs of this test at once (several people running the suite)
    # would see each other's sandboxes in the slot-uid check: take turns.
    os.makedirs("/run/sandguard", exist_ok=True)
    turn = open("/run/sandguard/test-20-sandbox.lock", "w")
    fcntl.flock(turn, fcntl.LOCK_EX)
    env = Env()
    try:
        case("sandbox-normal-exit-stdout-stderr", t_normal, env)
        case("sandbox-stdin-5MB-delivered", t_stdin_large, env)
        case("sandbox-hang-timeout", timeout_case, env, "sb_hang.py")
        case("sandbox-close-stdout-sleep-timeout", timeout_case, env, "sb_close_stdout_sleep.py")
        case("sandbox-daemonized-grandchild-killed", t_daemon, env)
        case("sandbox-child-holding-pipe-early-exit", t_hold_pipe, env)
        case("sandbox-stdout-100MB-oversize-bounded-rss", t_stdout_flood, env)
        case("sandbox-stderr-1GiB-capped-bounded-rss", t_stderr_flood, env)
        case("sandbox-memory-hog-oom", t_memory_hog, env)
        case("sandbox-oom-score-inherited-unchanged", t_oom_score, env)
        case("sandbox-fork-bomb-bounded", t_fork_bomb, env)
        case("sandbox-cpu-quota", t_cpu_quota, env)
        case("sandbox-env-has-no-secrets", t_env, env)
        case("sandbox-escape-probes-refused", t_escape, env)
        case("sandbox-network-none-own-netns-tcp-only", t_network_none, env)
        case("sandbox-network-allowlist-tcp-only-sockets", t_network_allowlist, env)
        case("sandbox-unix-pathname-socket-needs-allow-unix", t_unix_socket, env)
        case("sandbox-sysv-ipc-gone-after-batch", t_sysv_ipc, env)
        case("sandbox-clone-files-memfd-refused", t_process_tricks, env)
        case("sandbox-int80-enosys", t_int80, env)
        case("sandbox-neighbour-scratch-same-tenant", t_neighbour, env, "sbtest")
        case("sandbox-neighbour-scratch-other-tenant", t_neighbour, env, "sbother")
        case("sandbox-fetch-no-symlinks-no-fifos", t_fetch, env)
        case("sandbox-concurrent-distinct-uids", t_concurrent, env)
        case("sandbox-command-not-found-platform-error", t_not_found, env)
        case("sandbox-disk-full-platform-error", t_disk_full, env)
        case("sandbox-rlimit-fallback-without-controllers", t_rlimit_fallback, env)
        case("sandbox-io-limits-applied", t_io_limits, env)
        case("sandbox-require-agent-without-agent", t_require_agent, env)
    finally:
        env.cleanup()
    return exit_code()


if __name__ == "__main__":
    sys.exit(main())

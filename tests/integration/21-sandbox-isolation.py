#!/usr/bin/python3
"""The sandbox launcher (sandbox_run) on the real kernel, as root: what a
sandbox can reach. Escape probes, the network (none, an allowlist, unix
sockets), System V IPC, process tricks, int 0x80, a neighbour's scratch,
the environment. Prints one PASS/FAIL/SKIP line per case; every case also
checks that the sandbox left nothing behind (sgsandbox.py, the harness
shared with 20-sandbox.py, which checks limits and lifecycle)."""
import glob
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgtest import accepts_nothing, report, uid_base  # noqa: E402
import sgsandbox  # noqa: E402

# A slot range of our own (20-sandbox uses 61000, 37-warm-forker 67000, each
# 256 uids): "no process left with a slot uid" sees only our sandboxes.
sgsandbox.UID_BASE = UID_BASE = uid_base(67300)
from sgsandbox import (  # noqa: E402
    Env,
    HELPER,
    PROGRAMS,
    PYTHON,
    SLOTS,
    TCP_ALLOW,
    expect,
    finished,
    in_thread,
    run,
    run_prog,
)


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


CASES = [
    ("sandbox-env-has-no-secrets", t_env),
    ("sandbox-escape-probes-refused", t_escape),
    ("sandbox-network-none-own-netns-tcp-only", t_network_none),
    ("sandbox-network-allowlist-tcp-only-sockets", t_network_allowlist),
    ("sandbox-unix-pathname-socket-needs-allow-unix", t_unix_socket),
    ("sandbox-sysv-ipc-gone-after-batch", t_sysv_ipc),
    ("sandbox-clone-files-memfd-refused", t_process_tricks),
    ("sandbox-int80-enosys", t_int80),
    ("sandbox-neighbour-scratch-same-tenant", t_neighbour, "sbtest"),
    ("sandbox-neighbour-scratch-other-tenant", t_neighbour, "sbother"),
]


if __name__ == "__main__":
    sys.exit(sgsandbox.main("sandbox-isolation", "test-21-sandbox-isolation.lock", CASES))

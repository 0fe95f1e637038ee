#!/usr/bin/python3
"""Issue 13's escapes and weaknesses (and issue 12's UDP hole), each tried
from inside a sandbox twice: on the executor's own layers (no agent), and
with a private agent enforcing (fallback mode on this host). Every case
asserts the host side: the host's socket received nothing, the port is
still free, the host's file is unchanged, the neighbour's batch was ok.
Runs sandboxes through tests/helpers/sandbox_run with the probes of
tests/programs/sb_escape.py. Prints one PASS/FAIL/SKIP line per case and
mode."""
import ctypes
import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from sgagent import Agent  # noqa: E402
from sgtest import accepts_nothing, exit_code, report, uid_base  # noqa: E402

BUILD = os.environ.get("SANDGUARD_BUILD") or os.path.abspath("build")
SRC = os.environ.get("SANDGUARD_SRC") or os.path.abspath(os.path.join(HERE, "..", ".."))
HELPER = os.path.join(BUILD, "tests", "sandbox_run")
PROBES = os.path.join(SRC, "tests", "programs", "sb_escape.py")
PYTHON = "/usr/bin/python3"
UID_BASE = uid_base(61500)
TAG = "sgesc-%d" % os.getpid()


def free_port(kind=socket.SOCK_STREAM):
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class World:
    """Policies, host-side listeners and the way to run a probe, in one
    mode ("no agent" or "agent")."""

    def __init__(self, agent):
        self.agent = agent
        self.dir = agent.dir
        self.ro = os.path.join(self.dir, "ro")
        os.makedirs(self.ro, exist_ok=True)
        os.chmod(self.ro, 0o755)
        self.allowed_port = free_port()
        self.udp_port = free_port(socket.SOCK_DGRAM)
        with open(os.path.join(SRC, "policies", "default.json")) as f:
            self.base = json.load(f)
        allow_tcp = [{"cidr": "127.0.0.1/32", "port": self.allowed_port, "proto": "tcp"}]
        self.policies = {
            "esc-closed": {},
            "esc-unix": {"egress": {"allow_unix": True}},
            "esc-allow": {"egress": {"allow": allow_tcp}},
            "esc-listen": {"egress": {"allow": allow_tcp, "allow_listen": True}},
            # Listeners and no egress: a loopback of its own, no relay.
            "esc-listen-lo": {"egress": {"allow_listen": True}},
            "esc-udp": {"egress": {"allow": [{"cidr": "127.0.0.1/32", "port": self.udp_port,
                                              "proto": "udp"}]}},
            "esc-fill": {"limits": {"memory_mb": 256}, "files": {"scratch_mb": 64}},
            # A scratch larger than the memory limit: the fill meets the
            # memory cgroup first, because tmpfs pages are the sandbox's.
            "esc-fill-mem": {"limits": {"memory_mb": 64}, "files": {"scratch_mb": 1024}},
        }
        for tenant, extra in self.policies.items():
            self.write_policy(tenant, extra)

    def write_policy(self, tenant, extra):
        p = json.loads(json.dumps(self.base))
        p["tenant"] = tenant
        p["files"]["scratch_root"] = self.agent.scratch
        p["files"]["read_only"].append(self.ro)
        p["limits"]["timeout_ms"] = 20000
        for section, fields in extra.items():
            p[section].update(fields)
        with open(os.path.join(self.agent.policy_dir, tenant + ".json"), "w") as f:
            json.dump(p, f)

    def run(self, tenant, probes, with_agent):
        cmd = [HELPER, "--policy", os.path.join(self.agent.policy_dir, tenant + ".json")]
        if with_agent:
            cmd.append("--agent")
        cmd += ["--file", "probe.py=" + PROBES, "--", PYTHON, "probe.py"] + list(probes)
        env = dict(self.agent.env, SANDGUARD_UID_BASE=str(UID_BASE))
        t0 = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, env=env, timeout=120)
        d = json.loads(p.stdout)
        d["elapsed_ms"] = (time.monotonic() - t0) * 1000
        if d.get("rc") != 0:
            raise AssertionError("platform error %s: %s" % (d.get("rc"), d.get("detail")))
        if with_agent and not d["agent_enforced"]:
            raise AssertionError("the agent did not take the sandbox")
        if d["end"] in ("killed_by_agent", "oom"):
            d["probes"] = {}
            return d
        if d["end"] != "exited" or d["exit_code"] != 0:
            raise AssertionError("probe program ended %s/%s: %s" % (d["end"], d["exit_code"], d["err"][-300:]))
        d["probes"] = json.loads(d["out"])
        return d


def while_running(background, body):
    """body() while background(stop) runs in a thread until stop is set."""
    stop = threading.Event()
    t = threading.Thread(target=background, args=(stop,))
    t.start()
    try:
        return body()
    finally:
        stop.set()
        t.join()


def contained(d, got, ok):
    """A probe result is contained: one of `ok`, or the agent killed the
    sandbox for it."""
    return d["end"] == "killed_by_agent" or got in ok


def drain(sock):
    got = []
    sock.setblocking(False)
    while True:
        try:
            got.append(sock.recv(64))
        except (BlockingIOError, OSError):
            return got


# ---- the escapes -------------------------------------------------------

def e1_unix_dgram(w, agent):
    """socketpair(AF_UNIX, SOCK_DGRAM) + sendto a host pathname socket, also
    after connect(AF_UNSPEC): the host's sockets are not in the sandbox's
    root (and its abstract names not in its network namespace)."""
    path = os.path.join("/tmp", TAG + ".dgram")
    host = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    host.bind(path)
    os.chmod(path, 0o777)
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    abstract.bind("\0" + TAG + "-log")
    try:
        bad = []
        for tenant in ("esc-closed", "esc-unix"):
            d = w.run(tenant, ["unix-dgram:" + path, "unix-unspec:" + path,
                               "abstract-send:" + TAG + "-log"], agent)
            for probe, got in d["probes"].items():
                if not contained(d, got, ("ENOENT", "ECONNREFUSED", "EPERM")):
                    bad.append("%s %s -> %s" % (tenant, probe, got))
        leaked = drain(host) + drain(abstract)
        if leaked:
            bad.append("the host sockets received %r" % leaked)
        return "; ".join(bad) or None
    finally:
        host.close()
        abstract.close()
        os.unlink(path)


def e2_fast_open(w, agent):
    """TCP Fast Open to a destination the allowlist does not name."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    try:
        d = w.run("esc-allow", ["tfo:%d" % port, "tfo-connect:%d" % port], agent)
        bad = ["%s -> %s" % (p, g) for p, g in d["probes"].items() if not contained(d, g, ("EPERM",))]
        if not accepts_nothing(listener):
            bad.append("the host listener accepted a connection")
        return "; ".join(bad) or None
    finally:
        listener.close()


def e3_host_ports(w, agent):
    """listen() without bind() takes no port: refused, and where the policy
    allows listeners, the port is the sandbox's own (free on the host)."""
    bad = []
    d = w.run("esc-allow", ["listen-auto"], agent)
    if not contained(d, d["probes"].get("listen-auto"), ("EPERM",)):
        bad.append("listen without allow_listen -> %s" % d["probes"].get("listen-auto"))
    d = w.run("esc-listen", ["listen-auto"], agent)
    got = d["probes"].get("listen-auto", "")
    if d["end"] != "killed_by_agent":
        if not got.isdigit():
            return "listen with allow_listen -> %s" % got
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind(("127.0.0.1", int(got)))   # the port is still the host's to take
        except OSError as e:
            bad.append("the sandbox's port %s is taken on the host: %s" % (got, e))
        finally:
            s.close()
    return "; ".join(bad) or None


def knocker(port, connected, refused):
    """A background(stop) that keeps connecting to the host's 127.0.0.1:port,
    noting what it read from each connection, and each refusal."""
    def knock(stop):
        while not stop.is_set():
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(0.2)
            try:
                s.connect(("127.0.0.1", port))
                connected.append(s.recv(64))
            except OSError:
                refused.append(1)
            finally:
                s.close()
            time.sleep(0.05)
    return knock


def e4_inbound(w, agent):
    """A listener in the sandbox is unreachable from the host."""
    port = free_port()
    refused, connected = [], []
    d = while_running(knocker(port, connected, refused),
                      lambda: w.run("esc-listen", ["accept:%d:1500" % port], agent))
    bad = []
    if not contained(d, d["probes"].get("accept:%d:1500" % port), ("none",)):
        bad.append("the sandbox's listener -> %s" % d["probes"].get("accept:%d:1500" % port))
    if connected:
        bad.append("the host reached the sandbox's listener: %r" % connected)
    if not refused:
        bad.append("the host never tried")
    return "; ".join(bad) or None


def loopback_server(w, agent):
    """Where listeners are allowed, a server and its client in one sandbox
    talk over its own loopback (127.0.0.1 and ::1), with or without a
    relay; where they are not, bind or listen is refused. The host cannot
    reach such a listener: escape-4 for the relay's namespace, here for
    the loopback-only one."""
    bad = []
    for tenant in ("esc-listen-lo", "esc-listen"):
        d = w.run(tenant, ["loopback-echo:127.0.0.1", "loopback-echo:::1"], agent)
        if d["end"] == "killed_by_agent":
            bad.append("%s: killed by the agent" % tenant)
            continue
        if d["probes"].get("loopback-echo:127.0.0.1") != "echoed":
            bad.append("%s over 127.0.0.1 -> %s" % (tenant, d["probes"].get("loopback-echo:127.0.0.1")))
        if d["probes"].get("loopback-echo:::1") not in ("echoed", "EADDRNOTAVAIL", "EAFNOSUPPORT"):
            bad.append("%s over ::1 -> %s" % (tenant, d["probes"].get("loopback-echo:::1")))
    d = w.run("esc-closed", ["loopback-echo:127.0.0.1"], agent)
    if not contained(d, d["probes"].get("loopback-echo:127.0.0.1"), ("EPERM", "EACCES")):
        bad.append("without allow_listen -> %s" % d["probes"].get("loopback-echo:127.0.0.1"))
    port = free_port()
    reached, refused = [], []
    d = while_running(knocker(port, reached, refused),
                      lambda: w.run("esc-listen-lo", ["accept:%d:1500" % port], agent))
    if d["probes"].get("accept:%d:1500" % port) != "none" or reached or not refused:
        bad.append("the host reached the loopback-only listener (or never tried): %s %r" %
                   (d["probes"].get("accept:%d:1500" % port), reached))
    return "; ".join(bad) or None


def e5_abstract_squat(w, agent):
    """A host service's abstract name: the sandbox binds the same name in
    its own network namespace and receives none of the host's datagrams."""
    name = TAG + "-svc"
    service = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    service.bind("\0" + name)
    sent = []

    def client(stop):
        c = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        c.setblocking(False)  # the service reads only at the end
        while not stop.is_set() and len(sent) < 10:
            try:
                c.sendto(b"for the service", "\0" + name)
                sent.append(1)
            except OSError:
                pass
            time.sleep(0.05)
        c.close()
    d = while_running(client, lambda: w.run("esc-unix", ["abstract-recv:%s:1500" % name], agent))
    got = d["probes"].get("abstract-recv:%s:1500" % name)
    received = len(drain(service))
    service.close()
    bad = []
    if not contained(d, got, ("received 0",)):
        bad.append("the sandbox -> %s" % got)
    if received != len(sent) or not sent:
        bad.append("the host service received %d of %d datagrams" % (received, len(sent)))
    return "; ".join(bad) or None


def e6_scratch_fill(w, agent):
    """posix_fallocate of 8 GiB hits the sandbox's own scratch bound; the
    neighbour's batch, running at the same time, is ok."""
    results = {}

    def neighbour():
        time.sleep(0.2)
        results["n"] = w.run("esc-closed", ["hostname"], agent)
    t = threading.Thread(target=neighbour)
    t.start()
    d = w.run("esc-fill", ["fallocate:8192", "fallocate:128", "fallocate:16"], agent)
    t.join()
    bad = []
    # Past limits.file_size_mb (RLIMIT_FSIZE) ...
    if not contained(d, d["probes"].get("fallocate:8192"), ("EFBIG", "ENOSPC", "ENOMEM")):
        bad.append("8 GiB fallocate -> %s" % d["probes"].get("fallocate:8192"))
    # ... and past files.scratch_mb (64) while under it.
    if not contained(d, d["probes"].get("fallocate:128"), ("ENOSPC", "ENOMEM")):
        bad.append("128 MiB fallocate in a 64 MiB scratch -> %s" % d["probes"].get("fallocate:128"))
    if not contained(d, d["probes"].get("fallocate:16"), ("ok",)):
        bad.append("a small file after it -> %s" % d["probes"].get("fallocate:16"))
    n = results.get("n")
    if not n or n["end"] != "exited" or n["probes"].get("hostname") != "sandbox":
        bad.append("the neighbour's run was not ok: %s" % n)
    # The scratch's pages are charged to the sandbox's memory cgroup: with
    # a scratch larger than memory_mb, a 200 MiB fill ends at 64 MiB.
    d = w.run("esc-fill-mem", ["fallocate:200"], agent)
    if d["end"] not in ("oom", "killed_by_agent") and \
            d["probes"].get("fallocate:200") not in ("ENOMEM", "ENOSPC"):
        bad.append("a 200 MiB fill with memory_mb 64 -> %s %s" % (d["end"], d["probes"]))
    return "; ".join(bad) or None


def w_limits_and_views(w, agent):
    """The weaknesses: open files bounded; utime of a host file outside the
    scratch; the node name; kill(pid, 0) enumeration; dlopen and the loader
    from the (noexec) scratch."""
    target = os.path.join(w.ro, "world-writable")
    with open(target, "w") as f:
        f.write("x")
    os.chmod(target, 0o666)
    before = os.stat(target).st_mtime_ns
    libs = sorted(glob.glob("/usr/lib/*-linux-gnu/libz.so.1") + glob.glob("/usr/lib/*-linux-gnu/libm.so.6"))
    probes = ["nofile:5000", "utime:" + target, "hostname", "pids:65536", "ldso:/usr/bin/true"]
    if libs:
        probes.append("dlopen:" + libs[0])
    d = w.run("esc-closed", probes, agent)
    got = d["probes"]
    if d["end"] == "killed_by_agent":
        return None if os.stat(target).st_mtime_ns == before else "utime changed the host file"
    bad = []
    limit = w.base["limits"]["open_files"]
    if not limit - 16 <= int(got["nofile:5000"]) < limit:
        bad.append("opened %s files (open_files %d)" % (got["nofile:5000"], limit))
    if got["utime:" + target] not in ("EROFS", "EACCES", "EPERM"):
        bad.append("utime -> %s" % got["utime:" + target])
    if os.stat(target).st_mtime_ns != before:
        bad.append("the host file's mtime changed")
    if got["hostname"] in (socket.gethostname(), "ok"):
        bad.append("the node name is visible: %s" % got["hostname"])
    host_pids = len([p for p in os.listdir("/proc") if p.isdigit()])
    if int(got["pids:65536"]) > 8:
        bad.append("kill(pid, 0) finds %s pids (the host has %d)" % (got["pids:65536"], host_pids))
    if got["ldso:/usr/bin/true"] == "ok":
        bad.append("the loader ran a program from the scratch")
    if libs and got["dlopen:" + libs[0]] == "ok":
        bad.append("dlopen of a library copied into the scratch worked")
    return "; ".join(bad) or None


def w_inotify(w, agent):
    """inotify is refused (EPERM), where the host allows it: a watch on a
    file that sandboxes share read-only (/usr, the programs) would report
    every other sandbox's opens and reads of it, across tenants."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_CLOEXEC)
    if fd < 0:
        return "SKIP inotify_init1 fails outside any sandbox too (errno %d)" % ctypes.get_errno()
    os.close(fd)
    d = w.run("esc-closed", ["inotify:/usr/bin,/tmp"], agent)
    got = d["probes"].get("inotify:/usr/bin,/tmp", "")
    return None if got == "EPERM" else "inotify in the sandbox -> %r, want EPERM" % got


def w_deep_tree(w, agent):
    """A tree 8,600 directories deep: the run is ok, and the teardown (an
    unmount) leaves nothing."""
    d = w.run("esc-closed", ["deep:8600"], agent)
    if not contained(d, d["probes"].get("deep:8600"), ("made",)):
        return "deep:8600 -> %s" % d["probes"].get("deep:8600")
    left = os.path.exists(d["scratch"])
    print("# deep tree (%s): run %d ms, launch and teardown %d ms" % (
        "agent" if agent else "no agent", d["wall_ms"], d["elapsed_ms"] - d["wall_ms"]), flush=True)
    return "scratch left behind" if left else None


def i12_udp(w, agent):
    """Issue 12 item 6: a policy with a UDP allow rule, a sandbox the agent
    may not know: no datagram reaches any host socket, allowed or not."""
    allowed = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    allowed.bind(("127.0.0.1", w.udp_port))
    other = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    other.bind(("127.0.0.1", 0))
    try:
        probes = ["udp-to:127.0.0.1:%d" % w.udp_port, "udp-to:127.0.0.1:%d" % other.getsockname()[1],
                  "udp-to:192.0.2.1:9"]
        d = w.run("esc-udp", probes, agent)
        leaked = drain(allowed) + drain(other)
        bad = ["the host received %r" % leaked] if leaked else []
        return "; ".join(bad) or None
    finally:
        allowed.close()
        other.close()


def relay_control(w, agent):
    """The control: the allowed destination is reachable through the relay,
    and the host's listener gets the data; a port the policy does not name
    is not."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", w.allowed_port))
    listener.listen(8)
    got = []

    def serve(stop):
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                c, _ = listener.accept()
                c.settimeout(2)
                got.append(c.recv(64))
                c.close()
            except OSError:
                pass
    other = free_port()
    try:
        d = while_running(serve, lambda: w.run("esc-allow", ["tcp:%d" % w.allowed_port,
                                                             "tcp:%d" % other], agent))
    finally:
        listener.close()
    bad = []
    if d["probes"].get("tcp:%d" % w.allowed_port) != "ok" or got != [b"leak"]:
        bad.append("allowed destination: %s, host got %r" % (d["probes"].get("tcp:%d" % w.allowed_port), got))
    if d["probes"].get("tcp:%d" % other) not in ("ECONNREFUSED", "EPERM", "EACCES", "ENETUNREACH"):
        bad.append("port not in the allowlist -> %s" % d["probes"].get("tcp:%d" % other))
    return "; ".join(bad) or None


CASES = [
    ("escape-1-unix-dgram-socketpair", e1_unix_dgram),
    ("escape-2-tcp-fast-open", e2_fast_open),
    ("escape-3-host-ports", e3_host_ports),
    ("escape-4-inbound-listener", e4_inbound),
    ("loopback-server-and-client-in-one-sandbox", loopback_server),
    ("escape-5-abstract-socket-squat", e5_abstract_squat),
    ("escape-6-scratch-fill-neighbour-ok", e6_scratch_fill),
    ("weakness-nofile-utime-nodename-pids-dlopen", w_limits_and_views),
    ("weakness-inotify-refused", w_inotify),
    ("weakness-deep-scratch-tree", w_deep_tree),
    ("issue12-udp-allow-rule-no-udp-anywhere", i12_udp),
    ("relay-allowed-destination-reachable", relay_control),
]


def main():
    if os.geteuid() != 0:
        report("SKIP", "escapes", "needs root")
        return 0
    if not os.access(HELPER, os.X_OK):
        report("FAIL", "escapes", "%s is not built" % HELPER)
        return 1
    agent = Agent({}, name="esc")
    try:
        w = World(agent)
        only = sys.argv[1:]
        for mode in ("no agent", "agent"):
            with_agent = mode == "agent"
            if with_agent and not agent.start():
                report("SKIP", "escapes (agent)", "the agent does not start here: %s" %
                       open(os.path.join(agent.dir, "agent.log")).read()[-300:])
                break
            for name, fn in CASES:
                if only and name not in only:
                    continue
                try:
                    why = fn(w, with_agent)
                except Exception as e:  # a broken case is that case's failure
                    why = "%s: %s" % (type(e).__name__, e)
                report("FAIL" if why else "PASS", "%s (%s)" % (name, mode), why or "")
    finally:
        agent.cleanup()
    return exit_code()


if __name__ == "__main__":
    sys.exit(main())

"""What every Python suite and benchmark shares: the PASS/FAIL/SKIP line
protocol of tests/run-integration.sh and tests/run-all.sh, and the host's
cgroup mounts (found in /proc/self/mountinfo, never assumed).

Suites put this directory on sys.path:
    sys.path.insert(0, os.path.join(SRC, "tests", "lib"))
"""
import fcntl
import json
import os
import socket
import subprocess
import time

failures = 0
passes = 0
skips = 0


def report(status, name, why=""):
    """One result line: status is PASS, FAIL or SKIP."""
    global failures, passes, skips
    if status == "FAIL":
        failures += 1
    elif status == "PASS":
        passes += 1
    else:
        skips += 1
    print("%s: %s%s" % (status, name, ": " + why if why else ""), flush=True)


def check(ok, name, why=""):
    """PASS when ok, else FAIL with why. Returns ok."""
    report("PASS" if ok else "FAIL", name, "" if ok else why)
    return ok


def skip(name, why):
    report("SKIP", name, why)


def accepts_nothing(listener, seconds=0.3):
    """Whether a listening socket has no connection waiting (for a test
    that must show the host side received nothing)."""
    listener.settimeout(seconds)
    try:
        listener.accept()[0].close()
        return False
    except OSError:  # socket.timeout
        return True


def exit_code():
    """What a suite exits with: 1 if anything failed."""
    return 1 if failures else 0


def lock_held(path):
    """Whether someone holds an flock on `path` (taken and given back at
    once when free); False when there is no such file."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def uid_base(default):
    """A suite's slot uid range: its default, moved by
    $SANDGUARD_TEST_UID_SHIFT so that two checkouts can run the same suite
    at once on one machine without seeing each other's slot processes."""
    return default + int(os.environ.get("SANDGUARD_TEST_UID_SHIFT", "0"))


def free_port():
    """A TCP port free on loopback right now (for a server a test starts)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _mounts():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            yield left.split()[4], right.split()


def cgroup2_mount():
    """The cgroup v2 mount point: /sys/fs/cgroup on pure v2 nodes,
    /sys/fs/cgroup/unified on hybrid ones."""
    for point, fs in _mounts():
        if fs[0] == "cgroup2":
            return point
    raise RuntimeError("no cgroup2 mount in /proc/self/mountinfo")


def ensure_bpffs(point="/sys/fs/bpf"):
    """Mount bpffs at `point` where nothing is mounted there yet, as the
    agent does at its start (a freshly booted node without systemd has only
    sysfs's empty directory, where no pin root can be made). Returns None,
    or why it cannot be had."""
    if any(p == point and fs[0] == "bpf" for p, fs in _mounts()):
        return None
    r = subprocess.run(["mount", "-t", "bpf", "-o", "mode=0700", "bpf", point],
                       capture_output=True, text=True)
    return None if r.returncode == 0 else "no bpffs at %s and mounting one failed: %s" % (
        point, r.stderr.strip())


def cgroup_v1_mounts():
    """{controller: mount point} of the v1 hierarchies (hybrid nodes)."""
    found = {}
    for point, fs in _mounts():
        if fs[0] == "cgroup":
            for opt in fs[2].split(","):
                found.setdefault(opt, point)
    return {c: p for c, p in found.items() if c in ("pids", "memory", "cpu", "cpuacct", "cpuset", "io", "blkio")}


def tenant_memory_dir(cgroot, tenant):
    """A tenant's cgroup in the memory hierarchy, its limit file and the
    value that lifts the limit: the v1 mirror on hybrid nodes, the v2 tree
    otherwise."""
    v1 = cgroup_v1_mounts().get("memory")
    if v1:
        return os.path.join(v1, os.path.basename(cgroot), tenant), "memory.limit_in_bytes", "-1"
    return os.path.join(cgroot, tenant), "memory.max", "max"


def wait_tenant_memory_dir(cgroot, tenant, timeout_s=30):
    """tenant_memory_dir(), once a sandbox of the tenant exists and the
    tenant's limit file is there. The sandbox's v2 directory comes before
    the v1 mirrors on hybrid nodes, so waiting for a sandbox alone raced
    the v1 tenant directory (45-attribution in CI: no such
    memory.limit_in_bytes)."""
    tdir, limit, unlimited = tenant_memory_dir(cgroot, tenant)
    deadline = time.monotonic() + timeout_s
    while not (sandbox_cgroups(cgroot, tenant) and os.path.exists(os.path.join(tdir, limit))) \
            and time.monotonic() < deadline:
        time.sleep(0.02)
    return tdir, limit, unlimited


def kill_and_rmdir(path, tries=100):
    """Empty one cgroup (cgroup.kill where there is one) and remove it."""
    try:
        with open(os.path.join(path, "cgroup.kill"), "w") as f:
            f.write("1")
    except OSError:
        pass
    for _ in range(tries):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)


def remove_cgroup_tree(root):
    """Kill and remove a sandguard cgroup root, deepest first, and its
    mirrors on the v1 controllers of hybrid nodes (<v1 mount>/<basename>)."""
    name = os.path.basename(root)
    tops = [root] + [os.path.join(p, name) for p in set(cgroup_v1_mounts().values())]
    for top in tops:
        if not os.path.isdir(top) or os.path.islink(top):
            continue
        for dirpath, dirnames, _ in os.walk(top, topdown=False):
            for d in dirnames:
                kill_and_rmdir(os.path.join(dirpath, d))
        kill_and_rmdir(top)


def sandbox_cgroups(root, tenant=None):
    """Sandbox cgroup directories below a sandguard cgroup root that exist:
    <root>/<tenant>/<sandbox>, and the same below the v1 mirrors of hybrid
    nodes (<v1 mount>/<basename root>/...). One tenant's, or every one's."""
    name = os.path.basename(root)
    tops = [root] + [os.path.join(p, name) for p in set(cgroup_v1_mounts().values())]
    found = []
    for top in tops:
        tenants = [tenant] if tenant else (os.listdir(top) if os.path.isdir(top) else [])
        for t in tenants:
            tdir = os.path.join(top, t)
            if os.path.isdir(tdir):
                found += [os.path.join(tdir, d) for d in os.listdir(tdir) if os.path.isdir(os.path.join(tdir, d))]
    return found


def slot_processes(base, slots, cmdline_has=None):
    """Live (not zombie) processes running as a slot uid in [base, base +
    slots); only those whose command line contains `cmdline_has` when
    given (a test's temp dir: another run of the same suite at the same
    time is not mistaken for ours)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/status" % pid) as f:
                st = f.read()
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmdline = f.read().decode(errors="replace")
        except OSError:
            continue
        uid = int(st.split("\nUid:")[1].split()[0])
        if base <= uid < base + slots and "\nState:\tZ" not in st \
                and (cmdline_has is None or cmdline_has in cmdline):
            found.append(int(pid))
    return found


def test_tree(prefix, programs):
    """A temp dir that slot uids can walk through, with a copy of
    `programs` at <dir>/programs, readable (not writable) by them: the
    suites' sandboxes run the copy. Returns (dir, programs dir)."""
    import shutil
    import tempfile
    top = tempfile.mkdtemp(prefix=prefix)
    os.chmod(top, 0o755)
    progs = os.path.join(top, "programs")
    shutil.copytree(programs, progs)
    for root, dirs, files in os.walk(progs):
        os.chmod(root, 0o755)
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
    return top, progs


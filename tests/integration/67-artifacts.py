#!/usr/bin/env python3
"""Pinned reward artifacts and accelerator devices (issue 37), each case
without the agent and with it: a pinned program runs; a one-byte change is
refused before it runs, with the expected and found digests; a file
swapped while it is checked is refused or runs the checked bytes, never
the new ones; a revoked digest is refused by a second executor that shares
only the policy directory, and re-admitted by unrevoke; a batch whose
artifact is revoked while it runs gets no retry; GPU and accelerator
device nodes made on the host with their real numbers are neither seen nor
opened in a sandbox; where the policy names minisign keys, an unsigned,
foreign-signed or wrongly signed artifact is refused and a signed one
(file or directory, prehashed or legacy signature) runs."""
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgagent import PY  # noqa: E402
from sgtest import uid_base  # noqa: E402
from sgartifact import refusal_event, run_cases, sha, why_not  # noqa: E402

UID_BASE = uid_base(69500)

GOOD = """import json, sys
b = json.load(sys.stdin)
print(json.dumps([0.5] * len(b["items"])))
"""
EVIL = GOOD.replace("0.5", "0.9")
# Run as the command itself: 0.7 when its argument is the pinned data
# file's checked copy.
SHEBANG_BODY = """import json, sys
b = json.load(sys.stdin)
ok = "sg-pinned" in sys.argv[1] and open(sys.argv[1]).read() == "x"
print(json.dumps([0.7 if ok else 0.1] * len(b["items"])))
"""
# Exits 1 after a while: under failure mode retry, each attempt is retried.
SLOW_FAIL = """import sys, time
sys.stdin.read()
time.sleep(1.5)
sys.exit(1)
"""
# (path, major, minor): the numbers the drivers register (nvidia 195,
# DRM 226, amdkfd's usual dynamic 235 on these kernels, accel 261).
DEVICES = [("/dev/nvidia0", 195, 0), ("/dev/nvidiactl", 195, 255), ("/dev/nvidia-uvm", 235, 1),
           ("/dev/dri/card0", 226, 0), ("/dev/dri/renderD128", 226, 128), ("/dev/kfd", 235, 0),
           ("/dev/accel/accel0", 261, 0)]
PROBE = """import json, os, sys
paths = PATHS + ["/dev/dri", "/dev/accel", "/proc/driver/nvidia", "/sys/class/drm", "/sys/fs/cgroup/devices"]
seen = [p for p in paths if os.path.lexists(p)]
opened = []
for p in paths:
    try:
        os.close(os.open(p, os.O_RDONLY))
        opened.append(p)
    except OSError:
        pass
made = None
try:  # a node made inside: the sandbox's mounts are nodev
    os.mknod("/tmp/nv", 0o600 | 0o020000, os.makedev(195, 0))
    try:
        os.close(os.open("/tmp/nv", os.O_RDWR))
        made = "opened"
    except OSError as e:
        made = "made, not opened: %s" % e
except OSError as e:
    made = None
try:
    listing = sorted(os.listdir("/dev"))
except OSError as e:
    listing = str(e)
sys.stderr.write(json.dumps({"seen": seen, "opened": opened, "dev": listing, "mknod": made}))
b = json.load(sys.stdin)
print(json.dumps([0.0 if (seen or opened or made == "opened") else 1.0] * len(b["items"])))
""".replace("PATHS", repr([d[0] for d in DEVICES]))


def pin(a, tenant, paths, **extra):
    a.write_policy(tenant, dict({"artifacts": {"require": True,
                                               "pins": [{"path": p, "sha256": sha(p)} for p in paths]}},
                                **extra))


def case_pinned_runs(a, tag):
    prog = a.program("ok-%s.py" % tag, GOOD)
    pin(a, "art-ok", [prog])
    r, raw = a.exec_batch("art-ok", prog)
    bad = why_not(r, raw, "ok")
    if bad or r["scores"] != [0.5] * 3:
        return bad or "scores %s" % r["scores"]
    # The pinned program as the command itself: its #! line's
    # interpreter runs the checked copy (a pinned data file too).
    script = a.program("script-%s.py" % tag, "#!/usr/bin/python3 -S\n" + SHEBANG_BODY)
    os.chmod(script, 0o755)
    data = a.program("data-%s.txt" % tag, "x")
    pin(a, "art-ok", [script, data])  # the #! shift first, then the data file
    batch = os.path.join(a.dir, "batch-shebang.json")
    with open(batch, "w") as f:
        json.dump({"batch_id": "shebang", "items": [{"prompt": "p", "completion": "c"}]}, f)
    raw = a.run(["exec", "--tenant", "art-ok", "--policy-dir", a.policy_dir, "--batch", batch, "--",
                 script, data])
    r = json.loads(raw.stdout) if raw.stdout.strip() else None
    bad = why_not(r, raw, "ok")
    if bad or r["scores"] != [0.7]:
        return "a pinned #! script as the command: %s" % (bad or r["scores"])
    # Unpinned, with artifacts.require: refused, nothing ran.
    other = a.program("unpinned-%s.py" % tag, GOOD)
    r, raw = a.exec_batch("art-ok", other)
    return why_not(r, raw, "tenant_policy_violation", ["does not pin", other]) or \
        (r["attempts"] != 0 and "the unpinned program ran: %s" % r["sandboxes"]) or None


def case_one_byte(a, tag):
    prog = a.program("flip-%s.py" % tag, GOOD)
    pin(a, "art-flip", [prog], failure={"mode": "retry", "max_retries": 2})
    want = sha(prog)
    r, raw = a.exec_batch("art-flip", prog)
    if why_not(r, raw, "ok"):
        return "before the change: " + why_not(r, raw, "ok")
    with open(prog, "r+b") as f:  # one byte, same length, in place
        f.seek(GOOD.index("0.5") + 2)
        f.write(b"9")
    found = sha(prog)
    r, raw = a.exec_batch("art-flip", prog)
    bad = why_not(r, raw, "tenant_policy_violation", ["expected " + want, "found " + found])
    if bad:
        return bad
    if r["attempts"] != 0 or r["sandboxes"]:
        return "a refused artifact ran (or was retried): %s" % r
    return refusal_event(a, tag, ["expected " + want, "found " + found])


def case_swap(a, tag):
    """A large pinned file (hashing takes a while) and a thread that swaps
    an evil one in and the good one back, by rename and by writing in
    place, while batches run: every batch is refused or scores 0.5."""
    pad = "#" + "x" * 1023 + "\n"
    good_text = GOOD + pad * (16 << 10)  # 16 MiB
    prog = a.program("swap-%s.py" % tag, good_text)
    pin(a, "art-swap", [prog])
    evil_path = a.program("swap-evil-%s.py" % tag, EVIL + pad * (16 << 10))
    good_copy = a.program("swap-good-%s.py" % tag, good_text)
    stop = threading.Event()

    def swapper():
        n = 0
        while not stop.is_set():
            n += 1
            if n % 2:
                shutil.copyfile(evil_path, prog + ".new")
                os.rename(prog + ".new", prog)
            else:
                with open(prog, "r+b") as f:  # in place: same inode
                    f.write(open(good_copy if n % 4 == 0 else evil_path, "rb").read())
            time.sleep(0.003)
    t = threading.Thread(target=swapper)
    t.start()
    results = []
    try:
        for _ in range(12):
            r, raw = a.exec_batch("art-swap", prog)
            results.append((r and r["cause"], r and r["scores"], r and r["detail"]))
    finally:
        stop.set()
        t.join()
    for cause, scores, detail in results:
        if cause == "ok" and scores != [0.5] * 3:
            return "the swapped-in bytes ran: scores %s" % scores
        if cause not in ("ok", "tenant_policy_violation"):
            return "cause %s: %s" % (cause, detail)
    refused = sum(1 for c, _, _ in results if c == "tenant_policy_violation")
    if refused == 0:
        return "no batch was refused while the file was swapped 12 times: %s" % results
    return None


def case_revoked_elsewhere(a, tag):
    prog = a.program("rev-%s.py" % tag, GOOD)
    pin(a, "art-rev", [prog])
    digest = sha(prog)
    r, raw = a.exec_batch("art-rev", prog)
    if why_not(r, raw, "ok"):
        return "before revocation: " + why_not(r, raw, "ok")
    out = a.run(["artifact", "revoke", digest, "--tenant", "art-rev", "--reason", "finding SEC-12",
                 "--policy-dir", a.policy_dir])
    if out.returncode:
        return "revoke: exit %d: %s" % (out.returncode, out.stderr)
    # A second executor: its own state and run directories (journal,
    # cache, slots); the policy directory is what it shares (the node's
    # cgroup root is the agent's, one per node).
    second = os.path.join(a.dir, "second-%s" % tag)
    saved = dict(a.env)
    a.env.update({"SANDGUARD_STATE_DIR": second + "/state", "SANDGUARD_RUN_DIR": second + "/run"})
    try:
        r, raw = a.exec_batch("art-rev", prog)
        bad = why_not(r, raw, "tenant_policy_violation", ["revoked", "finding SEC-12", digest])
        if not bad and r["attempts"]:
            bad = "a revoked artifact ran: %s" % r
        ex = a.run(["explain", a.last_batch_id, "--tenant", "art-rev", "--policy-dir", a.policy_dir])
        if not bad and ("revoked" not in ex.stdout or "finding SEC-12" not in ex.stdout):
            bad = "explain does not name the revocation: %s" % (ex.stdout[-400:] + ex.stderr[-200:])
        ls = json.loads(a.run(["artifact", "ls", "--json", "--policy-dir", a.policy_dir]).stdout)
        if not bad and [(x["sha256"], x["tenant"], x["reason"]) for x in ls] != \
                [(digest, "art-rev", "finding SEC-12")]:
            bad = "artifact ls: %s" % ls
        out = a.run(["artifact", "unrevoke", digest, "--tenant", "art-rev", "--policy-dir", a.policy_dir])
        r, raw = a.exec_batch("art-rev", prog)
        if not bad and (out.returncode or why_not(r, raw, "ok")):
            bad = "after unrevoke: exit %d, %s" % (out.returncode, why_not(r, raw, "ok"))
    finally:
        a.env.clear()
        a.env.update(saved)
    return bad


def case_revoked_mid_batch(a, tag):
    prog = a.program("mid-%s.py" % tag, SLOW_FAIL)
    pin(a, "art-mid", [prog], failure={"mode": "retry", "max_retries": 2},
        limits={"timeout_ms": 5000})
    got = {}

    def run():
        got["r"] = a.exec_batch("art-mid", prog)
    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.7)  # the first attempt is running
    out = a.run(["artifact", "revoke", sha(prog), "--tenant", "art-mid", "--reason", "pulled mid-batch",
                 "--policy-dir", a.policy_dir])
    t.join()
    r, raw = got["r"]
    if out.returncode:
        return "revoke: %s" % out.stderr
    bad = why_not(r, raw, "tenant_crash", ["the retry is refused", "pulled mid-batch"])
    if not bad and r["attempts"] != 1:
        bad = "%d attempts after the revocation, want 1" % r["attempts"]
    bad = bad or refusal_event(a, tag, ["the retry is refused", "pulled mid-batch"], attempt=1)
    a.run(["artifact", "unrevoke", sha(prog), "--tenant", "art-mid", "--policy-dir", a.policy_dir])
    return bad


def case_no_devices(a, tag):
    made = []
    try:
        for path, major, minor in DEVICES:
            if os.path.lexists(path):
                continue
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
            made.append(path)
        prog = a.program("dev-%s.py" % tag, PROBE)
        # Even a policy that names them: /dev is the sandbox's own.
        a.write_policy("art-dev", {"files": {"read_only": ["/usr", "/lib", "/lib64", "/bin",
                                                           "/etc/ld.so.cache", "/dev/dri", "/dev/nvidia0",
                                                           "/dev/kfd", "/dev/accel", a.programs]},
                                   # denied, not killed: the probe reports every path
                                   "actions": {"file": "deny"}})
        r, raw = a.exec_batch("art-dev", prog)
        if r is None or r["cause"] != "ok":
            return "probe: %r" % ((r["cause"], r["detail"], r["stderr"]) if r else raw.stderr[-300:],)
        if r["scores"] != [1.0] * 3:
            return "a device is visible or opens in the sandbox: %s" % r["stderr"]
        return None
    finally:
        for path in made:
            os.unlink(path)
        for d in ("/dev/dri", "/dev/accel"):
            if os.path.isdir(d) and not os.listdir(d) and any(p.startswith(d + "/") for p in made):
                os.rmdir(d)


# The reward-model tier's inference pool: two nodes named, two not (the
# trainer's), with their drivers' numbers; and one named node with a live
# driver's numbers (1, 5: the zero device) standing in for a GPU that
# opens, since this host has no GPU driver (an open of the others reaches
# the kernel's driver lookup and fails there, ENXIO, as on the host).
POOL = [("/dev/nvidia1", 195, 1, True), ("/dev/dri/renderD129", 226, 129, True),
        ("/dev/nvidia2", 1, 5, True), ("/dev/nvidia0", 195, 0, False),
        ("/dev/dri/renderD128", 226, 128, False)]
POOL_PROBE = """import errno, json, os, sys
out = {}
for p in PATHS:
    try:
        fd = os.open(p, os.O_RDWR)
        out[p] = "read %d" % len(os.read(fd, 4))
        os.close(fd)
    except OSError as e:
        out[p] = errno.errorcode.get(e.errno, str(e.errno))
sys.stderr.write(json.dumps(out))
b = json.load(sys.stdin)
print(json.dumps([1.0] * len(b["items"])))
""".replace("PATHS", repr([d[0] for d in POOL]))


def make_nodes(nodes):
    """mknod each (path, major, minor, ...) that is not there: the ones made."""
    made = []
    for path, major, minor, *_ in nodes:
        if os.path.lexists(path):
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
        os.chmod(path, 0o666)  # as the drivers make them, whatever the umask
        made.append(path)
    return made


def remove_nodes(made):
    for path in made:
        os.unlink(path)
    for d in ("/dev/dri", "/dev/accel"):
        if os.path.isdir(d) and not os.listdir(d) and any(p.startswith(d + "/") for p in made):
            os.rmdir(d)


def host_open(path):
    try:
        os.close(os.open(path, os.O_RDWR))
        return None
    except OSError as e:
        return e.errno


def case_inference_pool(a, tag):
    """Only the reward-model tier's named nodes are in its sandbox: they
    open (the live one reads) or fail only in their absent driver, as on
    the host; the unnamed nodes are not there. Another tier naming
    devices is refused at load with file:line:col."""
    made = make_nodes(POOL)
    try:
        prog = a.program("pool-%s.py" % tag, POOL_PROBE)
        named = [p for p, _, _, n in POOL if n]
        a.write_policy("art-pool", {"tier": "reward-model", "inference_devices": named,
                                    "actions": {"file": "deny"}, "limits": {"timeout_ms": 10000}})
        r, raw = a.exec_batch("art-pool", prog)
        bad = why_not(r, raw, "ok")
        if bad:
            return "probe: %s %s" % (bad, r and r["stderr"])
        seen = json.loads(r["stderr"])
        for path, _, _, is_named in POOL:
            want = ("read 4" if host_open(path) is None else "ENXIO") if is_named else "ENOENT"
            if seen.get(path) != want:
                return "%s: %s in the sandbox, want %s (all: %s)" % (path, seen.get(path), want, seen)
        a.write_policy("art-pool-bad", {"tier": "verifier", "inference_devices": named})
        out = a.run(["policy", "check", os.path.join(a.policy_dir, "art-pool-bad.json")])
        if out.returncode != 1 or "art-pool-bad.json:" not in out.stderr or \
                "inference_devices: only a policy with \"tier\": \"reward-model\"" not in out.stderr:
            return "another tier naming devices: exit %d, %s" % (out.returncode, out.stderr)
        os.unlink(os.path.join(a.policy_dir, "art-pool-bad.json"))
        return None
    finally:
        remove_nodes(made)


def minisign_key(a, name):
    pub, key = os.path.join(a.dir, name + ".pub"), os.path.join(a.dir, name + ".key")
    if not os.path.exists(pub):
        subprocess.run(["minisign", "-G", "-W", "-p", pub, "-s", key], check=True, capture_output=True)
    with open(pub) as f:
        return f.read().splitlines()[1], key


def sign(key, path, legacy=False):
    subprocess.run(["minisign", "-S", "-s", key, "-m", path] + (["-l"] if legacy else []), check=True,
                   capture_output=True)


def case_signatures(a, tag):
    if not shutil.which("minisign"):
        return "SKIP minisign is not installed (scripts/install-deps.sh installs it)"
    pub, key = minisign_key(a, "tenant")
    _, other = minisign_key(a, "other")
    prog = a.program("signed-%s.py" % tag, GOOD)
    data = os.path.join(a.programs, "data-%s" % tag)
    os.makedirs(os.path.join(data, "sub"), exist_ok=True)
    for rel, text in (("a.txt", "a"), ("sub/b.txt", "b")):
        with open(os.path.join(data, rel), "w") as f:
            f.write(text)
    manifest = a.run(["artifact", "manifest", data]).stdout
    with open(data + ".manifest", "w") as f:
        f.write(manifest)
    sign(key, data + ".manifest")
    os.rename(data + ".manifest.minisig", data + ".minisig")
    pin(a, "art-sig", [prog, data])
    policy = os.path.join(a.policy_dir, "art-sig.json")
    with open(policy) as f:
        doc = json.load(f)
    doc["artifacts"]["public_keys"] = [pub]
    with open(policy, "w") as f:
        json.dump(doc, f)
    r, raw = a.exec_batch("art-sig", prog)
    bad = why_not(r, raw, "tenant_policy_violation", ["no signature", prog]) or \
        refusal_event(a, tag, ["no signature", prog])
    if bad:
        return "unsigned: " + bad
    sign(other, prog)
    r, raw = a.exec_batch("art-sig", prog)
    bad = why_not(r, raw, "tenant_policy_violation", ["a key the policy does not name"])
    if bad:
        return "signed by another key: " + bad
    decoy = a.program("decoy-%s.py" % tag, EVIL)
    sign(key, decoy)
    os.rename(decoy + ".minisig", prog + ".minisig")  # the right key, other bytes
    r, raw = a.exec_batch("art-sig", prog)
    bad = why_not(r, raw, "tenant_policy_violation", ["does not verify"])
    if bad:
        return "signature of other bytes: " + bad
    for legacy in (False, True):
        sign(key, prog, legacy)
        r, raw = a.exec_batch("art-sig", prog)
        bad = why_not(r, raw, "ok")
        if bad:
            return "signed%s: %s" % (" (legacy)" if legacy else "", bad)
    # Verdicts kept: the same signature again adds none; another signature
    # of other bytes is verified (refused), whatever was kept.
    verdicts = os.path.join(a.env["SANDGUARD_STATE_DIR"], "artifacts", "signed")
    kept = sorted(os.listdir(verdicts))
    r, raw = a.exec_batch("art-sig", prog)
    if why_not(r, raw, "ok") or sorted(os.listdir(verdicts)) != kept or not kept:
        return "the kept verdict: %s, verdicts %s then %s" % (why_not(r, raw, "ok"), kept,
                                                              os.listdir(verdicts))
    sign(key, decoy)
    shutil.copyfile(decoy + ".minisig", prog + ".minisig")
    r, raw = a.exec_batch("art-sig", prog)
    bad = why_not(r, raw, "tenant_policy_violation", ["does not verify"])
    if bad or sorted(os.listdir(verdicts)) != kept:
        return "another signature after a kept verdict: %s, verdicts %s" % (bad, os.listdir(verdicts))
    sign(key, prog)
    sign(other, data + ".manifest")
    os.rename(data + ".manifest.minisig", data + ".minisig")
    r, raw = a.exec_batch("art-sig", prog)
    return why_not(r, raw, "tenant_policy_violation", ["a key the policy does not name", data])


SCANNER = """import sys
data = open(sys.argv[1], "rb").read()
if b"EVIL" in data:
    sys.stderr.write("found EVIL\\n")
    sys.exit(3)
"""
REJECT_ALL = """import sys
sys.stderr.write("rejects everything\\n")
sys.exit(4)
"""


def case_scanner(a, tag):
    """A scanner runs once per new digest, in a sandbox, and its verdict
    is kept by digest: a changed scanner does not rescan a known digest."""
    scanner = a.program("scanner-%s.py" % tag, SCANNER)
    good = a.program("scan-good-%s.py" % tag, GOOD)
    evil = a.program("scan-evil-%s.py" % tag, GOOD + "# EVIL\n")
    fresh = a.program("scan-fresh-%s.py" % tag, GOOD + "# v2\n")

    def run(prog, cause, detail_has=()):
        pin(a, "art-scan", [prog])
        path = os.path.join(a.policy_dir, "art-scan.json")
        with open(path) as f:
            doc = json.load(f)
        doc["artifacts"]["scanner"] = [PY, scanner]
        with open(path, "w") as f:
            json.dump(doc, f)
        r, raw = a.exec_batch("art-scan", prog)
        return why_not(r, raw, cause, detail_has) or (cause != "ok" and r["attempts"] and
                                                      "a refused artifact ran: %s" % r) or None
    bad = run(good, "ok") or run(evil, "tenant_policy_violation",
                                 ["scanner rejected: exit 3: found EVIL", sha(evil)]) or \
        refusal_event(a, tag, ["scanner rejected"])
    if bad:
        return bad
    with open(scanner, "w") as f:
        f.write(REJECT_ALL)
    bad = run(good, "ok")
    if bad:
        return "a digest scanned clean was scanned again: " + bad
    return run(fresh, "tenant_policy_violation", ["rejects everything"])


CASES = [("pinned program runs", case_pinned_runs),
         ("one-byte change refused with both digests", case_one_byte),
         ("file swapped during the check never runs", case_swap),
         ("revoked digest refused by a second executor", case_revoked_elsewhere),
         ("retry of a batch revoked mid-batch refused", case_revoked_mid_batch),
         ("GPU/accelerator nodes absent and unopenable", case_no_devices),
         ("reward-model tier sees only its inference pool's nodes", case_inference_pool),
         ("signatures required by the policy's keys", case_signatures),
         ("scanner runs once per digest and its verdict is kept", case_scanner)]


def main():
    return run_cases(CASES, "artifacts", UID_BASE)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""The three ways an allowlist tenant's sandbox could reach its allowed
destinations from a network namespace of its own, measured on this node
(by hand; docs/sandbox.md records the figures and the choice):

  veth    a veth pair, addresses and a default route, set up with ip(8)
          (one `ip -batch` per side); what a host also needs (forwarding,
          NAT, a filter per sandbox) is not counted
  pasta   Debian's passt/pasta attached to the namespace (--config-net), up
          to the moment its tap device is configured
  relay   sandguard's relay: a launch with an allowlist against one without

Each figure is the median added setup time over the same namespace made
bare, N rounds interleaved.   netpaths.py [ROUNDS] (as root)"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 30
SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HELPER = os.path.join(SRC, "build", "tests", "sandbox_run")


def ms(t0):
    return (time.perf_counter() - t0) * 1000


def bare():
    t0 = time.perf_counter()
    subprocess.run(["unshare", "-n", "true"], check=True)
    return ms(t0)


def veth(i):
    """A namespace held by a sleeping process, a veth pair into it, both
    ends addressed and up, a default route inside."""
    t0 = time.perf_counter()
    holder = subprocess.Popen(["unshare", "-n", "sleep", "30"])
    host, peer = "sgv%da" % i, "sgv%db" % i
    net = "10.250.%d" % (i % 250)
    for _ in range(100):  # until unshare has made the namespace
        if os.readlink("/proc/%d/ns/net" % holder.pid) != os.readlink("/proc/self/ns/net"):
            break
        time.sleep(0.001)
    subprocess.run(["ip", "-batch", "-"], check=True, text=True, input=(
        "link add %s type veth peer name %s netns %d\n"
        "addr add %s.1/30 dev %s\nlink set %s up\n" % (host, peer, holder.pid, net, host, host)))
    subprocess.run(["nsenter", "-t", str(holder.pid), "-n", "ip", "-batch", "-"], check=True, text=True,
                   input="addr add %s.2/30 dev %s\nlink set %s up\nlink set lo up\n"
                         "route add default via %s.1\n" % (net, peer, peer, net))
    dt = ms(t0)
    holder.kill()
    holder.wait()
    subprocess.run(["ip", "link", "del", host], stderr=subprocess.DEVNULL)
    return dt


def pasta():
    """pasta attached to a namespace made by root (as a sandbox's would
    be), configuring its tap; None when it cannot (the reason printed)."""
    holder = subprocess.Popen(["unshare", "-n", "sleep", "30"])
    time.sleep(0.05)
    t0 = time.perf_counter()
    try:
        p = subprocess.run(["pasta", "--runas", "0", "--config-net", str(holder.pid)],
                           capture_output=True, text=True, timeout=5)
        dt = ms(t0)
        ok = p.returncode == 0
        why = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
    except subprocess.TimeoutExpired:
        ok, why = False, "did not finish in 5 s"
    subprocess.run(["pkill", "-f", "pasta --runas 0 --config-net %d" % holder.pid])
    holder.kill()
    holder.wait()
    if not ok:
        print("  pasta: %s" % why, file=sys.stderr)
        return None
    return dt


def relay(policies):
    out = {}
    for name, pol in policies.items():
        t0 = time.perf_counter()
        subprocess.run([HELPER, "--policy", pol, "--", "/usr/bin/true"], check=True, capture_output=True)
        out[name] = ms(t0)
    return out


def main():
    d = tempfile.mkdtemp(prefix="netpaths.")
    os.chmod(d, 0o755)
    with open(os.path.join(SRC, "policies", "default.json")) as f:
        base = json.load(f)
    policies = {}
    for name, allow in (("closed", []), ("relay", [{"cidr": "127.0.0.1/32", "port": 3128, "proto": "tcp"}])):
        p = json.loads(json.dumps(base))
        p["tenant"] = "netpaths-" + name
        p["files"]["scratch_root"] = os.path.join(d, "scratch")
        p["egress"]["allow"] = allow
        policies[name] = os.path.join(d, p["tenant"] + ".json")
        with open(policies[name], "w") as f:
            json.dump(p, f)
    t = {"bare": [], "veth": [], "pasta": [], "closed": [], "relay": []}
    for i in range(ROUNDS):
        t["bare"].append(bare())
        t["veth"].append(veth(i))
        p = pasta() if i < 3 or t["pasta"] else None
        if p is not None:
            t["pasta"].append(p)
        for k, v in relay(policies).items():
            t[k].append(v)
    med = {k: statistics.median(v) if v else float("nan") for k, v in t.items()}
    print("%d rounds, medians in ms" % ROUNDS)
    print("  bare namespace (unshare -n true)     %6.1f" % med["bare"])
    print("  veth pair + addresses + route        %6.1f  (+%.1f over bare)" % (med["veth"], med["veth"] - med["bare"]))
    print("  pasta --config-net -- true           %6.1f  (+%.1f over bare)" % (med["pasta"], med["pasta"] - med["bare"]))
    print("  sandbox launch, no egress            %6.1f" % med["closed"])
    print("  sandbox launch, allowlist via relay  %6.1f  (+%.1f over no egress)" % (med["relay"], med["relay"] - med["closed"]))
    subprocess.run(["rm", "-rf", d])


if __name__ == "__main__":
    main()

"""Scenario 6, the isolation layers: what each layer of a sandbox (PID, IPC,
UTS, network and mount namespaces, the relay's network, the minimal root,
the tmpfs scratch, the seccomp filter) costs to set up, against a bare fork in the same run
(<build>/bench/layers, sandguard's own code), and what a whole launch with
the egress relay costs against one without."""
import json
import os
import statistics
import subprocess
import tempfile

from sgbench import PY, now_ms, summary

BASELINE = "fork (baseline)"


def measure(env, tools, rounds):
    scratch = tempfile.mkdtemp(prefix="layers.", dir=env.dir)
    p = subprocess.run([tools["layers"], str(rounds), scratch], capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError("layers failed: %s" % p.stderr[-300:])
    samples = {k: [v / 1e6 for v in vs] for k, vs in json.loads(p.stdout).items()}
    base = summary(samples[BASELINE])
    rows = []
    for name, ms in samples.items():
        if name == BASELINE:
            continue
        s = summary(ms)
        rows.append({"scenario": "6 layers", "name": name, "unit": "ms/setup", "value": s,
                     "baseline": base, "baseline_name": "fork + exit + reap",
                     "ratio": s["median"] / base["median"], "target": None, "lower_is_better": True,
                     "notes": "+%.2f ms over the baseline (median)" % (s["median"] - base["median"])})
    return rows, samples


def relay_launch(env, helper, rounds, port):
    """A whole sandbox launch (tests' sandbox_run, /usr/bin/true) with an
    egress allowlist (network namespace + relay) against one without."""
    pols = {}
    for name, allow in (("closed", []), ("relay", [{"cidr": "127.0.0.1/32", "port": port,
                                                    "proto": "tcp"}])):
        p = env.base_policy("layers-" + name)
        p["egress"] = {"allow": allow}
        env.write_policy(p)
        pols[name] = os.path.join(env.policy_dir, p["tenant"] + ".json")
    times = {k: [] for k in pols}
    for _ in range(rounds):
        for name, pol in pols.items():
            t0 = now_ms()
            r = subprocess.run([helper, "--policy", pol, "--", "/usr/bin/true"], env=env.env,
                               capture_output=True)
            if r.returncode:
                raise RuntimeError("sandbox_run failed: %s" % r.stdout[-300:])
            times[name].append(now_ms() - t0)
    base, s = summary(times["closed"]), summary(times["relay"])
    return [{"scenario": "6 layers", "name": "launch with an egress allowlist (relay)",
             "unit": "ms/launch", "value": s, "baseline": base,
             "baseline_name": "launch with no egress", "ratio": s["median"] / base["median"],
             "target": None, "lower_is_better": True}]

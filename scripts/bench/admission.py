"""Scenario 18, admission with many holders: an admission and release of
one more commitment in the node's CPU line (src/node/node_cpu.c), and of
one more of a tenant's concurrency slots (src/node/tenant_state.c), while
128 are held by the same process (serve holds one of each per running
request; the seed's node runs over 100 sandboxes at once), against the
same with none held, in turn round by round
(<build>/bench/admission, sandguard's own code, on a tmpfs run directory as
a node's /run/sandguard is). Every admission scans the line's files under
its lock, so what it costs per holder is also how long it holds every other
admission of the node (or of the tenant) behind it."""
import json
import os
import shutil
import subprocess
import tempfile

from sgbench import summary

HELD = 128
TARGET = "<= 3x"  # 128 holders cost at most 3x an empty line


LINES = (("cpu", "node CPU admission + release, %d commitments held" % HELD),
         ("slot", "tenant slot taken + released, %d slots held" % HELD))


def measure(tools, rounds, ops):
    run_dir = tempfile.mkdtemp(prefix="sandguard-bench-admission.", dir="/dev/shm")
    try:
        p = subprocess.run([tools["admission"], run_dir, str(rounds), str(ops), "0", str(HELD)],
                           capture_output=True, text=True, timeout=600)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    if p.returncode:
        raise RuntimeError("admission failed: %s" % p.stderr[-300:])
    samples = json.loads(p.stdout)
    rows = []
    for line, name in LINES:
        empty, held = summary(samples[line]["0"]), summary(samples[line][str(HELD)])
        rows.append({"scenario": "18 admission", "name": name, "unit": "us/op", "value": held,
                     "baseline": empty, "baseline_name": "the same, none held",
                     "ratio": held["median"] / empty["median"], "target": TARGET,
                     "lower_is_better": True,
                     "notes": "+%.2f us per holder (median); %d rounds of %d, in turn" %
                              ((held["median"] - empty["median"]) / HELD, rounds, ops)})
    return rows, samples


if __name__ == "__main__":
    import sys
    rows, _ = measure({"admission": sys.argv[1]}, 5, 500)
    print(json.dumps(rows, indent=1))

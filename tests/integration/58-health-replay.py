#!/usr/bin/env python3
"""`sandguard health replay` (issue 36, item 2): every table that
docs/oncall.md ("Score-stream detectors: thresholds and measured rates")
publishes is recomputed from the shipped series (tests/health-series/) and
must match to the character: the false-positive rate of each detector on
the healthy series and its detection lag on the broken ones, next to its
thresholds. A block is marked <!-- health-replay [field=value ...]
[rows=a,b] -->: the policy's health fields to set, and the rows shown.
Also: bad input is a clear error and exit 64."""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sgtest import check, exit_code  # noqa: E402

BIN = os.environ.get("SANDGUARD_BIN") or os.path.abspath("build/sandguard")
SRC = os.environ.get("SANDGUARD_SRC") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MARK = re.compile(r"<!-- health-replay((?: [a-z_]+=[^ ]+)*) -->\n```\n\$ [^\n]*\n(.*?)```", re.S)


def replay(tmp, args):
    health, rows = {}, None
    for kv in args.split():
        k, v = kv.split("=", 1)
        if k == "rows":
            rows = v.split(",")
        else:
            health[k] = json.loads(v)
    cmd = [BIN, "health", "replay", "--summary"]
    if health:
        pol = os.path.join(tmp, "band.json")
        with open(pol, "w") as f:
            json.dump({"health": health}, f)
        cmd += ["--policy", pol]
    r = subprocess.run(cmd + sorted(glob.glob(os.path.join(SRC, "tests", "health-series", "*.jsonl"))),
                       capture_output=True, text=True)
    out = r.stdout
    if rows:
        out = "".join(line + "\n" for line in out.splitlines() if line.split()[0] in ["DETECTOR"] + rows)
    return r.returncode, out.replace(os.path.join(SRC, "tests", "health-series") + "/", ""), r.stderr


def main():
    with open(os.path.join(SRC, "docs", "oncall.md")) as f:
        doc = f.read()
    blocks = MARK.findall(doc)
    check(len(blocks) >= 3, "docs/oncall.md has the replay tables", "%d found" % len(blocks))
    with tempfile.TemporaryDirectory() as tmp:
        for args, published in blocks:
            rc, out, err = replay(tmp, args)
            check(rc == 0 and out == published,
                  "the replay%s recomputes docs/oncall.md's table" % (args or " at the defaults"),
                  "exit %d %s\n--- published\n%s--- recomputed\n%s" % (rc, err, published, out))
        rc, out, _ = replay(tmp, "")
        rows = {line.split()[0]: line for line in out.splitlines()[1:]}
        check(set(rows) == {"constant", "invalid", "dead", "explosion", "collapse", "canary", "nondeterminism"}
              and all("missed" not in line for line in rows.values()),
              "at the defaults every detector trips on the series meant to trip it", out)
        bad = os.path.join(tmp, "bad.jsonl")
        with open(bad, "w") as f:
            f.write('{"scores":[1,0]}\n{"mean":0.5}\n')
        r = subprocess.run([BIN, "health", "replay", bad], capture_output=True, text=True)
        check(r.returncode == 64 and "bad.jsonl:2: expected \"scores\"" in r.stderr,
              "a bad line is named, exit 64", "%d %s" % (r.returncode, r.stderr))
        r = subprocess.run([BIN, "health", "replay", os.path.join(tmp, "missing.jsonl")],
                           capture_output=True, text=True)
        check(r.returncode == 64 and "cannot read: No such file or directory" in r.stderr,
              "a missing file is named, exit 64", "%d %s" % (r.returncode, r.stderr))
        r = subprocess.run([BIN, "health", "replay"], capture_output=True, text=True)
        check(r.returncode == 64 and "at least one series" in r.stderr, "no series: usage error, exit 64",
              "%d %s" % (r.returncode, r.stderr))


if __name__ == "__main__":
    main()
    sys.exit(exit_code())

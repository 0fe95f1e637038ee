"""Scenario 16, pinned reward artifacts (issue 37): what checking a pin
costs a batch, and how fast a pinned model directory is hashed.

- Per run: `sandguard exec --batch` of the same reward program under three
  tenants, interleaved round by round: unpinned (the baseline); pinned,
  its digest in the verified-digest cache (cached; target <= 1.02x); and
  pinned with an empty cache each run (a fresh SANDGUARD_ARTIFACT_DIR: the
  file is read and hashed, and the store written); and, where minisign is
  installed, pinned and signed: cached digest, the signature's verdict
  kept, and the same with no verdict kept (the signature verified).
- Hash rate: a 1 GiB directory of 16 files, in the page cache, hashed by
  `sandguard artifact digest DIR --no-cache` (its manifest digest, every
  file hashed) against `sha256sum` of the same files (target >= 0.9x);
  and the same directory's digest through a filled cache (the cost of a
  pinned model directory per batch once verified)."""
import json
import os
import shutil
import subprocess
import time

from sgbench import PY, log, summary

REWARD = """import json, sys
b = json.load(sys.stdin)
print(json.dumps([0.5] * len(b["items"])))
"""
DIR_FILES = 16
FILE_MB = 64


def sha256_of(path):
    return subprocess.run(["sha256sum", path], capture_output=True, text=True,
                          check=True).stdout.split()[0]


def setup(env):
    prog = env.write_program("artifact_reward.py", REWARD)
    batch = os.path.join(env.programs, "artifact_batch.json")
    with open(batch, "w") as f:
        json.dump({"batch_id": "bench-artifact",
                   "items": [{"prompt": "p%d" % i, "completion": "c"} for i in range(8)]}, f)
    pins = {"require": True, "pins": [{"path": prog, "sha256": sha256_of(prog)}]}
    env.write_policy(env.base_policy("art-unpinned"))
    env.write_policy(env.base_policy("art-pinned", artifacts=pins))
    if shutil.which("minisign"):
        pub, key = os.path.join(env.dir, "bench.pub"), os.path.join(env.dir, "bench.key")
        subprocess.run(["minisign", "-G", "-W", "-p", pub, "-s", key], check=True, capture_output=True)
        subprocess.run(["minisign", "-S", "-s", key, "-m", prog], check=True, capture_output=True)
        with open(pub) as f:
            signed = dict(pins, public_keys=[f.read().splitlines()[1]])
        env.write_policy(env.base_policy("art-signed", artifacts=signed))
    return prog, batch


def timed(cmd, env):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    ms = (time.perf_counter() - t0) * 1000
    return ms, p


def per_run(env, rounds):
    prog, batch = setup(env)
    time.sleep(2.2)  # past ARTIFACT_RACY_S: the program's digest can be cached
    times = {"unpinned": [], "cached": [], "uncached": []}
    if os.path.exists(os.path.join(env.policy_dir, "art-signed.json")):
        times["signed"] = []
        times["verified"] = []
    verdicts = os.path.join(env.env["SANDGUARD_STATE_DIR"], "artifacts", "signed")
    fresh = os.path.join(env.dir, "artifact-fresh")

    def cmd(tenant):
        return [env.sandguard, "exec", "--tenant", tenant, "--policy-dir", env.policy_dir,
                "--batch", batch, "--", PY, prog]
    subprocess.run(cmd("art-pinned"), env=env.env, capture_output=True)  # fill the cache once
    tenant = {"unpinned": "art-unpinned", "cached": "art-pinned", "uncached": "art-pinned",
              "signed": "art-signed", "verified": "art-signed"}
    for r in range(rounds):
        arms = list(times)
        for arm in arms if r % 2 == 0 else arms[::-1]:
            e = env.env
            if arm == "uncached":
                shutil.rmtree(fresh, ignore_errors=True)
                e = dict(env.env, SANDGUARD_ARTIFACT_DIR=fresh)
            if arm == "verified":  # no kept verdict: the signature is verified
                shutil.rmtree(verdicts, ignore_errors=True)
            ms, p = timed(cmd(tenant[arm]), e)
            try:
                ok = json.loads(p.stdout).get("status") == "ok"
            except ValueError:
                ok = False
            if not ok:
                raise RuntimeError("artifact bench: %s run failed: %s %s" % (arm, p.stdout[-300:],
                                                                            p.stderr[-300:]))
            times[arm].append(ms)
    base = summary(times["unpinned"])
    rows = []
    names = {"cached": "cached digest", "uncached": "uncached digest",
             "signed": "cached digest, signature's verdict kept",
             "verified": "cached digest, signature verified"}
    for arm, target in (("cached", "<= 1.02x"), ("uncached", None), ("signed", None),
                        ("verified", None)):
        if arm not in times:
            continue
        s = summary(times[arm])
        rows.append({"scenario": "16 artifacts", "name": "exec --batch, pinned program, %s" % names[arm],
                     "unit": "ms/run", "value": s, "baseline": base,
                     "baseline_name": "the same program unpinned", "ratio": s["median"] / base["median"],
                     "target": target, "lower_is_better": True})
    return rows


def make_dir(env):
    d = os.path.join(env.dir, "model-dir")
    os.makedirs(d, exist_ok=True)
    block = os.urandom(1 << 20)
    for i in range(DIR_FILES):
        with open(os.path.join(d, "shard-%02d.bin" % i), "wb") as f:
            for _ in range(FILE_MB):
                f.write(block)
    return d


def hash_rate(env, rounds):
    d = make_dir(env)
    files = sorted(os.path.join(d, n) for n in os.listdir(d))
    total = sum(os.path.getsize(f) for f in files)
    ours = [env.sandguard, "artifact", "digest", d, "--no-cache"]
    theirs = ["sha256sum"] + files
    subprocess.run(["cat"] + files, stdout=subprocess.DEVNULL, check=True)  # into the page cache
    rates = {"sandguard": [], "sha256sum": []}
    for r in range(rounds):
        for name in (["sandguard", "sha256sum"] if r % 2 == 0 else ["sha256sum", "sandguard"]):
            ms, p = timed(ours if name == "sandguard" else theirs, env.env)
            if p.returncode:
                raise RuntimeError("%s failed: %s" % (name, p.stderr[-300:]))
            rates[name].append(total / (1 << 20) / (ms / 1000))
    # Through the cache: each file's digest noted once it is old enough.
    time.sleep(2.2)
    subprocess.run([env.sandguard, "artifact", "digest", d], env=env.env, capture_output=True, check=True)
    cached = [timed([env.sandguard, "artifact", "digest", d], env.env)[0] for _ in range(rounds)]
    s, base = summary(rates["sandguard"]), summary(rates["sha256sum"])
    shutil.rmtree(d, ignore_errors=True)
    return [{"scenario": "16 artifacts", "name": "hash rate, 1 GiB directory (16 files), uncached",
             "unit": "MiB/s", "value": s, "baseline": base, "baseline_name": "sha256sum of the same files",
             "ratio": s["median"] / base["median"], "target": ">= 0.9x", "lower_is_better": False,
             "notes": "the same directory's digest through a filled cache: %.1f ms median (%d runs)" %
                      (summary(cached)["median"], len(cached))}]


def measure(env, rounds):
    log("artifacts: %d interleaved rounds of unpinned / cached / uncached / signed runs" % rounds)
    rows = per_run(env, rounds)
    log("artifacts: hash rate on a 1 GiB directory, %d rounds" % max(3, rounds // 10))
    return rows + hash_rate(env, max(3, rounds // 10))

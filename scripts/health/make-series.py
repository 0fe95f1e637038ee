#!/usr/bin/env python3
"""Write the synthetic score series that `sandguard health replay` measures
the score-stream detectors on (tests/health-series/, docs/oncall.md
"Score-stream detectors: thresholds and measured rates").

Healthy series are what honest rewards look like (a learning curve of
binary rewards, noisy continuous rewards, small batches, a hard task that
is mostly 0); broken series run healthy for BREAK batches, then fail one
way, with "broken": true on every batch from the break (the first also
names the detector the series is meant to trip, "expect"). Each batch is a
summary line {"run", "n", "mean", "var"} of scores drawn here, so the files
stay small. Deterministic: a fixed seed per series. Usage:

    scripts/health/make-series.py tests/health-series
"""
import json
import math
import os
import random
import sys

BREAK = 1000


def summary(scores):
    n = len(scores)
    mean = sum(scores) / n
    var = sum((s - mean) ** 2 for s in scores) / n
    # "constant" is left out: the replay takes var == 0 as constant.
    return {"n": n, "mean": round(mean, 6), "var": round(var, 6)}


def binary(rng, p, n):
    return [1.0 if rng.random() < p else 0.0 for _ in range(n)]


def learning_p(i):
    """A learning curve: the success rate rises from 0.2 to 0.7."""
    return 0.2 + 0.5 / (1 + math.exp(-(i - 1000) / 250))


def continuous(rng, i, n):
    centre = 0.5 + 0.1 * math.sin(i / 300)
    return [min(1.0, max(0.0, rng.gauss(centre, 0.2))) for _ in range(n)]


def healthy_batch(rng, kind, i):
    if kind == "binary-learning":
        return summary(binary(rng, learning_p(i), 64))
    if kind == "continuous":
        return summary(continuous(rng, i, 32))
    if kind == "small-batches":
        return summary(binary(rng, 0.4, 8))
    if kind == "hard-task":
        return summary(binary(rng, 0.15, 16))
    raise ValueError(kind)


def broken_batch(rng, kind, i, fixed):
    """Batch i (>= BREAK) of a series broken as `kind`."""
    if kind == "explosion":  # a reward-scale bug: every score x10
        return summary([10 * s for s in binary(rng, learning_p(i), 64)])
    if kind == "collapse":  # the reward function breaks: almost always 0
        return summary(binary(rng, 0.02, 64))
    if kind == "hacked":  # a hack found: the reward climbs to 1 in 50 batches
        return summary(binary(rng, min(1.0, learning_p(i) + (i - BREAK) / 50), 64))
    if kind == "constant":  # every score the same
        return summary([0.0] * 64)
    if kind == "invalid":  # 30% of batches fail the schema gate
        if rng.random() < 0.3:
            return {"invalid": True}
        return summary(binary(rng, learning_p(i), 64))
    if kind == "dead":  # the same scores every batch: no signal
        return summary(fixed)
    if kind == "canary":  # an inflating tenant: every probe it sees fails
        b = summary(binary(rng, learning_p(i), 64))
        if rng.random() < 0.1:
            b.update(canary_probes=1, canary_failed=1)
        return b
    if kind == "nondeterministic":  # half of its re-scores differ
        b = summary(binary(rng, learning_p(i), 64))
        if rng.random() < 0.05 and rng.random() < 0.5:
            b["nondeterministic"] = True
        return b
    raise ValueError(kind)


def honest_canaries(rng, b):
    """An honest tenant's batches carry probes too (rate 0.1), all in range."""
    if rng.random() < 0.1:
        b.update(canary_probes=1, canary_failed=0)
    return b


def write(path, lines):
    with open(path, "w") as f:
        for line in lines:
            f.write(json.dumps(line, separators=(",", ":")) + "\n")


def main(out):
    os.makedirs(out, exist_ok=True)
    for seed, kind in enumerate(["binary-learning", "continuous", "small-batches", "hard-task"]):
        rng = random.Random(1000 + seed)
        write(os.path.join(out, f"healthy-{kind}.jsonl"),
              [dict(run="r1", **honest_canaries(rng, healthy_batch(rng, kind, i)))
               for i in range(2000)])
    meant_for = {"explosion": "explosion", "collapse": "collapse", "hacked": "explosion",
                 "constant": "constant", "invalid": "invalid", "dead": "dead",
                 "canary": "canary", "nondeterministic": "nondeterminism"}
    for seed, kind in enumerate(meant_for):
        rng = random.Random(2000 + seed)
        fixed = binary(rng, 0.4, 64)
        lines = []
        for i in range(BREAK + 500):
            if i < BREAK:
                b = honest_canaries(rng, healthy_batch(rng, "binary-learning", i))
            else:
                b = dict(broken_batch(rng, kind, i, fixed), broken=True)
                if i == BREAK:  # the detector this series is meant to trip
                    b["expect"] = [meant_for[kind]]
            lines.append(dict(run="r1", **b))
        write(os.path.join(out, f"broken-{kind}.jsonl"), lines)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/health-series")

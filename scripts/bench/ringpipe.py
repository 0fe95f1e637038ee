"""Scenario 11, the event pipeline at the node's rate: scenario 4's steps
with a cheaper source. build/bench/ringgen runs scripts/bench/ringgen.bpf.c
with BPF_PROG_TEST_RUN: each run writes a batch of logged file events for
one registered sandbox into the agent's own pinned ring buffer, with the
real programs' submit (no wakeup until the ring is 1/16 full) and their
drop count. Everything after the ring buffer is the agent as it runs: its
drain, decode, JSON encoding, ledger, the sink. Scenario 4's eventgen pays
a whole open syscall and a program run per event and cannot offer 200k
events/s on a 2-core node; ringgen spends about 0.2 us per event.

Rows: drops at 200k/s offered to a tmpfs file (target 0), events consumed
per core of agent CPU to /dev/null with the source flat out (target
>= 1M/s), and the agent's RSS at 200k/s (target <= 24 MiB)."""
import json
import os
import subprocess

import pipeline
from sgbench import Agent

RATES = [100000, 200000, 400000, 0]


def source(tools, env):
    """A step's event source: ringgen on the step's one sandbox."""
    def run(boxes, rate, seconds):
        p = subprocess.run([tools["ringgen"], tools["ringgen.bpf.o"], env.env["SANDGUARD_PIN_ROOT"],
                            boxes.boxes[0].path, str(rate), str(seconds)], capture_output=True,
                           text=True, timeout=seconds * 10 + 60)
        if p.returncode != 0:
            raise RuntimeError("ringgen failed: %s" % p.stderr.strip())
        f = p.stdout.split()
        return int(f[1]), float(f[3]), float(f[5]), 1
    return run


def measure(env, tools, agent, seconds, rounds):
    """`rounds` passes over RATES per sink, each sink with a fresh agent;
    returns (step records, the agent running afterwards)."""
    out = []
    for sink, name in ((env.events + " (tmpfs)", "rtmpfs"), ("/dev/null", "rnull")):
        agent.stop()
        agent = Agent(env, events=sink.split(" ")[0])
        agent.start()
        for k in range(rounds):
            out += pipeline.measure(env, tools, agent, RATES, seconds, sink, "%s%d-" % (name, k),
                                    source(tools, env))
            if sink != "/dev/null":
                check_last_line(env.events)
    agent.stop()
    agent = Agent(env)
    agent.start()
    return out, agent


def check_last_line(path):
    """The events reached the sink whole: the file's last line is one of
    ringgen's, a complete JSON object with its sandbox's name."""
    with open(path, "rb") as f:
        f.seek(max(os.fstat(f.fileno()).st_size - 8192, 0))
        lines = f.read().split(b"\n")
    try:
        e = json.loads(lines[-2])
    except (IndexError, ValueError) as err:
        raise RuntimeError("ring pipeline: the events file does not end in a JSON line: %s" % err)
    if e.get("type") != "file_tripped" or not str(e.get("sandbox", "")).startswith("rtmpfs"):
        raise RuntimeError("ring pipeline: the last event is not ringgen's: %s" % lines[-2][:300])


def stat(values):
    return {"median": sorted(values)[len(values) // 2], "min": min(values), "max": max(values),
            "n": len(values)}


def rows(results):
    scen = "11 ring pipeline"
    out = []
    at200 = [r for r in results if r["target_rate"] == 200000 and "tmpfs" in r["events_sink"]]
    if at200:
        drops = [r["ringbuf_drops"] + r["events_lost"] for r in at200]
        out.append({"scenario": scen, "name": "drops at 200k events/s offered, sink a tmpfs file",
                    "unit": "events", "value": stat(drops),
                    "baseline": stat([r["offered_rate"] for r in at200]),
                    "baseline_name": "offered events/s", "ratio": None, "target": "0",
                    "notes": "consumed/s %s; agent CPU %s%%" %
                             (", ".join("%.0f" % r["consumed_per_s"] for r in at200),
                              ", ".join("%.0f" % r["agent_cpu_pct"] for r in at200))})
        rss = [r["agent_rss_mib"] for r in at200]
        out.append({"scenario": scen, "name": "agent RSS (VmRSS) after a 200k events/s step, tmpfs file",
                    "unit": "MiB", "value": stat(rss),
                    "baseline": {"median": 24.0, "min": 24.0, "max": 24.0, "n": 1},
                    "baseline_name": "target", "ratio": max(rss) / 24.0, "target": "<= 1.00x",
                    "notes": "peak (VmHWM) over the agent's life %.1f MiB" %
                             max(r["agent_peak_rss_mib"] for r in at200)})
    for sink in ("/dev/null", "tmpfs"):
        flat = [r for r in results if r["target_rate"] == 0 and sink in r["events_sink"]]
        pcs = [pipeline.per_core(r) for r in flat if pipeline.per_core(r)]
        if pcs:
            s = stat(pcs)
            out.append({"scenario": scen, "name": "events consumed per core of agent CPU, sink %s, source "
                        "flat out" % ("a tmpfs file" if sink == "tmpfs" else sink),
                        "unit": "events/s", "value": s,
                        "baseline": {"median": 1e6, "min": 1e6, "max": 1e6, "n": 1},
                        "baseline_name": "target", "ratio": s["median"] / 1e6, "target": ">= 1.00x",
                        "lower_is_better": False,
                        "notes": "offered/s %s, consumed/s %s, drops %s" %
                                 (", ".join("%.0f" % r["offered_rate"] for r in flat),
                                  ", ".join("%.0f" % r["consumed_per_s"] for r in flat),
                                  ", ".join(str(r["ringbuf_drops"]) for r in flat))})
    return out


def steps_rows(results):
    """One row per step, as scenario 4 prints them."""
    out = pipeline.rows(results)
    for r in out:
        r["scenario"] = "11 ring pipeline"
    return [r for r in out if "detail" in r]

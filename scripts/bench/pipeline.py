"""Scenario 4, the event pipeline: build/bench/eventgen opens a file
outside the allowlist at a fixed rate inside sandboxes whose policy says
"file": "log", so each open is one logged file event, end to end: the
kernel program, the ring buffer, the agent's decode, JSON encoding, the
ledger and one write to the events file. Rates rise step by step; for
each: events the agent consumed per second, ring-buffer drops, events
lost in userspace, agent CPU% and RSS (peak: VmHWM).

The kernel sends at most SG_EVENTS_PER_SANDBOX events per sandbox, so each
step spreads its events over as many fresh registered sandboxes as it
needs (a node's events come from many sandboxes too)."""
import math
import os
import re
import subprocess
import time

from sgbench import Control, SandboxCgroup, log

TENANT = "events"
CLK_TCK = os.sysconf("SC_CLK_TCK")
FLAT_OUT_MAX = 400000        # events/s a flat-out step is provisioned for
SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def per_sandbox():
    """Events to draw from one sandbox: a little under the kernel's cap
    (include/abi/maps.h), which its exit event also counts against."""
    try:
        with open(os.path.join(SRC, "include", "abi", "maps.h")) as f:
            m = re.search(r"#define\s+SG_EVENTS_PER_SANDBOX\s+(\d+)", f.read())
        if m:
            return max(int(m.group(1)) - 24, 1)
    except OSError:
        pass
    return 1000


def policy(env):
    return env.base_policy(TENANT, actions={"egress": "kill", "file": "log", "fork": "kill",
                                            "exec": "kill"})


def denied_file(env):
    """A file no policy allows: in the bench dir, outside programs/."""
    path = os.path.join(env.dir, "not-allowlisted.txt")
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write("x\n")
        os.chmod(path, 0o644)
    return path


def counters(env):
    st = env.status()
    if not st:
        raise RuntimeError("the agent did not answer status")
    return st["events_seen"], st["ringbuf_drops"], st["events_lost"]


def drained(env, before_seen, want, limit_s=60):
    """Wait until the agent has consumed `want` more events than
    before_seen or stopped making progress; (seen, time it finished)."""
    start = time.monotonic()
    last, last_change = None, start
    while True:
        seen = counters(env)[0]
        now = time.monotonic()
        if seen - before_seen >= want:
            return seen, now
        if seen != last:
            last, last_change = seen, now
        elif now - last_change > 1.0 or now - start > limit_s:
            return seen, last_change
        time.sleep(0.05)


class Sandboxes:
    """`count` fresh registered sandboxes of the events tenant, listed one
    cgroup per line in a file for eventgen; removed by drop()."""

    def __init__(self, env, prefix, count):
        self.env = env
        self.boxes = []
        self.list = os.path.join(env.dir, "eventgen-%s.list" % prefix)
        conn = Control(env)
        try:
            for i in range(count):
                sb = SandboxCgroup(env, TENANT, "%s-%d" % (prefix, i))
                self.boxes.append(sb)
                sb.register(conn)
        finally:
            conn.close()
        with open(self.list, "w") as f:
            f.write("".join(sb.path + "\n" for sb in self.boxes))

    def drop(self):
        conn = Control(self.env)
        try:
            for sb in self.boxes:
                sb.unregister(conn)
        finally:
            conn.close()
        for sb in self.boxes:
            sb.remove()
        os.unlink(self.list)


def run_gen(tools, boxes, path, rate, seconds, per):
    p = subprocess.run([tools["eventgen"], "--cgroups", boxes.list, "--per", str(per), path,
                        str(rate), str(seconds)], capture_output=True, text=True,
                       timeout=seconds * 10 + 60)
    if p.returncode != 0:
        raise RuntimeError("eventgen failed: %s" % p.stderr.strip())
    f = p.stdout.split()
    return int(f[1]), float(f[3]), float(f[5]), int(f[7])


def step(env, tools, agent, path, rate, seconds, name, source=None):
    """One rate step. `source(boxes, rate, seconds)` makes the events and
    returns (events offered, seconds, offered/s, sandboxes used); the
    default is eventgen's logged opens over fresh sandboxes, scenario 11's
    is ringgen on one (scripts/bench/ringpipe.py)."""
    if source is None:
        per = per_sandbox()
        count = math.ceil((rate or FLAT_OUT_MAX) * seconds / per) + 1
        source = lambda boxes, rate, seconds: run_gen(tools, boxes, path, rate, seconds, per)
    else:
        per, count = None, 1
    boxes = Sandboxes(env, name, count)
    try:
        seen0, drops0, lost0 = counters(env)
        cpu0 = agent.cpu_ticks()
        t0 = time.monotonic()
        opens, gen_s, offered, used = source(boxes, rate, seconds)
        seen, t_done = drained(env, seen0, opens)
        cpu1 = agent.cpu_ticks()
        seen1, drops1, lost1 = counters(env)
    finally:
        boxes.drop()
    busy_s = max(t_done - t0, gen_s)
    rss, hwm = agent.memory_kib()
    return {"target_rate": rate, "offered_rate": offered, "events_generated": opens,
            "generator_seconds": gen_s, "sandboxes_used": used, "events_per_sandbox": per,
            "events_consumed": seen1 - seen0, "consumed_per_s": (seen1 - seen0) / busy_s,
            "drain_s": busy_s - gen_s, "ringbuf_drops": drops1 - drops0,
            "events_lost": lost1 - lost0,
            "agent_cpu_pct": 100.0 * (cpu1 - cpu0) / CLK_TCK / busy_s,
            "agent_cpu_us_per_event": 1e6 * (cpu1 - cpu0) / CLK_TCK / max(seen1 - seen0, 1),
            "agent_rss_mib": rss / 1024.0, "agent_peak_rss_mib": hwm / 1024.0}


def measure(env, tools, agent, rates, seconds, sink, name, source=None):
    """One pass over the rates with the agent as it runs now (writing its
    events to `sink`, described as `name` in sandbox names); `source` as
    for step()."""
    path = denied_file(env)
    out = []
    for k, rate in enumerate(rates):
        r = step(env, tools, agent, path, rate, seconds, "%s%d" % (name, k), source)
        r["events_sink"] = sink
        out.append(r)
        log("pipeline: %s rate %s: offered %.0f/s consumed %.0f/s drops %d cpu %.0f%% rss %.1f MiB" %
            (name, rate or "max", r["offered_rate"], r["consumed_per_s"], r["ringbuf_drops"],
             r["agent_cpu_pct"], r["agent_peak_rss_mib"]))
    return out


def profile(env, tools, agent, seconds):
    """Where the agent's CPU goes with the generator flat out: perf's
    cpu-clock samples of the agent, by shared object and by symbol (the
    top ones, percent of samples). None without a working perf."""
    per = per_sandbox()
    boxes = Sandboxes(env, "profile", math.ceil(FLAT_OUT_MAX * (seconds + 2) / per) + 1)
    data = os.path.join(env.dir, "perf.data")
    gen = subprocess.Popen([tools["eventgen"], "--cgroups", boxes.list, "--per", str(per),
                            denied_file(env), "0", str(seconds + 2)], stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        rec = subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", "1999", "-p", str(agent.pid),
                              "-o", data, "--", "sleep", str(seconds)], capture_output=True, text=True)
        gen.wait()
        if rec.returncode != 0:
            log("pipeline: no agent profile (perf record failed: %s)" % rec.stderr.strip()[-200:])
            return None
        out = {}
        for key in ("dso", "sym"):
            rep = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "-g", "none",
                                  "--sort", key], capture_output=True, text=True).stdout
            top = []
            for line in rep.splitlines():
                f = line.split(None, 1)
                if len(f) == 2 and f[0].endswith("%"):
                    top.append((f[1].strip(), float(f[0][:-1])))
            out["by_" + key] = top[:12]
        return out
    except OSError as e:
        log("pipeline: no agent profile (perf: %s)" % e)
        return None
    finally:
        if gen.poll() is None:
            gen.kill()
            gen.wait()
        boxes.drop()


def per_core(r):
    """Events consumed per second of the agent's CPU in one step."""
    cpu_s = r["agent_cpu_us_per_event"] * max(r["events_consumed"], 1) / 1e6
    return r["events_consumed"] / cpu_s if cpu_s > 0 else None


def summary_rows(results):
    """Events per core of agent CPU (the busiest step of each sink) and the
    agent's peak RSS over the run, against their targets."""
    out = []
    for sink in sorted({r["events_sink"] for r in results}):
        steps = [r for r in results if r["events_sink"] == sink and per_core(r)]
        if not steps:
            continue
        busiest = max(steps, key=lambda r: r["events_consumed"])
        pc = per_core(busiest)
        label = "tmpfs file" if "tmpfs" in sink else sink
        out.append({"scenario": "4 event pipeline",
                    "name": "events consumed per core of agent CPU, sink %s" % label,
                    "unit": "events/s", "value": {"median": pc, "min": pc, "max": pc, "n": 1},
                    "baseline": {"median": 1e6, "min": 1e6, "max": 1e6, "n": 1},
                    "baseline_name": "target", "ratio": pc / 1e6, "target": ">= 1.00x",
                    "lower_is_better": False,
                    "notes": "%.2f us of agent CPU per event at %.0f events/s consumed" %
                             (busiest["agent_cpu_us_per_event"], busiest["consumed_per_s"])})
    peak = max(r["agent_peak_rss_mib"] for r in results)
    out.append({"scenario": "4 event pipeline", "name": "agent peak RSS (VmHWM), whole run",
                "unit": "MiB", "value": {"median": peak, "min": peak, "max": peak, "n": 1},
                "baseline": {"median": 24.0, "min": 24.0, "max": 24.0, "n": 1},
                "baseline_name": "target", "ratio": peak / 24.0, "target": "<= 1.00x",
                "lower_is_better": True})
    return out


def rows(results):
    out = []
    for r in results:
        sink = "tmpfs file" if "tmpfs" in r["events_sink"] else r["events_sink"]
        label = "events to %s, %s" % (sink, ("rate %dk/s" % (r["target_rate"] // 1000))
                                      if r["target_rate"] else "generator flat out")
        out.append({"scenario": "4 event pipeline", "name": label, "unit": "events/s consumed",
                    "value": {"median": r["consumed_per_s"], "min": r["consumed_per_s"],
                              "max": r["consumed_per_s"], "n": 1},
                    "baseline": {"median": r["offered_rate"], "min": r["offered_rate"],
                                 "max": r["offered_rate"], "n": 1},
                    "baseline_name": "offered (generated) events/s",
                    "ratio": r["consumed_per_s"] / r["offered_rate"] if r["offered_rate"] else None,
                    "target": "0 drops at 200k/s, RSS <= 24 MiB",
                    "lower_is_better": False,
                    "notes": "drops %d, lost %d, agent CPU %.0f%% (%.2f us/event), RSS %.1f MiB (peak %.1f), "
                             "drain %.2f s, %s" %
                             (r["ringbuf_drops"], r["events_lost"], r["agent_cpu_pct"],
                              r["agent_cpu_us_per_event"], r["agent_rss_mib"], r["agent_peak_rss_mib"],
                              r["drain_s"], ("%d sandboxes x <= %d events" %
                                             (r["sandboxes_used"], r["events_per_sandbox"]))
                              if r["events_per_sandbox"] else "one sandbox, no per-sandbox cap"),
                    "detail": r})
    return out + summary_rows(results)

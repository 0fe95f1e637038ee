"""Scenarios 2 and 3, hook overhead: tight loops of open/close, fork+exec+
wait of /usr/bin/true, TCP connect/close to a loopback listener and
getppid() (a system call no program hooks), run outside any sandbox
(scenario 2) and inside a registered sandbox cgroup whose policy allows
exactly what the loops do (scenario 3). Each loop runs in three states, in
alternating cycles (on/idle/off, then off/idle/on, ...) so that drift on
this shared machine hits every arm alike:

- "on": the agent attached, with a sandbox registered (scenario 3's): the
  node is running sandboxes, so the fallback's file programs are attached;
- "idle": the agent attached, no sandbox on the node: the fallback's file
  programs are detached (src/control/ondemand.h; the agent is started with
  SANDGUARD_DETACH_AFTER_IDLE_MS=0 so it detaches them at its next tick);
- "off": the agent not loaded (stopped and its pins removed).

The same cycles also time a few `sandguard exec` launches in the on and off
states: the agent's own share of the launch cost (scenario 1's breakdown)."""
import json
import os
import random
import socket
import statistics
import subprocess
import time

from sgbench import SandboxCgroup, log, now_ms, summary

TENANT = "hooks"
OPEN_PATH = "/usr/lib/python3.11/os.py"     # allowlisted (under /usr)
EXEC_PATH = "/usr/bin/true"                 # allowlisted by the exec rule

LABELS = {
    "open": "open+close %s" % OPEN_PATH,
    "forkexec": "fork+exec+wait %s" % EXEC_PATH,
    "connect": "TCP connect+close to 127.0.0.1 listener",
    "getppid": "getppid() (no program hooks it: the syscall slow path)",
}
OUTSIDE = ("open", "forkexec", "connect", "getppid")
INSIDE = ("open", "forkexec", "connect")
WHERE = {"on": ("outside", "inside"), "idle": ("outside",), "off": ("outside", "inside")}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def policy(env, port):
    """Allows what the loops do inside the sandbox and kills on anything
    else: a loop that strays dies and the run fails loudly."""
    return env.base_policy(TENANT, egress={"allow": [{"cidr": "127.0.0.1", "port": port,
                                                       "proto": "tcp"}]})


class Fresh:
    """Where a loop runs inside: the shared sandbox, except fork+exec,
    which gets a fresh one per run. Each of its iterations is two events
    (exec, exit) and the kernel sends at most SG_EVENTS_PER_SANDBOX per
    sandbox, counting the rest: one long-lived sandbox would measure the
    capped path, not the evented one a reward sandbox sees."""

    def __init__(self, env, shared, registered):
        self.env = env
        self.shared = shared
        self.registered = registered
        self.n = 0
        self.made = None

    def __enter__(self):
        return self

    def path(self, mode):
        if mode != "forkexec":
            return self.shared.path
        self.n += 1
        self.made = SandboxCgroup(self.env, TENANT, "forkexec-%d" % self.n)
        if self.registered:
            self.made.register()
        return self.made.path

    def done(self):
        if self.made:
            if self.registered:
                self.made.unregister()
            self.made.remove()
            self.made = None

    def __exit__(self, *exc):
        self.done()


def run_loop(tools, mode, iters, arg, cgroup=None):
    argv = [tools["hookloop"]] + (["--cgroup", cgroup] if cgroup else []) + [mode, str(iters), str(arg)]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError("hookloop %s%s failed: %s" % (mode, " in sandbox" if cgroup else "",
                                                          p.stderr.strip()))
    f = p.stdout.split()
    return float(f[3]), float(f[4])     # mean ns/op, fastest chunk's ns/op


def loop_args(port):
    return {"open": OPEN_PATH, "forkexec": EXEC_PATH, "connect": port, "getppid": "-"}


def ondemand_links(pin_root):
    """The on-demand links attached now (gen-N/ondemand/link/*)."""
    n = 0
    for gen in os.listdir(pin_root) if os.path.isdir(pin_root) else ():
        d = os.path.join(pin_root, gen, "ondemand", "link")
        if gen.startswith("gen-") and os.path.isdir(d):
            n += len(os.listdir(d))
    return n


def wait_detached(env, timeout=10):
    """Until the agent detached its on-demand programs (it has no
    sandbox); immediately where it has none (LSM mode)."""
    pin_root = env.env["SANDGUARD_PIN_ROOT"]
    end = time.monotonic() + timeout
    while ondemand_links(pin_root):
        if time.monotonic() > end:
            raise RuntimeError("the agent did not detach its file programs in %d s" % timeout)
        time.sleep(0.1)


def enter_state(env, agent, sandbox, state):
    if state == "off":
        return
    agent.start()
    if state == "on":
        sandbox.register()
    else:
        wait_detached(env)


def leave_state(agent, state):
    if state != "off":
        agent.stop()
        agent.unload()


def measure(env, tools, agent, cycles, reps, iters, port, launch_cmds=None, launches=0, seed=2):
    """ns/op samples per (where, mode, state); where is "outside" or
    "inside", state "on", "idle" or "off" (see the module's comment)."""
    sandbox = SandboxCgroup(env, TENANT, "hookloop")
    args = loop_args(port)
    samples = {}
    launch_ms = {}
    rng = random.Random(seed)
    env.env["SANDGUARD_DETACH_AFTER_IDLE_MS"] = "0"
    try:
        for c in range(cycles):
            for state in (("on", "idle", "off") if c % 2 == 0 else ("off", "idle", "on")):
                enter_state(env, agent, sandbox, state)
                jobs = [(where, mode) for where in WHERE[state]
                        for mode in (OUTSIDE if where == "outside" else INSIDE)] * reps
                rng.shuffle(jobs)
                with Fresh(env, sandbox, state == "on") as inside:
                    for where, mode in jobs:
                        ns, fastest = run_loop(tools, mode, iters[mode], args[mode],
                                               inside.path(mode) if where == "inside" else None)
                        inside.done()
                        samples.setdefault((where, mode, state), []).append(ns)
                        samples.setdefault((where, mode, state, "fastest"), []).append(fastest)
                for _ in range(launches if state != "idle" else 0):
                    for name in ("sandguard", "plain"):
                        t0 = now_ms()
                        p = subprocess.run(launch_cmds[name], env=env.env, capture_output=True,
                                           text=True)
                        if p.returncode != 0:
                            raise RuntimeError("launch %s with the agent %s failed (exit %d): %s" %
                                               (name, state, p.returncode, p.stderr[-300:]))
                        launch_ms.setdefault((name, state), []).append(now_ms() - t0)
                leave_state(agent, state)
                log("hooks: cycle %d/%d, agent %s done" % (c + 1, cycles, state))
    finally:
        env.env.pop("SANDGUARD_DETACH_AFTER_IDLE_MS", None)
        sandbox.remove()
    return samples, launch_ms


ROWS = (("outside", "idle", "2 hooks outside, no sandbox on the node", "<= 1.01x"),
        ("outside", "on", "2 hooks outside, sandboxes running", "<= 1.01x"),
        ("inside", "on", "3 hooks in sandbox", "<= 1.05x"))


def annotate(rows_, costs):
    """Adds the kernel's own figure to each hook row: the agent's programs'
    time per operation, as a share of the baseline's median operation. It
    does not move with the machine's noise the way a ratio of two timings
    does."""
    keys = {scen: "%s %s" % (where, state) for where, state, scen, _ in ROWS}
    modes = {v: k for k, v in LABELS.items()}
    for r in rows_:
        per = (costs or {}).get("%s %s" % (keys.get(r["scenario"], ""), modes.get(r["name"], "")))
        if per is None:
            continue
        ns = sum(p["ns_per_op"] for p in per.values())
        top = sorted(per.items(), key=lambda kv: -kv[1]["ns_per_op"])[:3]
        r["programs_ns_per_op"] = ns
        r["notes"] = "agent programs (bpf_stats): %.0f ns/op = %.1f%% of the baseline op; %s" % (
            ns, 100.0 * ns / r["baseline"]["median"],
            ", ".join("%s %.0f" % (name, p["ns_per_op"]) for name, p in top) or "none ran")


def ratio_interval(on, off, rounds=2000, seed=7):
    """A 95% bootstrap interval of statistics.median(on) / statistics.median(off): each arm's
    samples resampled with replacement. An interval that straddles the
    target says the run cannot tell the cost from the noise."""
    rng = random.Random(seed)
    r = sorted(statistics.median(rng.choices(on, k=len(on))) / statistics.median(rng.choices(off, k=len(off)))
               for _ in range(rounds))
    return r[int(0.025 * rounds)], r[int(0.975 * rounds) - 1]


def rows(samples):
    """Per loop and state: the ratio of the whole passes' medians, and the
    ratio of the medians of each pass's fastest chunk (firmer on a shared
    machine: preemptions inflate a pass's mean, rarely its fastest chunk),
    with its 95% bootstrap interval."""
    out = []
    for where, state, scen, target in ROWS:
        for mode in (OUTSIDE if where == "outside" else INSIDE):
            if (where, mode, state) not in samples:
                continue
            on = summary(samples[(where, mode, state)])
            off = summary(samples[(where, mode, "off")])
            out.append({"scenario": scen, "name": LABELS[mode], "unit": "ns/op",
                        "value": on, "baseline": off, "baseline_name": "agent not loaded",
                        "ratio": on["median"] / off["median"], "target": target,
                        "lower_is_better": True})
            fon = samples.get((where, mode, state, "fastest"))
            foff = samples.get((where, mode, "off", "fastest"))
            if fon and foff:
                lo, hi = ratio_interval(fon, foff)
                out.append({"scenario": scen, "name": LABELS[mode] + ", fastest chunks", "unit": "ns/op",
                            "value": summary(fon), "baseline": summary(foff),
                            "baseline_name": "agent not loaded", "ratio": statistics.median(fon) / statistics.median(foff),
                            "ratio_interval_95": [lo, hi], "target": target, "lower_is_better": True,
                            "notes": "median of each pass's fastest of 40 chunks; 95%% bootstrap interval "
                                     "of the ratio %.3f-%.3f (%d passes per arm)" % (lo, hi, len(fon))})
    return out


def agent_share(launch_ms):
    """The agent's share of a launch: sandguard exec with the agent
    attached against sandguard exec with no agent (the executor's own
    layers only), timed in the same on/off cycles."""
    on = summary(launch_ms.get(("sandguard", "on"), []))
    off = summary(launch_ms.get(("sandguard", "off"), []))
    plain = summary(launch_ms.get(("plain", "on"), []) + launch_ms.get(("plain", "off"), []))
    if not on or not off:
        return None, {}
    row = {"scenario": "1 launch", "name": "sandguard exec: agent attached vs no agent (agent's share)",
           "unit": "ms/launch", "value": on, "baseline": off, "baseline_name": "sandguard exec, no agent",
           "ratio": on["median"] / off["median"], "target": None, "lower_is_better": True}
    return row, {"sandguard exec, agent attached, ms": on, "sandguard exec, no agent, ms": off,
                 "plain fork/exec, ms": plain}


def prog_stats(tools, pin_root):
    """{link name: (run_cnt, run_time_ns)} of the agent's attached programs
    (build/bench/progstats: the programs behind the pinned links)."""
    out = subprocess.run([tools["progstats"], pin_root], capture_output=True, text=True).stdout
    stats = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3:
            cnt, ns = stats.get(f[0], (0, 0))
            stats[f[0]] = (cnt + int(f[1]), ns + int(f[2]))
    return stats


def hook_costs(env, tools, agent, iters, port):
    """What each of the agent's programs costs per call during each loop,
    from the kernel's own accounting (kernel.bpf_stats_enabled, switched
    on only for this step and then restored): {"<where> <state> <loop>":
    {program: {calls per op, ns per call, ns per op}}}, for the loops
    outside with sandboxes running ("on") and with none ("idle"), and
    inside. Calls include whatever else ran on the node meanwhile; per-op
    figures divide by the loop's iterations."""
    knob = "/proc/sys/kernel/bpf_stats_enabled"
    try:
        with open(knob) as f:
            before = f.read().strip()
    except OSError:
        return None
    sandbox = SandboxCgroup(env, TENANT, "hookcost")
    args = loop_args(port)
    pin_root = env.env["SANDGUARD_PIN_ROOT"]
    result = {}
    env.env["SANDGUARD_DETACH_AFTER_IDLE_MS"] = "0"
    try:
        with open(knob, "w") as f:
            f.write("1")
        for state in ("idle", "on"):
            enter_state(env, agent, sandbox, state)
            for where in WHERE[state]:
                for mode in (OUTSIDE if where == "outside" else INSIDE):
                    with Fresh(env, sandbox, True) as inside:
                        cgroup = inside.path(mode) if where == "inside" else None
                        s0 = prog_stats(tools, pin_root)
                        run_loop(tools, mode, iters[mode], args[mode], cgroup)
                        s1 = prog_stats(tools, pin_root)
                    n = iters[mode] * 1.1      # hookloop's untimed warm-up is a tenth more
                    per = {}
                    for name, (cnt, ns) in s1.items():
                        dc, dn = cnt - s0.get(name, (0, 0))[0], ns - s0.get(name, (0, 0))[1]
                        if dc > 0:
                            per[name] = {"calls_per_op": dc / n, "ns_per_call": dn / dc,
                                         "ns_per_op": dn / n}
                    result["%s %s %s" % (where, state, mode)] = per
            leave_state(agent, state)
    finally:
        with open(knob, "w") as f:
            f.write(before)
        env.env.pop("SANDGUARD_DETACH_AFTER_IDLE_MS", None)
        if agent.proc:
            agent.stop()
            agent.unload()
        sandbox.remove()
    return result

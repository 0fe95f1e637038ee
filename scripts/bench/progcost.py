"""By hand: what each of the agent's programs costs per call inside a
sandbox, for one or more builds measured A/B interleaved (issue 15's
breakdown of sg_exec, sg_exit and sg_fork). Each round starts each build's
agent in turn (the order alternates between rounds), registers a fresh
sandbox per loop (an exec loop in a long-lived sandbox would hit the
per-sandbox event cap and measure the capped path), switches
kernel.bpf_stats_enabled on (restored after), and reads every program's
run count and time before and after the loop (build/bench/progstats). The
same rounds time the loops with no agent loaded ("off").

    python3 -B scripts/bench/progcost.py [--rounds N] [--forkexec N] [--open N] BUILD...

Prints per build and program the median ns per call and ns per loop
iteration, and each loop's median ns/op against "off". A syscall or
sched tracepoint program's counts are node-wide: other work on the node
adds its calls (cheap, outside sandboxes) to the per-call average; the
ns per op divides by the loop's iterations only. Needs root and
BUILD/bench/{hookloop,progstats} (scripts/bench/run.sh builds them)."""
import argparse
import os
import statistics
import sys

import hooks
from sgbench import Agent, Env, SandboxCgroup, log

KNOB = "/proc/sys/kernel/bpf_stats_enabled"


def one(env, tools, mode, iters, arg, registered):
    """One loop in a fresh sandbox: ((mean, fastest chunk's) ns/op,
    {program: (calls, ns)})."""
    sb = SandboxCgroup(env, hooks.TENANT, "cost-%s-%d" % (mode, one.n))
    one.n += 1
    try:
        if registered:
            sb.register()
        pin_root = env.env["SANDGUARD_PIN_ROOT"]
        s0 = hooks.prog_stats(tools, pin_root) if registered else {}
        ns = hooks.run_loop(tools, mode, iters, arg, sb.path)
        s1 = hooks.prog_stats(tools, pin_root) if registered else {}
        if registered:
            sb.unregister()
    finally:
        sb.remove()
    per = {}
    for name, (cnt, t) in s1.items():
        dc, dn = cnt - s0.get(name, (0, 0))[0], t - s0.get(name, (0, 0))[1]
        if dc > 0:
            per[name] = (dc, dn)
    return ns, per


one.n = 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--forkexec", type=int, default=400)
    ap.add_argument("--open", type=int, default=0)
    ap.add_argument("builds", nargs="+")
    a = ap.parse_args()
    builds = [os.path.abspath(b) for b in a.builds]
    # The loop and the reader from the first build that has them (run.sh
    # builds them; a baseline copy need not).
    bench = next((os.path.join(b, "bench") for b in builds
                  if os.path.exists(os.path.join(b, "bench", "progstats"))), None)
    if not bench:
        sys.exit("progcost: no BUILD/bench/progstats: run scripts/bench/run.sh once")
    tools = {"hookloop": os.path.join(bench, "hookloop"), "progstats": os.path.join(bench, "progstats")}
    port = hooks.free_port()
    loops = [("forkexec", a.forkexec, hooks.EXEC_PATH)] + ([("open", a.open, hooks.OPEN_PATH)] if a.open else [])
    with open(KNOB) as f:
        before = f.read().strip()
    envs = {}
    res = {}
    try:
        for b in builds:
            envs[b] = Env(os.path.join(b, "sandguard"), "cost%d" % len(envs))
            envs[b].write_policy(hooks.policy(envs[b], port))
        with open(KNOB, "w") as f:
            f.write("1")
        arms = builds + ["off"]
        for r in range(a.rounds):
            for arm in (arms if r % 2 == 0 else arms[::-1]):
                env = envs[builds[0] if arm == "off" else arm]
                agent = None
                if arm != "off":
                    agent = Agent(env)
                    agent.start()
                try:
                    for mode, iters, arg in loops:
                        ns, per = one(env, tools, mode, iters, arg, arm != "off")
                        res.setdefault((arm, mode, "loop"), []).append(ns[0])
                        res.setdefault((arm, mode, "fastest"), []).append(ns[1])
                        n = iters * 1.1  # hookloop's untimed warm-up is a tenth more
                        for name, (dc, dn) in per.items():
                            res.setdefault((arm, mode, name), []).append((dn / dc, dn / n, dc / n))
                finally:
                    if agent:
                        agent.stop()
                        agent.unload()
            with open("/proc/loadavg") as f:
                load = f.read().split()[0]
            log("progcost: round %d/%d, load %s" % (r + 1, a.rounds, load))
    finally:
        with open(KNOB, "w") as f:
            f.write(before)
        for env in envs.values():
            env.cleanup()
    for mode, _, _ in loops:
        off = statistics.median(res[("off", mode, "loop")])
        off_f = statistics.median(res[("off", mode, "fastest")])
        print("%s: agent not loaded %.0f ns/op (fastest chunks %.0f)" % (mode, off, off_f))
        for b in builds:
            ns = statistics.median(res[(b, mode, "loop")])
            ns_f = statistics.median(res[(b, mode, "fastest")])
            print("  %s: %.0f ns/op, %.3fx (fastest chunks %.0f, %.3fx)" % (b, ns, ns / off, ns_f,
                                                                           ns_f / off_f))
            progs = sorted(k[2] for k in res if k[0] == b and k[1] == mode and k[2] not in ("loop", "fastest"))
            for name in progs:
                v = res[(b, mode, name)]
                print("    %-24s %8.0f ns/call %8.0f ns/op %6.2f calls/op (%d runs)" %
                      (name, statistics.median(x[0] for x in v), statistics.median(x[1] for x in v),
                       statistics.median(x[2] for x in v), len(v)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

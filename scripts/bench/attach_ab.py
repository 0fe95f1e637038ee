"""By hand: what the fallback's file programs cost, attached against
detached, with the agent running throughout (no agent restarts between
the arms, so the two alternate every second or two instead of every few
minutes and share the machine's moments):

- "attached": a sandbox is registered, so the on-demand programs
  (sys_exit_open*) are attached; the loops run inside that sandbox
  (an allowed open, judged) and outside every sandbox;
- "unregistered": the programs attached (another sandbox is registered),
  the loops in the same cgroup, now no sandbox: what a task as deep as a
  sandbox pays for the lookup alone;
- "detached": no sandbox registered and the agent's idle detach done
  (SANDGUARD_DETACH_AFTER_IDLE_MS=0): no program runs on an open; the same
  loops run in the same cgroup and outside.

For an open, "detached" is what "agent not loaded" is (the tp_btf task
programs do not run in an open or getppid loop). Each pass reports its
fastest of 40 chunks (hookloop); the ratio of the arms' medians comes with
a 95% bootstrap interval (hooks.ratio_interval).

    python3 -B scripts/bench/attach_ab.py BUILD [ROUNDS] [OPEN_ITERS]

Needs root and BUILD/bench/hookloop (scripts/bench/run.sh builds it)."""
import os
import statistics
import sys

import hooks
from sgbench import Agent, Env, SandboxCgroup, log


def main():
    build = os.path.abspath(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    n_open = int(sys.argv[3]) if len(sys.argv) > 3 else 20000
    tools = {"hookloop": os.path.join(build, "bench", "hookloop")}
    env = Env(os.path.join(build, "sandguard"), "ab")
    port = hooks.free_port()
    env.write_policy(hooks.policy(env, port))
    env.env["SANDGUARD_DETACH_AFTER_IDLE_MS"] = "0"
    agent = Agent(env)
    loops = (("inside", "open", n_open, hooks.OPEN_PATH), ("outside", "open", n_open, hooks.OPEN_PATH),
             ("outside", "getppid", n_open * 5, "-"))
    res = {}
    try:
        agent.start()
        sb = SandboxCgroup(env, hooks.TENANT, "ab")
        other = SandboxCgroup(env, hooks.TENANT, "ab-other")
        arms = ["attached", "unregistered", "detached"]
        for r in range(rounds):
            for arm in (arms if r % 2 == 0 else arms[::-1]):
                if arm == "attached":
                    sb.register()
                elif arm == "unregistered":
                    other.register()
                else:
                    hooks.wait_detached(env)
                for where, mode, n, arg in loops:
                    if where == "outside" and arm == "unregistered":
                        continue
                    ns = hooks.run_loop(tools, mode, n, arg, sb.path if where == "inside" else None)[1]
                    res.setdefault((where, mode, arm), []).append(ns)
                if arm == "attached":
                    sb.unregister()
                elif arm == "unregistered":
                    other.unregister()
            log("attach_ab: round %d/%d" % (r + 1, rounds))
        for where, mode, _, _ in loops:
            for a, b in (("attached", "detached"), ("unregistered", "detached"), ("attached", "unregistered")):
                if (where, mode, a) not in res or (where, mode, b) not in res:
                    continue
                on, off = res[(where, mode, a)], res[(where, mode, b)]
                lo, hi = hooks.ratio_interval(on, off)
                print("%-7s %-8s %-12s %7.0f ns  %-12s %7.0f ns  %+5.0f ns  ratio %.3f (95%%: %.3f-%.3f, "
                      "%d passes per arm)" % (where, mode, a, statistics.median(on), b, statistics.median(off),
                                              statistics.median(on) - statistics.median(off),
                                              statistics.median(on) / statistics.median(off), lo, hi, len(on)))
        sb.remove()
        other.remove()
    finally:
        env.cleanup()


if __name__ == "__main__":
    main()

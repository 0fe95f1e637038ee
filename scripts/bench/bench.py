"""sandguard benchmarks: launch, hook overhead (outside and inside
sandboxes), event pipeline, verifier throughput, kill latency, the
shapes a fallback file hook could take. Every figure is a ratio
against a baseline measured in the same run; the two arms of each
comparison are interleaved. Prints one table and writes results.json.

    bench.py --sandguard BIN --tools DIR --out FILE [--quick] [--only 1,2,3,4,5,6,7,8,9,11,12,13,14,15,16,17,18]

Run through scripts/bench/run.sh (make bench), which builds the helpers."""
import argparse
import os
import subprocess
import sys
import time

import admission
import artifacts
import cpumeter
import hooks
import integrity
import interp
import killlat
import launch
import layers
import pipeline
import report
import ringpipe
import sessions
import syscost
import verifier
import tenants
import warm
from sgbench import Agent, Env, cgroup2_mount, foreign_agents, log, machine

QUICK = {
    "launch_rounds": 10, "breakdown_runs": 3,
    "hook_cycles": 2, "hook_reps": 3, "hook_launches": 2,
    "hook_iters": {"open": 20000, "forkexec": 100, "connect": 1500, "getppid": 50000},
    "hook_costs": True, "kills": 40, "syscost_rounds": 3,
    "rates": [50000, 100000, 200000, 0], "rate_seconds": 2, "sinks": ["tmpfs"], "ring_rounds": 1,
    "programs": 16, "chunks": 2,
    "layer_rounds": 20,
    "warm_rounds": 10, "warm_callers": 128, "warm_each": 2,
    "integrity_each": 8,
    "compile_programs": 4,
    "session_rounds": 100, "session_idle": 64,
    "artifact_rounds": 20,
    "iteration_problems": 32,
    "admission_rounds": 5, "admission_ops": 300,
}
FULL = {
    "launch_rounds": 40, "breakdown_runs": 5,
    "hook_cycles": 6, "hook_reps": 3, "hook_launches": 5,
    "hook_iters": {"open": 200000, "forkexec": 400, "connect": 10000, "getppid": 500000},
    "hook_costs": True, "kills": 300, "syscost_rounds": 10,
    "rates": [25000, 50000, 100000, 200000, 400000, 0], "rate_seconds": 5,
    "sinks": ["tmpfs", "/dev/null"], "ring_rounds": 3,
    "programs": 1024, "chunks": 16,
    "layer_rounds": 100,
    "warm_rounds": 40, "warm_callers": 128, "warm_each": 4,
    "integrity_each": 64,
    "compile_programs": 16,
    "session_rounds": 1000, "session_idle": 256,
    "artifact_rounds": 60,
    "iteration_problems": 1024,
    "admission_rounds": 10, "admission_ops": 500,
}


def source_version():
    """The commit the benchmarked tree is at, "+dirty" with local changes."""
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        head = subprocess.run(["git", "-C", src, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", src, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
    except OSError:
        return None
    return head + ("+dirty" if dirty else "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sandguard", required=True)
    ap.add_argument("--tools", required=True, help="directory with plainrun, hookloop, eventgen, cgjoin")
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18", help="scenarios to run, e.g. 1,4")
    ap.add_argument("--programs", type=int, help="verifier programs and iteration problems "
                    "(scenarios 5 and 17; default 16 and 32 quick, 1024 full)")
    a = ap.parse_args()
    cfg = dict(QUICK if a.quick else FULL)
    if a.programs:
        cfg["programs"] = cfg["iteration_problems"] = a.programs
    only = set(a.only.split(","))
    tools = {k: os.path.join(a.tools, k)
             for k in ("plainrun", "hookloop", "eventgen", "cgjoin", "layers", "sandbox_run",
                       "progstats", "syscost", "syscost.bpf.o", "ringgen", "ringgen.bpf.o",
                       "admission")}
    nproc = os.cpu_count() or 1

    doc = {"mode": "quick" if a.quick else "full", "config": cfg, "machine": machine(),
           "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "sandguard": a.sandguard,
           "source": source_version(),
           "foreign_sandguard_agents": foreign_agents(), "rows": []}
    if a.quick:
        log("QUICK mode: scaled down (%d launch rounds, %d hook cycles, %d s per event rate, "
            "%d verifier programs instead of 1024); figures are rougher than a full run" %
            (cfg["launch_rounds"], cfg["hook_cycles"], cfg["rate_seconds"], cfg["programs"]))
    env = Env(a.sandguard, "q" if a.quick else "f")
    port = hooks.free_port()
    launch.setup(env)
    env.write_policy(hooks.policy(env, port))
    env.write_policy(pipeline.policy(env))
    env.write_policy(killlat.policy(env))
    for policy in verifier.policies(env):
        env.write_policy(policy)
    for policy in integrity.policies(env):
        env.write_policy(policy)
    agent = Agent(env)
    t_start = time.monotonic()
    try:
        doc["agent_start_s"] = agent.start()
        if "1" in only:
            log("scenario 1: launch, %d interleaved rounds" % cfg["launch_rounds"])
            rows, times = launch.measure(env, tools, cfg["launch_rounds"])
            doc["rows"] += rows
            doc["launch_samples"] = times
            doc["launch_breakdown"] = launch.breakdown(
                env, tools, cfg["breakdown_runs"],
                os.path.join(cgroup2_mount(), "sandguard-%s-cgjoin" % env.tag))
        if "6" in only:
            log("scenario 6: isolation layers, %d interleaved rounds" % cfg["layer_rounds"])
            rows, doc["layer_samples_ms"] = layers.measure(env, tools, cfg["layer_rounds"])
            doc["rows"] += rows
            doc["rows"] += layers.relay_launch(env, tools["sandbox_run"], cfg["layer_rounds"], port)
        if "4" in only:
            log("scenario 4: event pipeline, rates %s, %d s each" % (cfg["rates"], cfg["rate_seconds"]))
            results = pipeline.measure(env, tools, agent, cfg["rates"], cfg["rate_seconds"],
                                       env.events + " (tmpfs)", "tmpfs")
            if "/dev/null" in cfg["sinks"]:
                agent.stop()
                agent = Agent(env, events="/dev/null")
                agent.start()
                results += pipeline.measure(env, tools, agent, cfg["rates"], cfg["rate_seconds"],
                                            "/dev/null", "devnull")
                agent.stop()
                agent = Agent(env)
                agent.start()
            doc["pipeline"] = results
            doc["pipeline_profile"] = pipeline.profile(env, tools, agent, 3 if a.quick else 5)
            doc["rows"] += pipeline.rows(results)
        if "11" in only:
            log("scenario 11: event pipeline, ring-buffer source, rates %s, %d s each, %d rounds" %
                (ringpipe.RATES, cfg["rate_seconds"], cfg["ring_rounds"]))
            results, agent = ringpipe.measure(env, tools, agent, cfg["rate_seconds"], cfg["ring_rounds"])
            doc["ring_pipeline"] = results
            doc["rows"] += ringpipe.rows(results) + ringpipe.steps_rows(results)
        if "7" in only:
            log("scenario 7: kill latency, %d kills" % cfg["kills"])
            doc["kill_latency"] = killlat.measure(env, tools, cfg["kills"], hooks.free_port())
            doc["rows"] += killlat.rows(doc["kill_latency"])
        if "9" in only:
            log("scenario 9: warm path, %d interleaved rounds" % cfg["warm_rounds"])
            rows, doc["warm_samples"] = warm.measure(env, tools, cfg["warm_rounds"],
                                                     cfg["warm_callers"], cfg["warm_each"])
            doc["rows"] += rows
        if "10" in only:
            log("scenario 10: warm interpreters, %d interleaved rounds" % cfg["warm_rounds"])
            rows, doc["interp_samples"] = interp.measure(env, tools, cfg["warm_rounds"])
            doc["rows"] += rows
        if "5" in only:
            # A trainer's node runs the executor: the verifier's runs go warm.
            log("scenario 5: verifier, %d programs x %d tests, %d invocations at a time, "
                "through a running executor" % (cfg["programs"], verifier.N_TESTS, nproc))
            executor = warm.Daemon(env, ["executor"], "executor listening on")
            meter = cpumeter.Meter(env.cgroot, env.cgroot + "-plain", executor.proc.pid, agent.pid)
            try:
                doc["rows"] += verifier.measure(env, cfg["programs"], cfg["chunks"], nproc, meter)
            finally:
                meter.close()
                executor.stop()
        if "12" in only:
            # Reward integrity on a full node (issue 31): the agent runs,
            # as on a trainer's node; its own executor, overcommitted.
            log("scenario 12: reward integrity, %d correct CPU-heavy programs, %d loops, %d "
                "self-starvers x %d tests, a hog tenant" % ((cfg["integrity_each"],) * 3 +
                                                            (integrity.TESTS,)))
            doc["rows"] += integrity.measure(env, cfg["integrity_each"], 4 * nproc, nproc)
        if "18" in only:
            log("scenario 18: admission with %d commitments held, %d rounds" %
                (admission.HELD, cfg["admission_rounds"]))
            rows, doc["admission_us"] = admission.measure(tools, cfg["admission_rounds"],
                                                          cfg["admission_ops"])
            doc["rows"] += rows
        if "13" in only:
            # Its own agents (10 and 10,000 policies), one after the other.
            log("scenario 13: tenants, agent start-up and reload with %s policies" %
                " and ".join(str(n) for n in tenants.COUNTS))
            doc["tenants"] = tenants.measure(a.sandguard)
            doc["rows"] += tenants.rows(doc["tenants"])
        if "14" in only:
            # Its own agent and two servers (issue 35: one compile per
            # verify, the /run_code build cache).
            log("scenario 14: C++ verify and verl-style /run_code, %d programs x %d tests" %
                (cfg["compile_programs"], 15))
            os.environ["SANDGUARD_BIN"] = a.sandguard  # the integration tests' harness
            import build_cache
            doc["compile"] = build_cache.measure(cfg["compile_programs"], 2 * nproc)
            doc["rows"] += build_cache.rows(doc["compile"])
        if "15" in only:
            # Environments' sessions (issue 33), on the bench's agent.
            rows, doc["sessions"] = sessions.measure(env, agent, cfg["session_rounds"],
                                                     cfg["session_idle"])
            doc["rows"] += rows
        if "16" in only:
            # Pinned reward artifacts (issue 37).
            log("scenario 16: pinned artifacts, %d rounds" % cfg["artifact_rounds"])
            doc["rows"] += artifacts.measure(env, cfg["artifact_rounds"])
        if "17" in only:
            # One RL iteration's shape (issue 35, item 5): its own agent
            # and server, 128 requests in flight.
            log("scenario 17: one RL iteration, %d problems x 15 tests, /v1/verify and "
                "verl-style /run_code" % cfg["iteration_problems"])
            os.environ["SANDGUARD_BIN"] = a.sandguard
            import iteration
            doc["iteration"] = iteration.measure(cfg["iteration_problems"], log=log)
            doc["rows"] += iteration.rows(doc["iteration"])
        if "2" in only or "3" in only:
            log("scenarios 2+3: hook overhead, %d on/off cycles" % cfg["hook_cycles"])
            agent.stop()
            agent.unload()
            prog, batch = launch.setup(env)
            samples, launch_ms = hooks.measure(
                env, tools, agent, cfg["hook_cycles"], cfg["hook_reps"], cfg["hook_iters"], port,
                launch.commands(env, tools, prog, batch), cfg["hook_launches"])
            hook_rows = [r for r in hooks.rows(samples) if r["scenario"][0] in only]
            doc["rows"] += hook_rows
            doc["hook_samples_ns"] = {" ".join(k): v for k, v in samples.items()}
            share_row, share = hooks.agent_share(launch_ms)
            if share_row and "1" in only:
                doc["rows"].append(share_row)
            doc.setdefault("launch_breakdown", {})["agent_share"] = share
            if cfg["hook_costs"]:
                doc["hook_costs"] = hooks.hook_costs(env, tools, agent, cfg["hook_iters"], port)
                hooks.annotate(hook_rows, doc["hook_costs"])
        if "8" in only:
            log("scenario 8: fallback hook shapes, %d rounds" % cfg["syscost_rounds"])
            doc["hook_shapes"] = syscost.measure(tools, cfg["syscost_rounds"])
            doc["rows"] += syscost.rows(doc["hook_shapes"])
    finally:
        env.cleanup()
    doc["duration_s"] = time.monotonic() - t_start
    order = {"1": 0, "9": 1, "10": 2, "2": 3, "3": 4, "4": 5, "11": 5.5, "5": 6, "6": 7, "7": 8, "8": 9, "12": 9.5, "13": 9.7, "14": 9.8,
             "15": 9.9,
             "16": 9.95, "17": 9.97, "18": 9.98}
    doc["rows"].sort(key=lambda r: order.get(r["scenario"].split()[0], 10))
    report.write(a.out, doc)
    print(report.table(doc["rows"]))
    print("\n%s run, %.0f s; other sandguard agents attached on this node: %s; results: %s" %
          (doc["mode"], doc["duration_s"], doc["foreign_sandguard_agents"], a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

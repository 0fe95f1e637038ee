"""Scenario 1, sandbox launch: a trivial Python reward (read the batch,
print n scores) run three ways, interleaved round by round in a shuffled
order: `sandguard exec` with the agent running, the plain fork/exec with
pipes of build/bench/plainrun (the baseline), and bwrap --unshare-all
(a peer). Then a breakdown of where sandguard's extra time goes."""
import json
import os
import random
import re
import subprocess
import tempfile

from sgbench import PY, cgroup_v1_mounts, children_cpu_ms, log, now_ms, paired_ratio, summary

TENANT = "launch"
ITEMS = 8

REWARD = """import json, sys
batch = json.load(sys.stdin)
print(json.dumps([float(len(it["completion"])) for it in batch["items"]]))
"""


def setup(env):
    env.write_policy(env.base_policy(TENANT))
    prog = env.write_program("launch_reward.py", REWARD)
    batch = os.path.join(env.programs, "launch_batch.json")
    with open(batch, "w") as f:
        json.dump({"batch_id": "bench-launch",
                   "items": [{"prompt": "p%d" % i, "completion": "c" * (i + 1)} for i in range(ITEMS)]}, f)
    os.chmod(batch, 0o644)
    return prog, batch


def bwrap_argv(env, prog):
    """bwrap with every namespace unshared and only /usr and the programs
    visible: the isolation a peer tool gives the same command."""
    return ["/usr/bin/bwrap", "--unshare-all", "--die-with-parent",
            "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib",
            "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
            "--ro-bind", env.programs, env.programs, "--chdir", "/tmp",
            "--", PY, prog]


def commands(env, tools, prog, batch):
    return {
        "sandguard": [env.sandguard, "exec", "--tenant", TENANT, "--policy-dir", env.policy_dir,
                      "--batch", batch, "--", PY, prog],
        "plain": [tools["plainrun"], batch, "--", PY, prog],
        "bwrap": [tools["plainrun"], batch, "--"] + bwrap_argv(env, prog),
    }


def scores_ok(name, out):
    """Each way must really have run the reward: n scores back."""
    try:
        doc = json.loads(out)
    except ValueError:
        return False
    if name == "sandguard":
        return doc.get("status") == "ok" and len(doc.get("scores") or []) == ITEMS
    return isinstance(doc, list) and len(doc) == ITEMS


def measure(env, tools, rounds, seed=1):
    """Wall ms per launch of each way, and the CPU ms (user + system of the
    launcher and everything it waited for) per launch."""
    prog, batch = setup(env)
    cmds = commands(env, tools, prog, batch)
    times = {k: [] for k in cmds}
    cpu = {k: [] for k in cmds}
    rng = random.Random(seed)
    for warm in list(cmds):          # one untimed run each: page cache, pyc
        subprocess.run(cmds[warm], env=env.env, capture_output=True)
    for r in range(rounds):
        order = list(cmds)
        rng.shuffle(order)
        for name in order:
            c0 = children_cpu_ms()
            t0 = now_ms()
            p = subprocess.run(cmds[name], env=env.env, capture_output=True, text=True)
            dt = now_ms() - t0
            cpu[name].append(children_cpu_ms() - c0)
            if p.returncode != 0 or not scores_ok(name, p.stdout):
                raise RuntimeError("launch %s failed (exit %d): %s %s" %
                                   (name, p.returncode, p.stdout[-300:], p.stderr[-300:]))
            times[name].append(dt)
    base = summary(times["plain"])
    rows = []
    for name, label in (("sandguard", "sandguard exec (agent running)"),
                        ("bwrap", "bwrap --unshare-all (peer)")):
        s = summary(times[name])
        rows.append({"scenario": "1 launch", "name": label, "unit": "ms/launch",
                     "value": s, "baseline": base, "baseline_name": "plain fork/exec + pipes",
                     "target": "<= 1.05x" if name == "sandguard" else None,
                     "lower_is_better": True, **paired_ratio(times[name], times["plain"])})
    # CPU of the sandguard launch (bwrap's sandboxed child is not reaped
    # by a process we wait for, so its CPU is not counted: no bwrap figure).
    rows[0]["notes"] += "; CPU per launch %.1f ms (baseline %.1f ms)" % (
        summary(cpu["sandguard"])["median"], summary(cpu["plain"])["median"])
    return rows, {"wall_ms": times, "cpu_ms": cpu}


# ---- breakdown --------------------------------------------------------

TRACED = "execve,set_tid_address,flock,mkdir,sendto,clone,clone3,write,exit_group"
LINE = re.compile(r"^(\d+)\s+(\d+\.\d+)\s+(.*)$")
DUR = re.compile(r"<(\d+\.\d+)>\s*$")


def parse_strace(path):
    """[(pid, ts, text, duration or None)] from `strace -f -ttt -T` output."""
    out = []
    with open(path) as f:
        for line in f:
            m = LINE.match(line.rstrip("\n"))
            if not m:
                continue
            d = DUR.search(m.group(3))
            out.append((int(m.group(1)), float(m.group(2)), m.group(3),
                        float(d.group(1)) if d else None))
    return out


def returned(ev, i):
    """The return value of the call at ev[i], looking for its resumed
    line when strace split it."""
    pid, _, text, _ = ev[i]
    name = text.split("(", 1)[0]
    for p, _, t, _ in ev[i:]:
        if p == pid and (t is text or t.startswith("<... %s resumed>" % name)):
            m = re.search(r"\) += (-?\d+)", t)
            if m:
                return int(m.group(1))
    return None


def first_index(ev, pid, pred, after=0.0):
    for i, (p, ts, text, dur) in enumerate(ev):
        if p == pid and ts >= after and pred(text):
            return i
    return None


def first(ev, pid, pred, after=0.0):
    for p, ts, text, dur in ev:
        if p == pid and ts >= after and pred(text):
            return ts, text, dur
    return None


def end_of_call(ev, pid, name, after):
    """When the first `name` call of pid at/after `after` returned."""
    for i, (p, ts, text, dur) in enumerate(ev):
        if p != pid or ts < after or not text.startswith(name + "("):
            continue
        if dur is not None:
            return ts + dur
        for p2, ts2, text2, _ in ev[i + 1:]:
            if p2 == pid and text2.startswith("<... %s resumed>" % name):
                return ts2
    return None


def phases_sandguard(ev):
    """Phase durations (ms) of one traced cold `sandguard exec`, by the
    syscalls that open and close each step (see docs/performance.md): the
    sandbox is prepared (its init started by clone3 with CLONE_NEWPID,
    READY over its control socket), then its one run starts (init's clone3
    into the run's cgroup), is booked (the journal's lock) and printed; the
    teardown follows the result."""
    parent = ev[0][0]
    t0 = ev[0][1]
    t_libc = first(ev, parent, lambda t: t.startswith("set_tid_address("))[0]
    t_admit = first(ev, parent, lambda t: t.startswith("flock("))[0]
    t_cg = first(ev, parent, lambda t: t.startswith("mkdir(\"/sys/fs/cgroup"), t_admit)[0]
    i = first_index(ev, parent, lambda t: t.startswith("clone3(") and "CLONE_NEWPID" in t, t_cg)
    t_clone = ev[i][1]
    init = returned(ev, i)
    t_ready = first(ev, init, lambda t: t.startswith("sendto("), t_clone)[0]
    t_start = first(ev, init, lambda t: t.startswith("clone3(") and "CLONE_INTO_CGROUP" in t, t_ready)[0]
    main_pid, t_exec = next((p, ts) for p, ts, text, _ in ev
                            if ts >= t_start and p not in (parent, init) and text.startswith("execve("))
    v1_join = sum(d for p, ts, text, d in ev
                  if p == init and ts < t_ready and text.startswith("write(") and "/tasks>" in text and d)
    t_exit = first(ev, main_pid, lambda t: t.startswith("+++ exited") or t.startswith("exit_group("))[0]
    t_book = first(ev, parent, lambda t: t.startswith("flock(") and "/journal/.lock" in t, t_exit)[0]
    t_out = first(ev, parent, lambda t: t.startswith("write(1"), t_book)[0]
    t_end = first(ev, parent, lambda t: t.startswith("+++ exited"))[0]
    ms = lambda a, b: (b - a) * 1000.0
    return {
        "exec + mapping the shared libraries": ms(t0, t_libc),
        "relocation + constructors, batch/policy parse, agent connect": ms(t_libc, t_admit),
        "admission (tenant and CPU slots), uid slot, records, scratch": ms(t_admit, t_cg),
        "cgroups (v2 + 3 v1) + limits, agent enrollment, Landlock + seccomp build": ms(t_cg, t_clone),
        "init: namespaces, v1 join, root, until READY": ms(t_clone, t_ready),
        "  of which the v1 `tasks` writes": v1_join * 1000.0,
        "START: run record, clone3 into the run's cgroup, main until execve": ms(t_ready, t_exec),
        "reward program (execve to exit)": ms(t_exec, t_exit),
        "run's end: verdict, run cgroup killed": ms(t_exit, t_book),
        "booking (journal append + fdatasync), result written": ms(t_book, t_out),
        "after the result: teardown (kill, unregister, rmdir, scratch), exit": ms(t_out, t_end),
        "total under strace": ms(t0, t_end),
    }


def phases_plain(ev):
    parent = ev[0][0]
    t0 = ev[0][1]
    i = first_index(ev, parent, lambda t: t.startswith("clone(") or t.startswith("clone3("))
    clone = ev[i][1:]
    child = returned(ev, i)
    t_exec = first(ev, child, lambda t: t.startswith("execve("))[0]
    t_exit = first(ev, child, lambda t: t.startswith("+++ exited") or t.startswith("exit_group("))[0]
    t_end = first(ev, parent, lambda t: t.startswith("+++ exited"))[0]
    ms = lambda a, b: (b - a) * 1000.0
    return {
        "start until fork (plainrun)": ms(t0, clone[0]),
        "child setup until execve": ms(clone[0], t_exec),
        "reward program (execve to exit)": ms(t_exec, t_exit),
        "total under strace": ms(t0, t_end),
    }


def traced(env, argv):
    fd, out = tempfile.mkstemp(prefix="strace.", dir=env.dir)
    os.close(fd)
    p = subprocess.run(["strace", "-f", "-ttt", "-T", "-yy", "-s", "200", "--seccomp-bpf",
                        "-e", "trace=" + TRACED, "-o", out] + argv,
                       env=env.env, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("strace run failed: %s" % p.stderr[-400:])
    ev = parse_strace(out)
    os.unlink(out)
    return ev


def binary_start(env, tools, runs):
    """Process start alone: `sandguard --help` (exec, 18 shared libraries,
    relocation, constructors) against plainrun's usage error (libc only)."""
    cmds = {"sandguard --help": [env.sandguard, "--help"], "plainrun (usage error)": [tools["plainrun"]]}
    times = {k: [] for k in cmds}
    for _ in range(runs):
        for name, argv in cmds.items():
            t0 = now_ms()
            subprocess.run(argv, capture_output=True)
            times[name].append(now_ms() - t0)
    return {k + ", ms": summary(v) for k, v in times.items()}


def breakdown(env, tools, runs, cgroup_parent):
    """Median phase times over `runs` traced launches of each way, plus the
    cgroup-join microbenchmark (fork + cgroup.procs write versus
    clone3(CLONE_INTO_CGROUP))."""
    prog, batch = setup(env)
    cmds = commands(env, tools, prog, batch)
    sg, plain = [], []
    for _ in range(runs):
        sg.append(phases_sandguard(traced(env, cmds["sandguard"])))
        plain.append(phases_plain(traced(env, cmds["plain"])))
    result = {"sandguard": {}, "plain": {}}
    for key in sg[0]:
        result["sandguard"][key] = summary([p[key] for p in sg])
    for key in plain[0]:
        vals = [p[key] for p in plain if p[key] is not None]
        if vals:
            result["plain"][key] = summary(vals)

    trials = max(runs * 2, 6)
    # Hybrid nodes: the v1 joins too, under the pids hierarchy.
    pids = cgroup_v1_mounts().get("pids")
    parents = [cgroup_parent] + ([os.path.join(pids, os.path.basename(cgroup_parent))] if pids else [])
    for d in parents:
        os.makedirs(d, exist_ok=True)
    try:
        p = subprocess.run([tools["cgjoin"]] + parents[:1] + [str(trials), "100"] + parents[1:],
                           capture_output=True, text=True, timeout=240)
    finally:
        for d in parents:
            try:
                os.rmdir(d)
            except OSError:
                pass
    got = {}
    for line in p.stdout.splitlines():
        f = line.split()
        for name, value in zip(f[0::2], f[1::2]):
            got.setdefault(name, []).append(float(value))
    result["binary_start"] = binary_start(env, tools, max(runs * 4, 10))
    labels = {"migrate_ms": "fork + write cgroup.procs (child side), ms",
              "clone_into_ms": "clone3(CLONE_INTO_CGROUP) until the child runs, ms",
              "v1_procs_ms": "v1 (pids): the new process writes 0 to cgroup.procs, ms",
              "v1_tasks_ms": "v1 (pids): the new process writes 0 to tasks (what init does), ms"}
    result["cgroup_join"] = {labels[k]: summary(v) for k, v in got.items() if k in labels}
    log("launch breakdown: %d traced runs each" % runs)
    return result

"""Scenario 8, the shapes a fallback file hook could take, each measured by
build/bench/syscost (scripts/bench/syscost.c) as what it adds to an
open+close and to a getppid() of a task outside every sandbox: the
per-syscall exit tracepoint the agent uses, with the enter tracepoint it
used before, one raw_syscalls program for every system call (raw_tp and
tp_btf), and empty programs (the attachment's own cost). The fastest of
many short chunks per arm: the firmest figure this noisy machine gives
for a few tens of nanoseconds. Then each option once more with bpf_stats
on: what the kernel's accounting reports per run (an empty program's
figure is the accounting's own floor) and what it adds to the open."""
import subprocess

from sgbench import log

OPTIONS = (
    ("exit_openat_empty", "sys_exit_openat tracepoint, empty program"),
    ("exit_openat_lookup", "sys_exit_openat tracepoint, sandbox lookup (the agent's)"),
    ("exit_openat_lookup,enter_openat_lookup", "sys_enter_openat + sys_exit_openat (before)"),
    ("raw_exit_empty", "raw_syscalls sys_exit (raw_tp), empty program"),
    ("raw_exit_lookup", "raw_syscalls sys_exit (raw_tp), syscall filter + lookup"),
    ("btf_exit_lookup", "raw_syscalls sys_exit (tp_btf), syscall filter + lookup"),
)


def measure(tools, rounds):
    p = subprocess.run([tools["syscost"], tools["syscost.bpf.o"], str(rounds)] +
                       [o for o, _ in OPTIONS], capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        raise RuntimeError("syscost failed: %s" % p.stderr.strip())
    out = {}
    for line in p.stdout.splitlines():
        f = line.split()
        if f[0] == "stats":
            out[f[1]].update({"open_ns_stats_on": float(f[3]), "bpf_stats_ns_per_run": float(f[5])})
        else:
            out[f[0]] = {"open_ns": float(f[2]), "getppid_ns": float(f[4])}
    log("syscost: baseline open+close %.0f ns, getppid %.0f ns" %
        (out["none"]["open_ns"], out["none"]["getppid_ns"]))
    return out


def rows(result):
    base = result["none"]
    out = []
    for option, label in OPTIONS:
        r = result.get(option)
        if not r:
            continue
        for key, what in (("open_ns", "open+close"), ("getppid_ns", "getppid()")):
            v = {"median": r[key], "min": r[key], "max": r[key], "n": 1}
            b = {"median": base[key], "min": base[key], "max": base[key], "n": 1}
            out.append({"scenario": "8 fallback hook shapes", "name": "%s: %s" % (label, what),
                        "unit": "ns/op", "value": v, "baseline": b,
                        "baseline_name": "nothing attached (fastest chunk)",
                        "ratio": r[key] / base[key], "target": None, "lower_is_better": True,
                        "notes": "+%.0f ns per operation" % (r[key] - base[key])})
        if "bpf_stats_ns_per_run" in r:
            v = {"median": r["open_ns_stats_on"], "min": r["open_ns_stats_on"],
                 "max": r["open_ns_stats_on"], "n": 1}
            out.append({"scenario": "8 fallback hook shapes",
                        "name": "%s: open+close with bpf_stats on" % label, "unit": "ns/op", "value": v,
                        "baseline": {"median": r["open_ns"], "min": r["open_ns"], "max": r["open_ns"], "n": 1},
                        "baseline_name": "the same, bpf_stats off", "ratio": r["open_ns_stats_on"] / r["open_ns"],
                        "target": None, "lower_is_better": True,
                        "notes": "bpf_stats reports %.0f ns per run; the accounting itself adds %+.0f ns "
                                 "per operation" % (r["bpf_stats_ns_per_run"],
                                                    r["open_ns_stats_on"] - r["open_ns"])})
    return out

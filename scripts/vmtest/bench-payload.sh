#!/bin/sh
# The VM matrix's hook-overhead payload (busybox sh, in the guest; run by
# `make vmbench` = VMTEST_PAYLOAD=bench scripts/vmtest/run.sh): scenarios 2
# and 3 of `make bench` in LSM mode, measured in one run inside the guest.
# The same hookloop loops (open+close, fork+exec+wait, TCP connect+close,
# getppid) run outside any sandbox and inside one, with the agent attached
# ("on": a sandbox exists) and not loaded ("off": stopped, pins removed),
# in alternating cycles. Prints, for the host to collect:
#   BENCH: <where> <loop> <state> <ns/op>          every run
#   BENCH-COST: <where> <loop> <program> <ns/op>   bpf_stats, one pass
#   BENCH-INFO: clocksource <name> jit <0|1|2> cpus <n>   once
# and one PASS line per loop that ran in both states (a SKIP when the
# agent is not in LSM mode: this payload is the LSM figure).
set -u
cycles=${VMBENCH_CYCLES:-3}
reps=${VMBENCH_REPS:-3}
iters_open=${VMBENCH_OPEN:-20000}
iters_forkexec=${VMBENCH_FORKEXEC:-50}
iters_connect=${VMBENCH_CONNECT:-2000}
iters_getppid=${VMBENCH_GETPPID:-50000}
port=47123
open_path=/etc/passwd
exec_path=/bin/true

d=/tmp/vb
cg=/sys/fs/cgroup/sandguard
mkdir -p $d/policies $d/scratch/hooks
cat > $d/policies/hooks.json <<EOF
{"tenant": "hooks",
 "limits": {"timeout_ms": 10000, "memory_mb": 256, "max_tasks": 64, "max_forks": 10000000, "concurrency": 8},
 "files": {"scratch_root": "$d/scratch", "read_only": ["/etc", "/bin", "/lib", "/lib64", "/usr", "/dev/null"]},
 "exec": {"allow": ["/bin/busybox"]},
 "egress": {"allow": [{"cidr": "127.0.0.1", "port": $port, "proto": "tcp"}]},
 "actions": {"egress": "kill", "file": "kill", "fork": "kill", "exec": "kill"},
 "failure": {"mode": "skip"}}
EOF

agent_start() {
    rm -f $d/ready
    sandguard agent --policy-dir $d/policies --events $d/events --socket $d/sock \
        --state-dir $d --ready-file $d/ready >> $d/agent.log 2>&1 &
    agent=$!
    i=0
    while [ ! -e $d/ready ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
}

agent_stop() {
    kill -TERM $agent 2>/dev/null
    wait $agent 2>/dev/null
    sandguard agent --cleanup >/dev/null 2>&1
}

sb_seq=0
# A fresh sandbox cgroup (and its scratch), adopted by the agent when it runs.
new_sandbox() {
    sb_seq=$((sb_seq + 1))
    sb=$cg/hooks/b$sb_seq
    mkdir -p $cg/hooks $sb $d/scratch/hooks/b$sb_seq
    [ "$1" = on ] && sleep 0.3 # the agent's inotify adopts it
}

drop_sandbox() {
    [ -n "${sb:-}" ] || return
    echo 1 > $sb/cgroup.kill 2>/dev/null
    rmdir $sb 2>/dev/null
    rmdir $d/scratch/hooks/b$sb_seq 2>/dev/null
    sb=
}

arg_of() {
    case $1 in
        open) echo $open_path ;; forkexec) echo $exec_path ;;
        connect) echo $port ;; getppid) echo - ;;
    esac
}

iters_of() { eval echo \$iters_$1; }

# run WHERE LOOP STATE: one timed loop, its BENCH line.
run() {
    where=$1 loop=$2 state=$3
    if [ $where = inside ]; then
        new_sandbox $state
        out=$(hookloop --cgroup $sb $loop $(iters_of $loop) $(arg_of $loop) 2>&1)
        drop_sandbox
    else
        out=$(hookloop $loop $(iters_of $loop) $(arg_of $loop) 2>&1)
    fi
    set -- $out
    if [ "${1:-}" = "$loop" ]; then
        echo "BENCH: $where $loop $state $4"
    else
        echo "FAIL: bench: $where $loop with the agent $state: $out"
    fi
}

jobs="outside:open outside:forkexec outside:connect outside:getppid inside:open inside:forkexec inside:connect"

mode=$(sandguard probe 2>/dev/null | awk '$1 == "files" { print $2 }')
echo "MODE: $mode"
if [ "$mode" != lsm ]; then
    echo "SKIP: bench: the agent runs files in '$mode' mode here; this payload measures LSM mode"
    exit 0
fi

# What shapes every figure of a guest besides the agent: the clock the
# kernel reads (bpf_stats reads it twice per program run, every event once)
# and whether BPF programs are JIT-compiled.
echo "BENCH-INFO: clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo unknown) jit $(cat /proc/sys/net/core/bpf_jit_enable 2>/dev/null || echo unknown) cpus $(grep -c ^processor /proc/cpuinfo)"

c=0
while [ $c -lt $cycles ]; do
    if [ $((c % 2)) = 0 ]; then states="on off"; else states="off on"; fi
    for state in $states; do
        [ $state = on ] && agent_start
        r=0
        while [ $r -lt $reps ]; do
            for j in $jobs; do run ${j%%:*} ${j##*:} $state; done
            r=$((r + 1))
        done
        [ $state = on ] && agent_stop
    done
    c=$((c + 1))
done

# The kernel's accounting, one pass with bpf_stats on.
agent_start
echo 1 > /proc/sys/kernel/bpf_stats_enabled
for j in $jobs; do
    where=${j%%:*} loop=${j##*:}
    [ $where = inside ] && new_sandbox on
    progstats /sys/fs/bpf/sandguard > $d/s0
    if [ $where = inside ]; then
        hookloop --cgroup $sb $loop $(iters_of $loop) $(arg_of $loop) > /dev/null
    else
        hookloop $loop $(iters_of $loop) $(arg_of $loop) > /dev/null
    fi
    progstats /sys/fs/bpf/sandguard > $d/s1
    [ $where = inside ] && drop_sandbox
    # per operation: the warm-up is a tenth more than the timed loop
    awk -v w=$where -v l=$loop -v n=$(iters_of $loop) '
        NR == FNR { c0[$1] = $2; t0[$1] = $3; next }
        $2 > c0[$1] { printf "BENCH-COST: %s %s %s %.0f\n", w, l, $1, ($3 - t0[$1]) / (n * 1.1) }' \
        $d/s0 $d/s1
done
echo 0 > /proc/sys/kernel/bpf_stats_enabled
agent_stop
echo "PASS: bench: hook overhead measured in LSM mode ($cycles cycles x $reps runs per loop and state)"

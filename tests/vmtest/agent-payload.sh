#!/bin/sh
# The VM matrix's agent payload (busybox sh, in the guest; see
# scripts/vmtest/run.sh). Prints one result line per kernel feature from
# the probe table (PASS, or SKIP naming what is missing and the fallback
# that covers it), then runs the agent and enrollment suites in LSM mode.
# On a kernel booted without BPF LSM (the -nolsm boots) it runs the suites
# in fallback mode where that works (5.15+), else checks that the agent
# refuses to start, naming what is missing (mode "refused").
# With VMTEST_FALLBACKS=1, on kernels that have the newer features, the
# agent suite runs a second time with them turned off
# (SANDGUARD_DISABLE_FEATURES), so every fallback 5.10 uses is proven on a
# newer kernel too (the 5.10 boot proves them in any case).
# Last, in whichever mode the agent runs, the benign corpus
# (tests/programs/benign/run.sh) with $VMTEST_PYTHON: correct programs run
# ok under the agent and raise no event (issue 13's "no false kills").
newer='atomic_fetch,tracing_ancestor_cgroup,cgroup_kill,cgroup_connect_unix,cgroup_sendmsg_unix,rdonly_cast,bpf_lsm_cgroup'

# benign MODE: the benign corpus under an agent in MODE, with the policies
# as they ship (BENIGN_TIERS: the default policy only, to keep
# the emulated guest's run short; the host runs every tier).
benign() {
    if [ -z "${VMTEST_PYTHON:-}" ]; then
        echo "SKIP: benign corpus: no python3 on the host to copy into the guest"
        return 0
    fi
    BENIGN_TIERS=default BENIGN_TIMEOUT_MS=60000 sh /vmtest/src/tests/programs/benign/run.sh \
        --sandguard /bin/sandguard --python "$VMTEST_PYTHON" --src /vmtest/src --agent "$1"
}

# expect_refusal NAME PATTERN [AGENT ARGS...]: the agent must exit non-zero
# and log a line matching PATTERN.
expect_refusal() {
    name=$1 pattern=$2
    shift 2
    mkdir -p /tmp/refusal
    SANDGUARD_CGROUP_ROOT=/sys/fs/cgroup/sg-refusal SANDGUARD_PIN_ROOT=/sys/fs/bpf/sg-refusal \
        sandguard agent "$@" --policy-dir /tmp/refusal --events /tmp/refusal/ev \
        --socket /tmp/refusal/s --state-dir /tmp/refusal > /tmp/refusal/log 2>&1
    status=$?
    rmdir /sys/fs/cgroup/sg-refusal 2>/dev/null
    if [ $status -ne 0 ] && grep -q "$pattern" /tmp/refusal/log; then
        echo "PASS: refusal: $name"
    else
        echo "FAIL: refusal: $name: exit $status: $(grep -i 'refus\|enforcing' /tmp/refusal/log | tail -n 1)"
    fi
}

sandguard probe > /tmp/probe.txt 2>&1
# Booted without BPF LSM (the -nolsm boots): the fallback mode where the
# tracepoints can be pinned (5.15+), else a refusal naming what is missing.
if grep -q '^bpf_lsm  *no' /tmp/probe.txt; then
    if grep -q '^syscall_tracepoints  *no' /tmp/probe.txt; then
        echo 'MODE: refused'
        expect_refusal 'without BPF LSM the agent refuses to start, naming what is missing' \
            'refusing to start.*bpf_lsm.*syscall_tracepoints'
        exit 0
    fi
    echo 'MODE: fallback'
    agent_test --sandguard /bin/sandguard --mode auto --expect-mode fallback
    rc=$?
    enroll_test --sandguard /bin/sandguard --tenants 100 || rc=1
    benign fallback || rc=1
    exit $rc
fi
awk '
/^FEATURE/ { table = 1; next }
/^$/ { table = 0 }
table && $2 == "yes" { print "PASS: feature " $1; next }
table && $2 == "no" {
    name = $1; $1 = ""; $2 = ""; sub(/^ +/, "")
    print ((index($0, "; fallback: ") ? "SKIP" : "FAIL") ": feature " name ": " $0)
}' /tmp/probe.txt

if grep -q '^files  *lsm' /tmp/probe.txt; then
    echo 'PASS: probe: the probe table says files are enforced in lsm mode'
else
    echo "FAIL: probe: the probe table says: $(grep '^files' /tmp/probe.txt)"
fi
if grep -q '^syscall_tracepoints  *no' /tmp/probe.txt; then
    expect_refusal '--mode fallback is refused, naming the tracepoints it lacks' \
        'refusing to start.*syscall_tracepoints' --mode fallback
fi

agent_test --sandguard /bin/sandguard --mode auto --expect-mode lsm
rc=$?
# (The slot table is userspace logic, the same on every kernel: 1,100
# invented tenants run on the host, 100 here, to keep the matrix short.)
enroll_test --sandguard /bin/sandguard --tenants 100 || rc=1
if [ "${VMTEST_FALLBACKS:-0}" = 1 ] && grep -q '^cgroup_connect_unix  *yes' /tmp/probe.txt; then
    echo 'MODE: lsm-fallbacks'
    SANDGUARD_DISABLE_FEATURES=$newer agent_test --sandguard /bin/sandguard --mode auto --expect-mode lsm || rc=1
fi
echo 'MODE: lsm'
benign lsm || rc=1
exit $rc

#!/bin/sh
# The VM matrix's agent payload (busybox sh, in the guest; see
# scripts/vmtest/run.sh). Prints one result line per kernel feature from
# the probe table (PASS, or SKIP naming what is missing and the fallback
# that covers it), then runs the agent and enrollment suites in LSM mode.
# With VMTEST_FALLBACKS=1, on kernels that have the newer features, the
# agent suite runs a second time with them turned off
# (SANDGUARD_DISABLE_FEATURES), so every fallback 5.10 uses is proven on a
# newer kernel too (the 5.10 boot proves them in any case).
newer='atomic_fetch,tracing_ancestor_cgroup,cgroup_kill,cgroup_connect_unix,cgroup_sendmsg_unix'

sandguard probe > /tmp/probe.txt 2>&1
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

# Where the files fallback cannot work (tracepoints that cannot be pinned,
# before 5.15), --mode fallback must be refused, naming what is missing.
if grep -q '^syscall_tracepoints  *no' /tmp/probe.txt; then
    mkdir -p /tmp/refusal
    SANDGUARD_CGROUP_ROOT=/sys/fs/cgroup/sg-refusal SANDGUARD_PIN_ROOT=/sys/fs/bpf/sg-refusal \
        sandguard agent --mode fallback --policy-dir /tmp/refusal --events /tmp/refusal/ev \
        --socket /tmp/refusal/s --state-dir /tmp/refusal > /tmp/refusal/log 2>&1
    if [ $? -ne 0 ] && grep -q 'refusing to start.*syscall_tracepoints' /tmp/refusal/log; then
        echo 'PASS: refusal: --mode fallback is refused, naming the tracepoints it lacks'
    else
        echo "FAIL: refusal: --mode fallback was not refused as expected: $(tail -n 1 /tmp/refusal/log)"
    fi
    rmdir /sys/fs/cgroup/sg-refusal 2>/dev/null
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
exit $rc

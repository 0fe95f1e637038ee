#!/usr/bin/env bash
# The agent on this machine's kernel: real sandboxes, real errnos, events.
# LSM-mode assertions run in the VM matrix (make vmtest); here auto mode
# must pick the fallback, because this kernel refuses BPF LSM programs.
# The suite runs twice: as the kernel is, and with the features newer than
# Debian 11's 5.10 turned off (SANDGUARD_DISABLE_FEATURES), so that the
# fallbacks that kernel needs (compat objects without fetching atomics, the
# sandbox's cgroup read from the task, the kill by freezing, the open
# programs reading the file by helper calls) are proven here too.
set -u
expect=${SANDGUARD_EXPECT_MODE:-}
if [ -z "$expect" ]; then
    # What auto must choose here, from the kernel's own answer.
    if "$SANDGUARD_BIN" probe 2>/dev/null | grep -q '^bpf_lsm *yes'; then expect=lsm; else expect=fallback; fi
fi
[ "$expect" = fallback ] && echo "SKIP: agent: LSM-mode assertions: BPF LSM programs do not load on this kernel ($(uname -r)); they run in 'make vmtest'"
rc=0
"$SANDGUARD_BUILD/tests/agent_test" --sandguard "$SANDGUARD_BIN" --expect-mode "$expect" || rc=1
SANDGUARD_DISABLE_FEATURES=atomic_fetch,tracing_ancestor_cgroup,cgroup_kill,cgroup_connect_unix,cgroup_sendmsg_unix,rdonly_cast,bpf_lsm_cgroup \
    "$SANDGUARD_BUILD/tests/agent_test" --sandguard "$SANDGUARD_BIN" --expect-mode "$expect" \
    --prefix "5.10 fallbacks: " || rc=1
# Enrollment by the executor, tenants, verdicts, stuck control clients.
"$SANDGUARD_BUILD/tests/enroll_test" --sandguard "$SANDGUARD_BIN" || rc=1
exit $rc

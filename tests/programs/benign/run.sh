#!/bin/sh
# The benign corpus: correct reward programs (tests/programs/benign/bn_*.py)
# that use the ordinary Python runtime, run as batches under the default
# policy and each tier example, with or without an agent. Each must be
# booked ok, and with an agent it must raise no denial or kill event: a
# wrong verdict on good code is a wrong reward.
# Last, the other side of the same judgement: a program that runs out of
# its own memory limit is tenant_oom (the limit's count is v2's oom event,
# v1's high-water mark: both kinds of node run this); and, with an agent,
# a command the tenant's exec rule refuses (deny, then kill) is the
# tenant's exec violation, booked once and never retried, in LSM mode (the
# execve fails) as in fallback mode (killed at it); never a platform error.
#
# One command, on a node or in a VM guest (POSIX sh, busybox is enough):
#   run.sh [--sandguard BIN] [--python PY] [--src DIR] [--agent MODE]
#     --sandguard  the sandguard binary ($SANDGUARD_BIN, else build/sandguard)
#     --python     the interpreter the programs run with (/usr/bin/python3)
#     --src        the source tree: policies/ and tests/programs/benign/
#                  ($SANDGUARD_SRC, else the tree this script is in)
#     --agent      none (the executor's own layers), or an agent --mode:
#                  auto, fallback or lsm (default none)
#   $BENIGN_TIERS    the policies to run under (default: every tier)
#   $BENIGN_TIMEOUT_MS  a longer deadline for every policy (an emulated VM
#                    guest runs CPU-bound code many times slower; what is
#                    judged here is the enforcement, not the speed)
# Prints "PASS: name", "FAIL: name: why", "SKIP: name: why"; exits 1 on
# any failure. Everything it makes is private (cgroup root, pins, state,
# run and log directories) and removed at the end.
set -u

here=$(cd "$(dirname "$0")" && pwd)
sg=${SANDGUARD_BIN:-build/sandguard}
py=/usr/bin/python3
src=${SANDGUARD_SRC:-$(cd "$here/../../.." && pwd)}
agent=none
while [ $# -gt 0 ]; do
    case $1 in
        --sandguard) sg=$2; shift 2 ;;
        --python) py=$2; shift 2 ;;
        --src) src=$2; shift 2 ;;
        --agent) agent=$2; shift 2 ;;
        *) echo "usage: run.sh [--sandguard BIN] [--python PY] [--src DIR] [--agent none|auto|fallback|lsm]" >&2
           exit 64 ;;
    esac
done
failed=0
pass() { echo "PASS: $1"; }
fail() { echo "FAIL: $1: $2"; failed=1; }
skip() { echo "SKIP: $1: $2"; }

if [ "$(id -u)" != 0 ]; then skip benign "needs root"; exit 0; fi
[ -x "$sg" ] || { fail benign "no sandguard binary at $sg"; exit 1; }
[ -x "$py" ] || { skip benign "no $py here"; exit 0; }

dir=$(mktemp -d /tmp/sg-benign.XXXXXX)
chmod 755 "$dir"
cg2=$(awk '{ split($0, a, " - "); split(a[2], b, " "); if (b[1] == "cgroup2") { split(a[1], c, " "); print c[5]; exit } }' /proc/self/mountinfo)
tag=benign-$$
export SANDGUARD_CGROUP_ROOT="$cg2/sandguard-$tag" SANDGUARD_PIN_ROOT="/sys/fs/bpf/sandguard-$tag"
export SANDGUARD_STATE_DIR="$dir/state" SANDGUARD_LOG_DIR="$dir/log" SANDGUARD_RUN_DIR="$dir/run"
export SANDGUARD_AGENT_SOCK="$dir/agent.sock"
export SANDGUARD_UID_BASE=$((63000 + ${SANDGUARD_TEST_UID_SHIFT:-0}))
mkdir -p "$dir/policies" "$dir/scratch"
agent_pid=

cleanup() {
    if [ -n "$agent_pid" ]; then
        # SIGTERM stops the agent; one that still runs after 30 s is a
        # failure (its stacks on stderr), not a run that waits forever.
        kill "$agent_pid" 2>/dev/null
        i=0
        while kill -0 "$agent_pid" 2>/dev/null && [ $i -lt 300 ]; do
            [ -z "$(sed -n 's/^State:[[:space:]]*Z.*/z/p' "/proc/$agent_pid/status" 2>/dev/null)" ] || break
            sleep 0.1; i=$((i + 1))
        done
        if [ $i -ge 300 ]; then
            for t in /proc/"$agent_pid"/task/*; do echo "-- $t"; cat "$t/stack"; done >&2 2>/dev/null
            fail "benign (agent $agent)" "the agent still runs 30 s after SIGTERM (its stacks on stderr)"
            kill -9 "$agent_pid" 2>/dev/null
        fi
        wait "$agent_pid" 2>/dev/null
        "$sg" agent --cleanup >/dev/null 2>&1
    fi
    # The cgroup tree, and its v1 mirrors on hybrid nodes.
    for top in "$SANDGUARD_CGROUP_ROOT" $(awk '{ split($0, a, " - "); split(a[2], b, " "); if (b[1] == "cgroup") { split(a[1], c, " "); print c[5] } }' /proc/self/mountinfo | sed "s|\$|/sandguard-$tag|"); do
        [ -d "$top" ] && find "$top" -depth -type d -exec rmdir {} \; 2>/dev/null
    done
    [ -n "${BENIGN_KEEP:-}" ] && { echo "kept $dir" >&2; return; }
    rm -rf "$dir"
}
trap cleanup EXIT

# The default policy and each tier's example, as they ship: only the
# tenant name and the scratch root differ.
tiers=${BENIGN_TIERS:-default function verifier reward-model environment}
for t in $tiers; do
    f=$src/policies/$t.json
    [ "$t" = default ] || f=$src/policies/examples/$t.json
    sed -e "s|\"tenant\": \"$t\"|\"tenant\": \"benign-$t\"|" \
        -e "s|/var/lib/sandguard/scratch|$dir/scratch|" \
        -e "s|\"timeout_ms\": *\([0-9]*\)|\"timeout_ms\": ${BENIGN_TIMEOUT_MS:-\1}|" \
        "$f" > "$dir/policies/benign-$t.json"
done

# The tenants refused-deny and refused-kill: the default policy with an
# exec allowlist that does not name $py, the exec rule's action deny or kill.
for action in deny kill; do
    sed -e "s|\"tenant\": \"default\"|\"tenant\": \"refused-$action\"|" \
        -e "s|/var/lib/sandguard/scratch|$dir/scratch|" \
        -e "s|\"/usr/bin/python3\*\", \"/usr/local/bin/python3\*\"|\"/nonexistent/sandguard-none\"|" \
        -e "s|\"exec\": \"kill\"|\"exec\": \"$action\"|" \
        "$src/policies/default.json" > "$dir/policies/refused-$action.json"
done
sed -e "s|\"tenant\": \"default\"|\"tenant\": \"own-oom\"|" \
    -e "s|/var/lib/sandguard/scratch|$dir/scratch|" \
    -e "s|\"memory_mb\": *[0-9]*|\"memory_mb\": 48|" \
    -e "s|\"max_retries\": *[0-9]*|\"max_retries\": 0|" \
    "$src/policies/default.json" > "$dir/policies/own-oom.json"

if [ "$agent" != none ]; then
    "$sg" agent --mode "$agent" --policy-dir "$dir/policies" --events "$dir/events.jsonl" \
        --state-dir "$dir/state" --ready-file "$dir/ready" > "$dir/agent.log" 2>&1 &
    agent_pid=$!
    i=0
    while [ ! -e "$dir/ready" ] && [ $i -lt 300 ] && kill -0 "$agent_pid" 2>/dev/null; do
        sleep 0.1; i=$((i + 1))
    done
    if [ ! -e "$dir/ready" ]; then
        fail "benign (agent $agent)" "the agent did not start: $(tail -n 3 "$dir/agent.log" | tr '\n' ' ')"
        exit 1
    fi
    touch "$dir/events.jsonl"
fi

touch "$dir/events.jsonl"
printf '{"batch_id": "benign", "items": [{"prompt": "p", "completion": "alpha"}, {"prompt": "p", "completion": "beta"}]}' > "$dir/batch.json"
for t in $tiers; do
    if [ "$agent" = none ] && grep -q '"require_agent": true' "$dir/policies/benign-$t.json"; then
        skip "benign $t tier (no agent)" "its policy requires the agent"
        continue
    fi
    for prog in "$src"/tests/programs/benign/bn_*.py; do
        name=$(basename "$prog" .py)
        case=$(printf 'benign %s (%s, agent %s)' "$name" "$t" "$agent")
        if [ "$name" = bn_numpy ] && ! "$py" -c 'import numpy' 2>/dev/null; then
            skip "$case" "numpy is not installed for $py"
            continue
        fi
        before=$(wc -l < "$dir/events.jsonl" 2>/dev/null || echo 0)
        out=$("$sg" exec --tenant "benign-$t" --policy-dir "$dir/policies" --batch "$dir/batch.json" \
            -- "$py" -c "$(cat "$prog")" 2>"$dir/stderr")
        if ! printf '%s' "$out" | grep -q '"cause": *"ok"'; then
            fail "$case" "$(printf '%s' "$out" | cut -c1-600) $(tail -n 2 "$dir/stderr" | tr '\n' ' ')"
            "$sg" tenant resume "benign-$t" >/dev/null 2>&1 # test the next program on its own
            continue
        fi
        if [ "$agent" != none ]; then
            events=$(tail -n +"$((before + 1))" "$dir/events.jsonl" | grep "\"tenant\":\"benign-$t\"" |
                grep -E '"type":"[a-z_]*(denied|tripped|killed)"' | head -n 2)
            if [ -n "$events" ]; then
                fail "$case" "ok, but the agent evented: $(printf '%s' "$events" | cut -c1-400)"
                continue
            fi
        fi
        pass "$case"
    done
done
# refused ACTION: a run of $py for the tenant refused-ACTION (below).
refused() {
    t=refused-$1
    case="the exec rule ($1) refusing the run's own command is the tenant's (agent $agent)"
    out=$("$sg" exec --tenant "$t" --policy-dir "$dir/policies" --batch "$dir/batch.json" \
        -- "$py" -c 'print(1)' 2>"$dir/stderr")
    if printf '%s' "$out" | grep -q '"cause": *"tenant_policy_violation"' &&
        printf '%s' "$out" | grep -q '"rule": *"exec"' &&
        printf '%s' "$out" | grep -q '"attempts": *1[,}]'; then
        pass "$case"
    else
        fail "$case" "$(printf '%s' "$out" | cut -c1-600) $(tail -n 2 "$dir/stderr" | tr '\n' ' ')"
    fi
}
# The tenant own-oom: the default policy with a 48 MB memory limit, no retry.
case="a program past its own memory limit is tenant_oom (agent $agent)"
out=$("$sg" exec --tenant own-oom --policy-dir "$dir/policies" --batch "$dir/batch.json" \
    -- "$py" -c 'h = [bytearray(8 << 20) for _ in range(64)]' 2>"$dir/stderr")
if printf '%s' "$out" | grep -q '"cause": *"tenant_oom"'; then
    pass "$case"
elif grep -q MemoryError "$dir/stderr" || printf '%s' "$out" | grep -q 'MemoryError'; then
    # No memory cgroup for the sandbox (a minimal VM guest): the limit is
    # RLIMIT_AS, and the allocation fails instead of an OOM kill.
    skip "$case" "the sandbox's memory is limited by RLIMIT_AS here (no memory cgroup): nothing OOM-kills"
else
    fail "$case" "$(printf '%s' "$out" | cut -c1-600) $(tail -n 2 "$dir/stderr" | tr '\n' ' ')"
fi
if [ "$agent" != none ]; then
    refused deny
    refused kill
fi
exit $failed

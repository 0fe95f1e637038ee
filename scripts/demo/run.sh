#!/usr/bin/env bash
# The main job, end to end, in under a minute: the agent enforcing on two
# tenants' reward sandboxes while `sandguard exec` runs good and hostile
# reward programs; enforcement events print as they happen, each batch's
# cause is shown, and the per-tenant attribution table closes the run.
# Leaves no cgroups, pins, scratch directories or processes behind.
#
#   scripts/demo/run.sh BUILD_DIR    (via scripts/demo.sh or make demo)
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
sg=$build/sandguard
assets=$src/scripts/demo
[ "$(id -u)" = 0 ] || { echo "demo: run as root (the agent loads BPF programs)" >&2; exit 1; }

# Everything the demo makes lives under its own names, so a real agent on
# this node is never touched.
demo=$(mktemp -d /tmp/sandguard-demo.XXXXXX)
chmod 755 "$demo"
cg2=$(awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo)
export SANDGUARD_CGROUP_ROOT=$cg2/sandguard-demo-$$
export SANDGUARD_PIN_ROOT=/sys/fs/bpf/sandguard-demo-$$
export SANDGUARD_AGENT_SOCK=$demo/agent.sock
export SANDGUARD_STATE_DIR=$demo/state SANDGUARD_RUN_DIR=$demo/run
# A credential the executor has and the reward code must never see.
export AWS_SECRET_ACCESS_KEY=demo-secret-do-not-leak TRAINER_TOKEN=demo-token
agent_pid= follow_pid= collector_pid=

cleanup() {
    set +e
    [ -n "$follow_pid" ] && kill "$follow_pid" 2>/dev/null
    [ -n "$collector_pid" ] && kill "$collector_pid" 2>/dev/null
    if [ -n "$agent_pid" ]; then kill -TERM "$agent_pid"; wait "$agent_pid" 2>/dev/null; fi
    "$sg" agent --cleanup >/dev/null 2>&1
    if [ -d "$SANDGUARD_CGROUP_ROOT" ]; then
        for k in $(find "$SANDGUARD_CGROUP_ROOT" -name cgroup.kill); do echo 1 > "$k" 2>/dev/null; done
    fi
    # The v2 root, and its mirrors on the v1 controllers of hybrid nodes.
    for top in "$SANDGUARD_CGROUP_ROOT" /sys/fs/cgroup/*/"$(basename "$SANDGUARD_CGROUP_ROOT")"; do
        [ -d "$top" ] && find "$top" -depth -type d -exec rmdir {} + 2>/dev/null
    done
    rm -rf "$demo"
}
trap cleanup EXIT

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

# Policies: two tenants, both default-deny, each told to kill on a violation.
mkdir -p "$demo/policies" "$demo/programs" "$demo/scratch"
cp "$assets"/programs/*.py "$assets/batch.json" "$assets/tests.json" "$demo/programs/"
chmod -R a+rX "$demo/programs"
for tenant in alpha bravo; do
    cat > "$demo/policies/$tenant.json" <<EOF
{
  "tenant": "$tenant",
  "limits": {"timeout_ms": 3000, "memory_mb": 256, "max_tasks": 32, "concurrency": 4},
  "files": {"scratch_root": "$demo/scratch",
            "read_only": ["/usr", "/lib", "/lib64", "/bin", "/etc/ld.so.cache", "/etc/localtime",
                          "/etc/locale.alias", "/dev/null", "/dev/urandom", "$demo/programs"]},
  "exec": {"allow": ["/usr/bin/python3*"]},
  "actions": {"egress": "kill", "file": "kill", "fork": "kill", "exec": "kill", "memory": "kill"},
  "failure": {"mode": "skip"}
}
EOF
done
"$sg" policy check "$demo"/policies/*.json

say "Starting the agent (probing this kernel, loading and pinning its programs)"
"$sg" agent --policy-dir "$demo/policies" --events "$demo/events.jsonl" --state-dir "$demo/state" \
    --ready-file "$demo/ready" 2> "$demo/agent.log" &
agent_pid=$!
for _ in $(seq 100); do [ -e "$demo/ready" ] && break; sleep 0.1; done
[ -e "$demo/ready" ] || { cat "$demo/agent.log"; echo "demo: the agent did not start" >&2; exit 1; }
grep -E "files:|generation" "$demo/agent.log" | sed 's/^sandguard: info: /   /'

say "Enforcement events, as they happen"
"$sg" events --file "$demo/events.jsonl" --follow \
    --type egress_denied,fork_limit,exec_denied,file_denied,file_tripped,sandbox_killed,health &
follow_pid=$!
sleep 0.5

# A loopback "collector" for the exfiltration attempt: it must see nothing.
python3 -c '
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True)
c, _ = s.accept(); print("COLLECTOR RECEIVED DATA", file=sys.stderr)
' > "$demo/collector.port" 2> "$demo/collector.log" &
collector_pid=$!
for _ in $(seq 50); do [ -s "$demo/collector.port" ] && break; sleep 0.1; done
collector_port=$(cat "$demo/collector.port")

# One batch through the executor; print its result on one line.
batch() {
    local tenant=$1 label=$2; shift 2
    local out rc
    set +e
    out=$("$sg" exec --tenant "$tenant" --policy-dir "$demo/policies" "$@" 2>>"$demo/exec.log")
    rc=$?
    set -e
    sleep 0.3   # let the event table print first
    printf '%s' "$out" | python3 -c '
import json, sys
label, tenant, rc = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    r = json.load(sys.stdin)
except ValueError:
    print("   %-6s %-24s exit %s: no result" % (tenant, label, rc)); sys.exit()
what = r["cause"] + ("/" + r["rule"] if r.get("rule") else "")
extra = ("scores %s" % r["scores"]) if r.get("scores") is not None else (r.get("detail") or "")
if "reward" in r:
    extra = "reward %s, tests %s" % (r["reward"], [t["status"] for t in r.get("tests", [])])
print("   \033[1m%-6s %-24s -> %-7s %-32s\033[0m %s (%s ms, exit %s)" % (tenant, label, r["status"], what, extra, r.get("wall_ms"), rc))
' "$label" "$tenant" "$rc"
}

P=$demo/programs
say "Batches (tenant, program -> status, cause/rule)"
batch alpha "good scorer"        --batch "$P/batch.json" -- /usr/bin/python3 "$P/good.py"
batch alpha "NaN scorer"         --batch "$P/batch.json" -- /usr/bin/python3 "$P/nan.py"
batch bravo "hang"               --batch "$P/batch.json" --timeout-ms 2000 -- /usr/bin/python3 "$P/hang.py"
batch bravo "fork bomb"          --batch "$P/batch.json" -- /usr/bin/python3 "$P/fork_bomb.py"
batch alpha "egress attempt"     --batch "$P/batch.json" -- /usr/bin/python3 "$P/egress.py" "$collector_port"
batch bravo "read outside scratch" --batch "$P/batch.json" -- /usr/bin/python3 "$P/read_outside.py"
batch alpha "env-secret probe"   --batch "$P/batch.json" -- /usr/bin/python3 "$P/env_probe.py"
batch bravo "verifier: correct"  --tests "$P/tests.json" -- /usr/bin/python3 "$P/solution_ok.py"
batch bravo "verifier: wrong"    --tests "$P/tests.json" -- /usr/bin/python3 "$P/solution_wrong.py"

sleep 1.5   # the follower prints the last events; the agent has folded the journal by then
kill "$follow_pid" 2>/dev/null; follow_pid=

say "The exfiltration collector"
if [ -s "$demo/collector.log" ]; then echo "   RECEIVED DATA: egress was NOT blocked"; exit 1; fi
echo "   received nothing"

say "Per-tenant attribution (sandguard top --once)"
"$sg" top --once

say "Agent status"
"$sg" status | sed -n '1,8p'

say "Stopping the agent and cleaning up"
kill -TERM "$agent_pid"; wait "$agent_pid" || true; agent_pid=
"$sg" agent --cleanup 2>&1 | sed 's/^sandguard: info: /   /'
left=$(find "$SANDGUARD_CGROUP_ROOT" /sys/fs/cgroup/*/"$(basename "$SANDGUARD_CGROUP_ROOT")" -mindepth 2 -type d 2>/dev/null | wc -l)
echo "   sandbox cgroups left: $left; scratch dirs left: $(find "$demo/scratch" -mindepth 2 -maxdepth 2 | wc -l)"

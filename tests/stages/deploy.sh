#!/usr/bin/env bash
# deploy stage: the Kubernetes manifests and the container build file can't rot.
#   tests/stages/deploy.sh BUILD
# Static: every YAML document parses; the fields that matter hold
# (deploy_manifests.py); a schema check of every document with the npm package
# kubernetes-models (deploy_schema.js); promtool on the alert rules; the
# ConfigMap is what deploy/gen-configmap.sh makes and its policies pass
# `sandguard policy check`; the Grafana dashboard's ConfigMap is what
# deploy/gen-dashboard.sh makes (deploy_manifests.py); the Dockerfile's
# runtime packages provide every library the binary loads.
# Live, as root, against the running kernel with private cgroup/pin roots:
# the agent runs with exactly the DaemonSet's capabilities, each of those
# capabilities is needed, the probes see attached programs (and see them go),
# SIGTERM stops it cleanly, a kubelet-style ConfigMap swap is reloaded and
# enforced, and its memory fits the DaemonSet's limits. serve
# (deploy/serve.yaml) likewise: its capabilities, its way into the node's
# namespaces, its probes, its drain and its memory (deploy_serve.py); the
# tokens Secret that deploy/gen-tokens.sh makes is what serve loads.
# Then the image: deploy/build-image.sh builds deploy/Dockerfile with podman
# from a debootstrap base, and the same live checks run again ("image-live-")
# against the agent and serve in its containers, with the manifests'
# securityContext, mounts and args (deploy_image.sh, deploy_podman.py); SKIP
# with the reason where podman cannot run.
set -u
cd "$(dirname "$0")/../.."
SRC=$(pwd)
build=${1:-build}
BIN=$SRC/$build/sandguard
PASS=0; FAIL=0; SKIP=0

# Count PASS/FAIL/SKIP lines while showing them.
tally() {
    local line
    while IFS= read -r line; do
        echo "$line"
        case $line in
            PASS:*) PASS=$((PASS + 1)) ;;
            FAIL:*) FAIL=$((FAIL + 1)) ;;
            SKIP:*) SKIP=$((SKIP + 1)) ;;
        esac
    done
}
pass() { tally <<<"PASS: $1${2:+: $2}"; }
fail() { tally <<<"FAIL: $1: $2"; }
skip() { tally <<<"SKIP: $1: $2"; }
finish() {
    echo "deploy: $PASS passed, $FAIL failed, $SKIP skipped"
    [ "$FAIL" -eq 0 ]
    exit
}

if [ ! -x "$BIN" ]; then
    fail binary "$BIN not built (make BUILD=$build)"
    finish
fi
TMP=$(mktemp -d /tmp/sg-deploy.XXXXXX)
chmod 755 "$TMP"

# ---------------------------------------------------------------- live ------
# Runs first: it measures the agent's memory for the static resource check.
LIVE_OK=0
CGROOT=""; PINROOT=""; AGENT_PID=""
live_reason() {
    [ "$(id -u)" -eq 0 ] || { echo "needs root (BPF, cgroups)"; return; }
    command -v setpriv >/dev/null || { echo "setpriv (util-linux) not installed"; return; }
    local cg2
    cg2=$(awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo)
    [ -n "$cg2" ] || { echo "no cgroup2 mount"; return; }
    "$BIN" probe 2>/dev/null | grep -q '^ringbuf *yes' || { echo "this kernel cannot load the agent's programs"; return; }
    echo ""
}
why=$(live_reason)
if [ -z "$why" ]; then
    LIVE_OK=1
    CG2=$(awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo)
    CGROOT=$CG2/sandguard-deploy-stage-$$
    PINROOT=/sys/fs/bpf/sandguard-deploy-stage-$$
    export SANDGUARD_CGROUP_ROOT=$CGROOT SANDGUARD_PIN_ROOT=$PINROOT
    export SANDGUARD_AGENT_SOCK=$TMP/run/agent.sock SANDGUARD_RUN_DIR=$TMP/xrun
    export SANDGUARD_STATE_DIR=$TMP/xstate SANDGUARD_LOG_DIR=$TMP/xlog SANDGUARD_UID_BASE=63500
    mkdir -p "$TMP/run" "$TMP/state" "$TMP/xrun" "$TMP/xstate" "$TMP/xlog" "$TMP/scratch" "$TMP/progs"
fi

cleanup() {
    stop_agent
    [ "$RUNTIME" = container ] && remove_agent_container
    if [ "$LIVE_OK" = 1 ]; then
        "$BIN" agent --cleanup >/dev/null 2>&1
        # The executor mirrors the root's name under each cgroup v1
        # controller it uses (hybrid nodes); remove those trees too.
        local d
        for d in "$CGROOT" $(awk -v n="$(basename "$CGROOT")" '$9 == "cgroup" { print $5 "/" n }' /proc/self/mountinfo); do
            [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
        done
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT

# The DaemonSet agent container's capabilities, as setpriv wants them.
ds_caps() {
    python3 -c '
import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d["kind"] == "DaemonSet":
        c = [c for c in d["spec"]["template"]["spec"]["containers"] if c["name"] == "agent"][0]
        print(",".join(c["securityContext"]["capabilities"]["add"]).lower())' "$SRC/deploy/daemonset.yaml"
}
# setpriv's --bounding-set for a comma-separated capability list.
bounding_set() {
    local set="-all" c
    for c in ${1//,/ }; do set="$set,+$c"; done
    echo "$set"
}
# Run a command with only the given capabilities, as the pod's runtime
# would: bounding set, no inheritable ones, no_new_privs.
with_caps() {
    local caps=$1; shift
    setpriv --bounding-set "$(bounding_set "$caps")" --inh-caps -all --no-new-privs -- "$@"
}
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
http_code() { curl -s -o /dev/null -w '%{http_code}' --max-time 3 "$1"; }
status_field() { "$BIN" status --json 2>/dev/null | python3 -c "import json, sys; print(json.load(sys.stdin).get('$1', ''))" 2>/dev/null; }

# Where live_checks runs the agent: a host process (host) or the image's
# container (container, tests/stages/deploy_image.sh).
RUNTIME=host
# `sandguard probe` with only the capabilities $1.
probe_with() {
    if [ "$RUNTIME" = container ]; then probe_in_container "$1"; else with_caps "$1" "$BIN" probe; fi
}
# The DaemonSet's livenessProbe.
liveness() {
    if [ "$RUNTIME" = container ]; then liveness_in_container; else "$BIN" status --check; fi
}
# Start the agent as the DaemonSet does (its capabilities, its flags with
# this machine's paths). Sets AGENT_PID, AGENT_JOB (what to wait for) and
# PORT; returns once /readyz is 200.
start_agent() {
    [ "$RUNTIME" = container ] && { start_agent_container "$@"; return; }
    local policy_dir=$1 log=$2
    PORT=$(free_port)
    # setpriv execs the agent, so $! is the agent itself.
    setpriv --bounding-set "$(bounding_set "$(ds_caps)")" --inh-caps -all --no-new-privs -- \
        "$BIN" agent --policy-dir "$policy_dir" --events "$TMP/run/events.jsonl" \
        --events-max-bytes 16777216 --events-keep 3 --metrics "127.0.0.1:$PORT" \
        --state-dir "$TMP/state" --node deploy-stage >"$log" 2>&1 &
    AGENT_PID=$!
    AGENT_JOB=$AGENT_PID
    local i
    for i in $(seq 1 150); do
        [ "$(http_code "http://127.0.0.1:$PORT/readyz")" = 200 ] && return 0
        kill -0 "$AGENT_PID" 2>/dev/null || return 1
        sleep 0.2
    done
    return 1
}
# SIGTERM, not SIGINT: a background job of a non-interactive shell starts
# with SIGINT ignored. SIGKILL if it is still there after 10 s.
stop_agent() {
    [ -n "$AGENT_PID" ] || return 0
    kill -TERM "$AGENT_PID" 2>/dev/null
    local i
    for i in $(seq 1 50); do
        kill -0 "$AGENT_PID" 2>/dev/null || break
        sleep 0.2
    done
    kill -KILL "$AGENT_PID" 2>/dev/null
    wait "${AGENT_JOB:-$AGENT_PID}" 2>/dev/null
    AGENT_PID=""; AGENT_JOB=""
}

# A policy dir for the live tests: the embedded default, with scratch and the
# test programs' directory of our own; v2 no longer allows python3 to run.
make_policies() {
    python3 - "$SRC/policies/default.json" "$TMP" <<'EOF'
import copy, json, os, sys
src, tmp = sys.argv[1], sys.argv[2]
p = json.load(open(src))
p["files"]["scratch_root"] = os.path.join(tmp, "scratch")
p["files"]["read_only"].append(os.path.join(tmp, "progs"))
p["require_agent"] = True
p["failure"] = {"mode": "skip"}
for version in ("v1", "v2", "v3"):
    os.makedirs(os.path.join(tmp, "cm-" + version), exist_ok=True)
t = copy.deepcopy(p); t["tenant"] = "deploytest"
json.dump(p, open(os.path.join(tmp, "cm-v1", "default.json"), "w"), indent=2)
json.dump(t, open(os.path.join(tmp, "cm-v1", "deploytest.json"), "w"), indent=2)
json.dump(p, open(os.path.join(tmp, "cm-v2", "default.json"), "w"), indent=2)
t["exec"]["allow"] = ["/usr/bin/perl"]
json.dump(t, open(os.path.join(tmp, "cm-v2", "deploytest.json"), "w"), indent=2)
json.dump(p, open(os.path.join(tmp, "cm-v3", "default.json"), "w"), indent=2)
open(os.path.join(tmp, "cm-v3", "deploytest.json"), "w").write('{"tenant": "deploytest", "limits": {"max_tasks": "many"}}\n')
EOF
    cat >"$TMP/progs/score.py" <<'EOF'
import json, sys
b = json.load(sys.stdin)
print(json.dumps([len(i["completion"]) % 7 / 7.0 for i in b["items"]]))
EOF
    cat >"$TMP/progs/flood.py" <<'EOF'
import json, socket, sys
b = json.load(sys.stdin)
# Denied loopback connects (egress action "deny"): one event each, up to
# the agent's per-sandbox cap. Loopback only: no packet leaves this host.
for i in range(5000):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.connect(("127.0.0.1", 9))
    except OSError:
        pass
    s.close()
print(json.dumps([0.5 for _ in b["items"]]))
EOF
    chmod 755 "$TMP/progs"; chmod 644 "$TMP/progs"/*.py
    printf '%s\n' '{"batch_id": "deploy", "items": [{"prompt": "p", "completion": "abc"}, {"prompt": "p", "completion": "abcdef"}]}' >"$TMP/batch.json"
}
# cause[:rule] of one batch through sandguard exec (the executor reads the
# policy dir given second, by default the agent's); a platform error's
# detail follows it, so a failure says why.
exec_cause() {
    "$BIN" exec --tenant deploytest --policy-dir "${2:-$TMP/cm}" --batch "$TMP/batch.json" -- \
        /usr/bin/python3 "$TMP/progs/$1" 2>/dev/null |
        python3 -c 'import json, sys; r = json.load(sys.stdin); print(r["cause"] + (":" + r["rule"] if r["rule"] else "") + (" (%s)" % r.get("detail") if r["cause"] == "platform_error" else ""))' 2>/dev/null
}
wait_for() {  # wait_for SECONDS COMMAND...: until the command succeeds
    local deadline=$((SECONDS + $1)); shift
    until "$@"; do
        [ $SECONDS -lt $deadline ] || return 1
        sleep 0.2
    done
}
reloads_reach() { [ "$(status_field "$1")" -ge "$2" ] 2>/dev/null; }

# The live checks. $1 names them: "live" against the agent and serve as
# host processes with the manifests' capabilities, "image-live" against
# their containers from the image (RUNTIME=container, deploy_image.sh).
live_checks() {
    local L=$1
    make_policies
    mkdir -p "$TMP/cm"
    python3 tests/stages/kubelet_atomic_write.py "$TMP/cm" "$TMP/cm-v1"

    # Capabilities: everything root can load, the DaemonSet's set can too.
    caps=$(ds_caps)
    root_ok=$("$BIN" probe 2>/dev/null | awk 'NR > 1 && $2 == "yes" { print $1 }' | sort)
    ds_ok=$(probe_with "$caps" 2>/dev/null | awk 'NR > 1 && $2 == "yes" { print $1 }' | sort)
    lost=$(comm -23 <(echo "$root_ok") <(echo "$ds_ok") | tr '\n' ' ')
    if [ -z "$lost" ]; then
        pass "$L-caps-sufficient" "with only $caps every feature root has loads ($(echo $ds_ok | wc -w) features)"
    else
        fail "$L-caps-sufficient" "with only $caps these features are lost: $lost"
    fi
    # ... and each of them is needed for something.
    for c in ${caps//,/ }; do
        if [ "$c" = kill ]; then
            skip "$L-cap-needed-kill" "not visible to the probe: only the SIGKILL-over-cgroup.procs fallback uses it (no cgroup.kill, and hostPID)"
            continue
        fi
        without=$(probe_with "$(echo "$caps" | tr ',' '\n' | grep -vx "$c" | paste -sd, -)" 2>/dev/null |
            awk 'NR > 1 && $2 == "yes" { print $1 }' | sort)
        gone=$(comm -23 <(echo "$ds_ok") <(echo "$without") | tr '\n' ' ')
        if [ -n "$gone" ]; then
            pass "$L-cap-needed-$c" "without CAP_${c^^}: ${gone% } fail"
        else
            fail "$L-cap-needed-$c" "CAP_${c^^} is granted but nothing needs it"
        fi
    done

    if start_agent "$TMP/cm" "$TMP/agent.log"; then
        pass "$L-agent-starts" "with only $caps, no_new_privs, the DaemonSet's flags"
        P=$AGENT_PID
        # Probes while attached.
        if [ "$(http_code "http://127.0.0.1:$PORT/readyz")" = 200 ] && [ "$(http_code "http://127.0.0.1:$PORT/healthz")" = 200 ] &&
            liveness >/dev/null 2>&1; then
            pass "$L-probes-attached" "/readyz 200, /healthz 200, status --check 0 ($(status_field links) links)"
        else
            fail "$L-probes-attached" "readyz $(http_code "http://127.0.0.1:$PORT/readyz"), status --check $(liveness >/dev/null 2>&1; echo $?)"
        fi

        # ConfigMap hot reload, the kubelet's way; v1 lets python3 run.
        c1=$(exec_cause score.py)
        python3 tests/stages/kubelet_atomic_write.py "$TMP/cm" "$TMP/cm-v2"
        wait_for 10 reloads_reach policy_reloads_ok 1
        c2=$(exec_cause score.py)
        python3 tests/stages/kubelet_atomic_write.py "$TMP/cm" "$TMP/cm-v3"
        wait_for 10 reloads_reach policy_reloads_failed 1
        # The executor would refuse the invalid file too (platform_error):
        # give it v2, so that what is judged is the agent's policy in force.
        c3=$(exec_cause score.py "$TMP/cm-v2")
        ok=$(status_field policy_reloads_ok); bad=$(status_field policy_reloads_failed)
        if [ "$c1" = ok ] && [ "$c2" = tenant_policy_violation:exec ] && [ "$c3" = tenant_policy_violation:exec ] &&
            [ "$ok" -ge 1 ] && [ "$bad" -ge 1 ]; then
            pass "$L-configmap-reload" "..data swap reloaded ($ok ok, $bad rejected): v1 $c1, v2 $c2, invalid v3 rejected and v2 still enforced ($c3)"
        else
            fail "$L-configmap-reload" "v1 '$c1' (want ok), v2 '$c2' and v3 '$c3' (want tenant_policy_violation:exec), reloads ok $ok failed $bad"
        fi

        # Memory: idle, then under an event flood from a sandbox.
        sleep 1
        idle_kb=$(awk '/^VmRSS/ { print $2 }' /proc/$P/status)
        python3 tests/stages/kubelet_atomic_write.py "$TMP/cm" "$TMP/cm-v1"
        wait_for 10 reloads_reach policy_reloads_ok 2
        for i in 1 2 3; do exec_cause flood.py >/dev/null; done
        for i in $(seq 1 100); do curl -s --max-time 3 "http://127.0.0.1:$PORT/metrics" >/dev/null; done
        rss_kb=$(awk '/^VmRSS/ { print $2 }' /proc/$P/status)
        peak_kb=$(awk '/^VmHWM/ { print $2 }' /proc/$P/status)
        seen=$(status_field events_seen)
        # The static resource check takes the larger of the two runs'.
        [ "$idle_kb" -gt "${SG_MEASURED_IDLE_KB:-0}" ] && export SG_MEASURED_IDLE_KB=$idle_kb
        [ "$peak_kb" -gt "${SG_MEASURED_PEAK_KB:-0}" ] && export SG_MEASURED_PEAK_KB=$peak_kb
        if [ "${seen:-0}" -ge 1000 ]; then
            pass "$L-memory" "RSS idle $((idle_kb / 1024)) MiB, $((rss_kb / 1024)) MiB after $seen events, peak $((peak_kb / 1024)) MiB"
        else
            fail "$L-memory" "the flood produced only ${seen:-0} events"
        fi

        # The probes must notice when the programs are gone.
        "$BIN" agent --cleanup >/dev/null 2>&1
        code=$(http_code "http://127.0.0.1:$PORT/readyz")
        liveness >/dev/null 2>&1; rc=$?
        if [ "$code" = 503 ] && [ "$rc" -ne 0 ]; then
            pass "$L-probes-detached" "pins removed: /readyz $code, status --check exit $rc"
        else
            fail "$L-probes-detached" "pins removed but /readyz $code, status --check exit $rc"
        fi
        stop_agent
    else
        fail "$L-agent-starts" "$(tail -n 3 "$TMP/agent.log" | tr '\n' ' ')"
        stop_agent
    fi

    # SIGTERM is how the kubelet stops the pod: the agent must stop cleanly
    # (its stop path logs "stopping", saves the ledger, exits 0; pins stay).
    if start_agent "$TMP/cm" "$TMP/agent-term.log"; then
        P=$AGENT_PID
        kill -TERM "$P"
        wait_for 15 eval '! kill -0 "$P" 2>/dev/null'
        kill -KILL "$P" 2>/dev/null
        wait "$AGENT_JOB"; rc=$?; AGENT_PID=""; AGENT_JOB=""
        links=$(ls "$PINROOT"/gen-* 2>/dev/null | wc -l)
        if [ "$rc" -eq 0 ] && grep -q "stopping" "$TMP/agent-term.log" && [ "$links" -gt 0 ]; then
            pass "$L-sigterm" "exit 0, $links programs still pinned"
        else
            fail "$L-sigterm" "exit status $rc$( [ $rc -gt 128 ] && echo " (killed by signal $((rc - 128)))"), 'stopping' logged: $(grep -c stopping "$TMP/agent-term.log"), pinned links: $links"
        fi
    else
        fail "$L-sigterm" "agent did not start: $(tail -n 2 "$TMP/agent-term.log" | tr '\n' ' ')"
    fi

    # serve, as deploy/serve.yaml runs it (a private agent of its own).
    serve_out=$(SG_DEPLOY_PREFIX=$L SG_SERVE_IMAGE=$([ "$RUNTIME" = container ] && echo "$IMAGE") \
        python3 tests/stages/deploy_serve.py "$SRC" "$BIN" 2>"$TMP/deploy-serve.err")
    tally <<<"$(printf '%s\n' "$serve_out" | grep -E '^(PASS|FAIL|SKIP): ')"
    serve_kb=$(printf '%s\n' "$serve_out" | sed -n 's/^measured-serve-peak-kb //p')
    [ "${serve_kb:-0}" -gt "${SG_MEASURED_SERVE_PEAK_KB:-0}" ] && export SG_MEASURED_SERVE_PEAK_KB=$serve_kb
    printf '%s\n' "$serve_out" | grep -qE "^(PASS|FAIL|SKIP): $L-serve-cap-needed" ||
        fail "$L-serve" "deploy_serve.py ended early: $(tail -n 3 "$TMP/deploy-serve.err" | tr '\n' ' ')"

    # Policy paths are resolved where the agent runs; in a container that is
    # the image, not the node the sandboxes run on.
    # --host-root itself (a bind mount of / as the pod's /host, and a foreign
    # root refused as a platform error) is exercised end to end by
    # tests/integration/45-attribution.py.
}

if [ "$LIVE_OK" = 1 ]; then
    live_checks live
    # Again, in containers of the image (deploy/build-image.sh), with the
    # manifests' securityContext, mounts and args (deploy_podman.py).
    # shellcheck source=tests/stages/deploy_image.sh
    . tests/stages/deploy_image.sh
    image_t0=$SECONDS
    image_why=$(image_status)
    if [ -z "$image_why" ]; then
        pass "image-build" "deploy/build-image.sh: $IMAGE from a debootstrap base, Debian packages only, in $((SECONDS - image_t0)) s"
        "$BIN" agent --cleanup >/dev/null 2>&1   # the host run's pins: the container attaches its own
        RUNTIME=container
        image_t0=$SECONDS
        cgroup_init_check
        live_checks image-live
        stop_agent
        remove_agent_container
        RUNTIME=host
        init_container_check
        echo "image-live: the live checks in containers took $((SECONDS - image_t0)) s"
    elif [ "${image_why%%:*}" = skip ]; then
        skip "image-live" "${image_why#skip: }"
    else
        fail "image-build" "${image_why#fail: }"
    fi
else
    for t in live-caps-sufficient live-agent-starts live-probes live-configmap-reload live-memory live-sigterm image-live \
        live-serve; do
        skip "$t" "$why"
    done
fi

# ---------------------------------------------------------------- static ----
tally < <(python3 tests/stages/deploy_manifests.py "$SRC" "$BIN" 2>&1)

# The tokens Secret: deploy/gen-tokens.sh's output is a Secret of valid
# tokens, one per tenant, that serve loads as its --tokens directory (each
# key a file, mode 0400, as the Secret volume of deploy/serve.yaml has it).
secret_to_dir() {
    python3 -c '
import os, sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
assert d["kind"] == "Secret" and d["metadata"]["name"] == "sandguard-tokens", d["metadata"]
os.makedirs(sys.argv[2])
for tenant, token in d["stringData"].items():
    path = os.path.join(sys.argv[2], tenant)
    open(path, "w").write(token + "\n")
    os.chmod(path, 0o400)' "$1" "$2"
}
serve_loads_tokens() {
    "$BIN" serve --listen 127.0.0.1:0 --tokens "$1" --policy-dir policies >"$TMP/tokens.out" 2>&1 </dev/null &
    local pid=$! i
    for i in $(seq 1 50); do
        grep -q '^listening on' "$TMP/tokens.out" && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    grep -q '^listening on' "$TMP/tokens.out"
}
if ! deploy/gen-tokens.sh acme bravo >"$TMP/tokens.yaml" 2>"$TMP/tokens.urls"; then
    fail "gen-tokens" "deploy/gen-tokens.sh: $(cat "$TMP/tokens.urls")"
elif ! secret_to_dir "$TMP/tokens.yaml" "$TMP/tokens-dir" 2>"$TMP/tokens.err"; then
    fail "gen-tokens" "not the sandguard-tokens Secret: $(tail -n 1 "$TMP/tokens.err")"
elif serve_loads_tokens "$TMP/tokens-dir" && [ "$(grep -c '/t/.*/run_code$' "$TMP/tokens.urls")" = 2 ]; then
    pass "gen-tokens" "a Secret with one token per tenant, which serve loads as --tokens; a URL per tenant"
else
    fail "gen-tokens" "serve did not load the generated tokens: $(tail -n 2 "$TMP/tokens.out" | tr '\n' ' ')"
fi

# Schema: kubernetes-models (JSON schemas generated from the Kubernetes
# OpenAPI spec and the Prometheus Operator CRDs), installed with npm into
# the build directory once. kubeconform is in neither Debian nor npm.
SCHEMA_DIR=$SRC/$build/deploy-schema
schema_reason=""
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    schema_reason="node/npm not installed (apt-get install nodejs npm); kubeconform is packaged neither in Debian nor on npm"
elif [ ! -d "$SCHEMA_DIR/node_modules/@kubernetes-models/prometheus-operator" ]; then
    mkdir -p "$SCHEMA_DIR"
    if ! timeout 300 npm install --prefix "$SCHEMA_DIR" --no-audit --no-fund --loglevel=error \
        kubernetes-models@4.5.1 @kubernetes-models/prometheus-operator@4.4.2 >"$TMP/npm.log" 2>&1; then
        schema_reason="npm install kubernetes-models failed: $(grep -m1 -i error "$TMP/npm.log")"
    fi
fi
if [ -z "$schema_reason" ]; then
    python3 -c '
import glob, json, os, sys, yaml
files = sorted(glob.glob("deploy/*.yaml")) + [sys.argv[1]]   # and the generated tokens Secret
items = [{"file": f, "doc": d} for f in files for d in yaml.safe_load_all(open(f)) if d]
json.dump(items, sys.stdout)' "$TMP/tokens.yaml" >"$TMP/docs.json"
    tally < <(NODE_PATH=$SCHEMA_DIR/node_modules node tests/stages/deploy_schema.js <"$TMP/docs.json" 2>&1)
else
    skip "schema" "$schema_reason"
fi

# The alert rules, as Prometheus will load them.
if command -v promtool >/dev/null; then
    python3 -c '
import yaml
for d in yaml.safe_load_all(open("deploy/podmonitor.yaml")):
    if d and d["kind"] == "PrometheusRule":
        yaml.safe_dump({"groups": d["spec"]["groups"]}, open("'"$TMP"'/rules.yaml", "w"))'
    if out=$(promtool check rules "$TMP/rules.yaml" 2>&1); then
        pass "promtool-rules" "$(echo "$out" | grep -o 'SUCCESS.*')"
    else
        fail "promtool-rules" "$(echo "$out" | tr '\n' ' ')"
    fi
    # Alerts proven to fire (and to stay quiet) on synthetic series.
    cp tests/stages/alert_rules_test.yaml "$TMP/"
    if out=$(cd "$TMP" && promtool test rules alert_rules_test.yaml 2>&1); then
        pass "promtool-test-rules" "$(echo "$out" | grep -o 'SUCCESS.*' | head -1)"
    else
        fail "promtool-test-rules" "$(echo "$out" | tr '\n' ' ')"
    fi
    # ... and every alert shipped has a case that fires and one that stays quiet.
    if out=$(python3 -c '
import sys, yaml
rules = {r["alert"] for d in yaml.safe_load_all(open("deploy/podmonitor.yaml"))
         if d and d["kind"] == "PrometheusRule" for g in d["spec"]["groups"] for r in g["rules"]}
cases = [a for t in yaml.safe_load(open("tests/stages/alert_rules_test.yaml"))["tests"] for a in t["alert_rule_test"]]
fire = {a["alertname"] for a in cases if a["exp_alerts"]}
quiet = {a["alertname"] for a in cases if not a["exp_alerts"]}
missing = sorted(rules - fire) + sorted(r + " (quiet)" for r in rules - quiet)
print("%d alerts, each with a firing and a quiet case" % len(rules) if not missing else "no case for " + ", ".join(missing))
sys.exit(1 if missing else 0)' 2>&1); then
        pass "promtool-test-every-alert" "$out"
    else
        fail "promtool-test-every-alert" "$out"
    fi
else
    skip "promtool-rules" "promtool not installed (apt-get install prometheus)"
fi

# The ConfigMap is generated from policies/, and stays so.
if deploy/gen-configmap.sh policies/default.json >"$TMP/cm.yaml" 2>"$TMP/cm.err" &&
    cmp -s "$TMP/cm.yaml" deploy/configmap-policies.yaml; then
    pass "configmap-generated" "deploy/configmap-policies.yaml == deploy/gen-configmap.sh policies/default.json"
else
    fail "configmap-generated" "deploy/configmap-policies.yaml differs from deploy/gen-configmap.sh policies/default.json: regenerate it $(cat "$TMP/cm.err")"
fi
mkdir -p "$TMP/cm-check"
python3 -c '
import os, sys, yaml
for d in yaml.safe_load_all(open("deploy/configmap-policies.yaml")):
    for k, v in (d or {}).get("data", {}).items():
        open(os.path.join(sys.argv[1], k), "w").write(v)' "$TMP/cm-check"
if out=$("$BIN" policy check "$TMP/cm-check"/*.json 2>&1); then
    pass "configmap-policies-valid" "$(echo "$out" | sed "s|$TMP/cm-check/||g" | tr '\n' ' ')"
else
    fail "configmap-policies-valid" "$(echo "$out" | sed "s|$TMP/cm-check/||g" | tr '\n' ' ')"
fi

# Every library the binary loads comes from a package the runtime stage
# installs (or one of their dependencies, or libc): those it links
# (ldd) and those it loads on first use (the *_LAZY_SONAME of
# src/lib/mhd_lazy.h and src/artifact/crypto_lazy.h).
runtime_pkgs=$(sed -n '/^FROM debian:12-slim/,$p' deploy/Dockerfile | tr '\\\n' '  ' |
    grep -o 'apt-get install[^&]*' | tr ' ' '\n' | grep -v -e '^-' -e '^apt-get$' -e '^install$' -e '^$' | sort -u)
if command -v dpkg-query >/dev/null && command -v apt-cache >/dev/null; then
    closure=$( (echo "$runtime_pkgs"; apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
        --no-breaks --no-replaces --no-enhances $runtime_pkgs 2>/dev/null | grep -v '^ ' | tr -d '<>') |
        sed 's/:.*//' | sort -u)
    missing=""
    lazy=$(grep -rhoE '_LAZY_SONAME +"[^"]+"' src | cut -d'"' -f2 | sort -u)
    lazy_paths=$(for so in $lazy; do
        ldconfig -p | awk -v n="$so" '$1 == n { print $NF; exit }' | grep . || echo "/missing/$so"
    done)
    for lib in $(ldd "$BIN" | awk '/=>/ { print $3 }') $lazy_paths; do
        pkg=$(dpkg-query -S "$(readlink -f "$lib")" 2>/dev/null | head -n 1 | cut -d: -f1)
        [ -z "$pkg" ] && pkg=$(dpkg-query -S "$lib" 2>/dev/null | head -n 1 | cut -d: -f1)
        case $pkg in libc6) continue ;; esac
        echo "$closure" | grep -qx "$pkg" || missing="$missing $(basename "$lib")($pkg)"
    done
    unknown=$(for p in $runtime_pkgs; do apt-cache show "$p" >/dev/null 2>&1 || echo "$p"; done | tr '\n' ' ')
    if [ -z "$missing" ] && [ -z "$unknown" ]; then
        pass "dockerfile-runtime-libs" "$(ldd "$BIN" | grep -c '=>') libraries linked and $(echo $lazy | wc -w) loaded on first use ($(echo $lazy)), all from:$(echo $runtime_pkgs | sed 's/^/ /') and their dependencies"
    else
        fail "dockerfile-runtime-libs" "${missing:+not provided:$missing }${unknown:+not Debian 12 packages: $unknown}"
    fi
else
    skip "dockerfile-runtime-libs" "dpkg/apt-cache not available"
fi
if docker info >/dev/null 2>&1 && [ -n "${SANDGUARD_DOCKER_BUILD:-}" ]; then
    if docker build -q -f deploy/Dockerfile -t sandguard:deploy-test . >"$TMP/docker.log" 2>&1; then
        pass "docker-build" "image sandguard:deploy-test"
    else
        fail "docker-build" "$(tail -n 3 "$TMP/docker.log" | tr '\n' ' ')"
    fi
else
    skip "docker-build" "no Docker daemon here, or SANDGUARD_DOCKER_BUILD unset (the build pulls debian:12 from a registry)"
fi

finish

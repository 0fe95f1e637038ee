# Sourced by tests/stages/deploy.sh (not a stage of its own: not executable).
# The container image, built and run: deploy/build-image.sh builds
# deploy/Dockerfile with podman from a debootstrap base, and the agent and
# its init containers run from it with the flags tests/stages/deploy_podman.py
# reads from deploy/daemonset.yaml (securityContext, mounts, memory limit,
# args), so that the live checks run once more against the containerised
# agent (serve's container: deploy_serve.py with SG_SERVE_IMAGE).
# Uses deploy.sh's SRC, TMP, CGROOT, PINROOT, pass, fail, free_port and
# http_code.

# A tag per checkout: two checkouts on one machine may run the stage at once.
IMAGE=localhost/sandguard:deploy-test-$(printf '%s' "$SRC" | md5sum | cut -c1-8)
# crun, Debian 12's default runtime, refuses hybrid cgroup hosts; runc works
# on both kinds (see deploy/build-image.sh).
PODMAN=(podman --runtime runc --cgroup-manager cgroupfs)
# podman's default limits (a million open files) exceed what runc may set
# here (EPERM): this stage's own open-file limit, and 4096 processes.
ULIMITS=(--ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=4096:4096)
AGENT_CTR=""

# Builds the image. Prints "" when it was built and runs, "skip: WHY" where
# podman cannot run (tools missing, no Debian mirror for debootstrap, no
# container can start) and "fail: WHY" when podman runs but the build fails.
image_status() {
    local t
    for t in podman runc debootstrap; do
        command -v "$t" >/dev/null || { echo "skip: $t not installed (scripts/install-deps.sh installs podman, runc, debootstrap)"; return; }
    done
    if ! deploy/build-image.sh "$IMAGE" >"$TMP/image-build.log" 2>&1; then
        local why
        why=$(grep 'build-image:' "$TMP/image-build.log" | tail -n 1)
        if grep -q 'debootstrap failed' "$TMP/image-build.log"; then
            echo "skip: $why"
        elif ! "${PODMAN[@]}" run --rm "${ULIMITS[@]}" --network none localhost/debian:12 true >"$TMP/image-run.log" 2>&1; then
            echo "skip: podman cannot run a container here: $(tail -n 1 "$TMP/image-run.log")"
        else
            echo "fail: $why: $(grep -v 'build-image:' "$TMP/image-build.log" | tail -n 2 | tr '\n' ' ')"
        fi
        return
    fi
    if ! "${PODMAN[@]}" run --rm "${ULIMITS[@]}" --network none --entrypoint /usr/local/bin/sandguard "$IMAGE" \
        --version >"$TMP/image-run.log" 2>&1; then
        echo "fail: the image's sandguard does not run: $(tail -n 1 "$TMP/image-run.log")"
        return
    fi
    echo ""
}

# podman run flags (before the image) and the command (after it) for the
# DaemonSet's agent container, this run's directories in place of the
# node's: FLAGS and CMD (container_args). $1: the policy dir, $2: the metrics
# port on 127.0.0.1, then extra deploy_podman.py arguments.
agent_container_args() {
    local policy_dir=$1 port=$2
    shift 2
    container_args deploy/daemonset.yaml agent policies="$policy_dir" run="$TMP/run" state="$TMP/state" \
        -p "9464=$port" --node deploy-stage -e "SANDGUARD_CGROUP_ROOT=$CGROOT" -e "SANDGUARD_PIN_ROOT=$PINROOT" "$@"
}
# deploy_podman.py's flags and command for MANIFEST CONTAINER [ARGS...]:
# FLAGS and CMD.
container_args() {
    local all i
    python3 tests/stages/deploy_podman.py "$@" --seccomp-dir "$TMP" >"$TMP/podman-args" || return 1
    mapfile -d '' -t all <"$TMP/podman-args"
    for i in "${!all[@]}"; do [ "${all[$i]}" = -- ] && break; done
    FLAGS=("${all[@]:0:$i}")
    CMD=("${all[@]:$((i + 1))}")
}

# `sandguard probe` in the agent's container, with capabilities $1
# (comma-separated, as the manifest spells them) in place of its own.
probe_in_container() {
    agent_container_args "$TMP/cm" "$(free_port)" --caps "${1^^}" || return 1
    "${PODMAN[@]}" run --rm "${ULIMITS[@]}" "${FLAGS[@]}" --entrypoint /usr/local/bin/sandguard \
        "$IMAGE" probe
}

# Starts the agent's container in the background; sets AGENT_PID (the
# agent, as this host sees it), AGENT_JOB (podman run) and PORT.
start_agent_container() {
    local policy_dir=$1 log=$2 i
    PORT=$(free_port)
    AGENT_CTR=sg-deploy-agent-$$
    agent_container_args "$policy_dir" "$PORT" >"$log" 2>&1 || return 1
    "${PODMAN[@]}" run --rm --name "$AGENT_CTR" "${ULIMITS[@]}" "${FLAGS[@]}" "$IMAGE" "${CMD[@]}" \
        >"$log" 2>&1 &
    AGENT_JOB=$!
    AGENT_PID=""
    for i in $(seq 1 150); do
        [ -n "$AGENT_PID" ] || AGENT_PID=$("${PODMAN[@]}" inspect -f '{{.State.Pid}}' "$AGENT_CTR" 2>/dev/null | grep -v '^0$')
        [ -n "$AGENT_PID" ] && [ "$(http_code "http://127.0.0.1:$PORT/readyz")" = 200 ] && return 0
        kill -0 "$AGENT_JOB" 2>/dev/null || return 1
        sleep 0.2
    done
    return 1
}

# The kubelet's livenessProbe, run in the container as the kubelet would.
liveness_in_container() {
    local cmd
    mapfile -t cmd < <(python3 -c '
import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d["kind"] == "DaemonSet":
        c = [c for c in d["spec"]["template"]["spec"]["containers"] if c["name"] == "agent"][0]
        print("\n".join(c["livenessProbe"]["exec"]["command"]))' deploy/daemonset.yaml)
    "${PODMAN[@]}" exec "$AGENT_CTR" "${cmd[@]}"
}

# Containers this run left behind (an interrupted run): removed by name.
remove_agent_container() {
    [ -n "$AGENT_CTR" ] && "${PODMAN[@]}" rm -f "$AGENT_CTR" >/dev/null 2>&1
    AGENT_CTR=""
}

# The DaemonSet's check-host-mounts init container, from the image with its
# own securityContext: its verdict (exit status, and each mount it names)
# is what this host's filesystems say.
init_container_check() {
    local want_rc=0 bad="" want dir fs got rc
    container_args deploy/daemonset.yaml check-host-mounts 2>"$TMP/init.log" || {
        fail "image-init-container" "$(cat "$TMP/init.log")"
        return
    }
    for want in /sys/fs/bpf:bpf_fs /sys/kernel/tracing:tracefs /sys/kernel/security:securityfs /sys/fs/cgroup:cgroup2fs; do
        dir=${want%%:*}; fs=${want#*:}
        got=$(stat -f -c %T "$dir" 2>/dev/null)
        [ "$got" = "$fs" ] || { want_rc=1; bad="$bad $dir"; }
    done
    [ -r /sys/kernel/btf/vmlinux ] || { want_rc=1; bad="$bad btf"; }
    "${PODMAN[@]}" run --rm "${ULIMITS[@]}" "${FLAGS[@]}" "$IMAGE" "${CMD[@]}" >"$TMP/init.log" 2>&1
    rc=$?
    local named=""
    for dir in $bad; do grep -q "$dir" "$TMP/init.log" && named="$named $dir"; done
    if [ "$rc" -eq "$want_rc" ] && [ "$named" = "$bad" ]; then
        pass "image-init-container" "as uid 65534, read-only, no capabilities: exit $rc${bad:+, naming$bad} (as this host's mounts say)"
    else
        fail "image-init-container" "exit $rc (want $want_rc for the host's mounts: ${bad:-all present}): $(tr '\n' ' ' <"$TMP/init.log")"
    fi
}

# The DaemonSet's create-sandguard-cgroup init container, on a node where
# the agent's cgroup root does not exist yet (the host run's is removed
# first): the agent alone cannot create it (the cgroup2 root is 0555 and it
# has no DAC capability), the init container without its one capability
# cannot either, with it it does (owned by uid 0, the agent's uid), again
# idempotently, and it refuses a root the agent could not write. The
# image-live checks that follow then start the agent on the root it made.
cgroup_init_check() {
    local L=image-cgroup-init rc owner
    [ -d "$CGROOT" ] && find "$CGROOT" -depth -type d -exec rmdir {} + 2>/dev/null
    if [ -d "$CGROOT" ]; then
        fail "$L" "cannot remove the host run's cgroup root $CGROOT"
        return
    fi
    # The agent alone.
    agent_container_args "$TMP/cm" "$(free_port)" || { fail "$L-needed" "deploy_podman.py refused the agent"; return; }
    # (the policies: the host run's; it stops before it reads them)
    timeout 60 "${PODMAN[@]}" run --rm --name "sg-deploy-noinit-$$" "${ULIMITS[@]}" "${FLAGS[@]}" "$IMAGE" "${CMD[@]}" \
        >"$TMP/noinit.log" 2>&1
    rc=$?
    "${PODMAN[@]}" rm -f "sg-deploy-noinit-$$" >/dev/null 2>&1
    if [ "$rc" -ne 0 ] && grep -q "cannot create cgroup $CGROOT: Permission denied" "$TMP/noinit.log" && [ ! -d "$CGROOT" ]; then
        pass "$L-needed" "without it the agent's container exits $rc: cannot create cgroup ...: Permission denied"
    else
        fail "$L-needed" "the agent alone exited $rc on a node without $CGROOT: $(tail -n 2 "$TMP/noinit.log" | tr '\n' ' ')"
    fi
    # Its capability is needed.
    run_cgroup_init --caps "" >"$TMP/cginit.log" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ] && grep -q "Permission denied" "$TMP/cginit.log" && [ ! -d "$CGROOT" ]; then
        pass "$L-cap-needed-dac_override" "without CAP_DAC_OVERRIDE: exit $rc, mkdir Permission denied"
    else
        fail "$L-cap-needed-dac_override" "without CAP_DAC_OVERRIDE: exit $rc, $(tr '\n' ' ' <"$TMP/cginit.log")"
    fi
    # The manifest's container, twice (the kubelet runs it at every pod start).
    run_cgroup_init >"$TMP/cginit.log" 2>&1 && run_cgroup_init >>"$TMP/cginit.log" 2>&1
    rc=$?
    owner=$(stat -c %u:%g:%a "$CGROOT" 2>/dev/null)
    if [ "$rc" -eq 0 ] && [ "$owner" = 0:0:755 ] && [ "$(stat -f -c %T "$CGROOT")" = cgroup2fs ]; then
        pass "$L" "with only CAP_DAC_OVERRIDE: created $CGROOT (uid:gid:mode $owner), exit 0 again once it exists"
    else
        fail "$L" "exit $rc, $CGROOT is '${owner:-missing}': $(tr '\n' ' ' <"$TMP/cginit.log")"
    fi
    # A root the agent could not write: refused, by name.
    chown 65534 "$CGROOT"
    run_cgroup_init >"$TMP/cginit.log" 2>&1
    rc=$?
    chown 0 "$CGROOT"
    if [ "$rc" -ne 0 ] && grep -q "$CGROOT is 65534:" "$TMP/cginit.log"; then
        pass "$L-refuses-foreign-owner" "a root owned by uid 65534: exit $rc, naming it"
    else
        fail "$L-refuses-foreign-owner" "a root owned by uid 65534: exit $rc, $(tr '\n' ' ' <"$TMP/cginit.log")"
    fi
}
# The create-sandguard-cgroup init container, this run's cgroup root in
# place of <cgroup2>/sandguard; extra deploy_podman.py arguments.
run_cgroup_init() {
    container_args deploy/daemonset.yaml create-sandguard-cgroup -e "SANDGUARD_CGROUP_ROOT=$CGROOT" "$@" || return 2
    timeout 60 "${PODMAN[@]}" run --rm "${ULIMITS[@]}" "${FLAGS[@]}" "$IMAGE" "${CMD[@]}"
}

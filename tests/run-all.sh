#!/usr/bin/env bash
# The whole suite: unit, integration (host, fallback mode), sanitizers,
# fuzz smoke, deployment manifests, chaos (kill -9 and restarts under load),
# and the VM kernel matrix (LSM mode).
# Ends with one closing tally line over every stage.
set -u
cd "$(dirname "$0")/.."
build=${1:-build}
total_p=0; total_f=0; total_s=0
# Pins and cgroup roots of earlier runs that were killed: their agents'
# programs would otherwise stay attached under every stage (sweep_stale.py).
python3 tests/lib/sweep_stale.py || true
# Each stage's wall time, printed above the tally: CI must stay under an
# hour, and this says where the time goes.
times=
stage() {
    local name=$1; shift
    local t0=$SECONDS
    echo
    echo "######## $name"
    # tee into a file of our own: re-opening /dev/stderr would truncate a
    # log file that stdout and stderr point to.
    local log; log=$(mktemp)
    "$@" 2>&1 | tee "$log"; local rc=${PIPESTATUS[0]}
    local out; out=$(grep -E "^[a-z-]+: [0-9]+ passed, [0-9]+ failed" "$log" | tail -n 1); rm -f "$log"
    local p f s
    p=$(printf '%s' "$out" | sed -n 's/.* \([0-9]*\) passed.*/\1/p')
    f=$(printf '%s' "$out" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
    s=$(printf '%s' "$out" | sed -n 's/.* \([0-9]*\) skipped.*/\1/p')
    [ -n "$f" ] || f=0
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; echo "$name: exited $rc"; fi
    total_p=$((total_p + ${p:-0})); total_f=$((total_f + f)); total_s=$((total_s + ${s:-0}))
    times="$times $name $((SECONDS - t0)) s,"
}
stage unit        tests/run-unit.sh "$build"
stage integration tests/run-integration.sh "$build"
for extra in tests/stages/*.sh; do
    [ -x "$extra" ] && stage "$(basename "$extra" .sh)" "$extra" "$build"
done
echo
echo "stage times:${times%,} (all $SECONDS s)"
echo "all: $total_p passed, $total_f failed, $total_s skipped"
[ $total_f -eq 0 ]

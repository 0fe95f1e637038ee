#!/usr/bin/env bash
# Stage for tests/run-all.sh: the chaos run (tests/stages/chaos.py) at CI
# scale, $CHAOS_BATCHES batches (default 250) with kill -9 of the agent,
# executors and serve, agent restarts and policy reloads; then exactly one
# outcome per batch and nothing left behind. `make chaos` runs 10,000.
# Ends with "chaos: N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/../.."
build=${1:-build}
export SANDGUARD_BIN=${SANDGUARD_BIN:-$PWD/$build/sandguard} SANDGUARD_SRC=$PWD
exec python3 tests/stages/chaos.py "${CHAOS_BATCHES:-250}"

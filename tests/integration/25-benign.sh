#!/usr/bin/env bash
# The benign corpus (tests/programs/benign/run.sh): correct programs using
# the ordinary Python runtime are booked ok under the default policy and
# every tier example, on the executor's own layers and with the agent in
# the mode this kernel gives it (fallback here; LSM in the VM matrix, where
# the same command runs with --agent lsm).
set -u
runner="$SANDGUARD_SRC/tests/programs/benign/run.sh"
"$runner" --sandguard "$SANDGUARD_BIN" --src "$SANDGUARD_SRC" --agent none; a=$?
"$runner" --sandguard "$SANDGUARD_BIN" --src "$SANDGUARD_SRC" --agent auto; b=$?
[ $a -eq 0 ] && [ $b -eq 0 ]

#!/usr/bin/env bash
# Turns one boot's results channel (see init.sh) into result rows, one per
# line on stdout, tab-separated:
#   kernel  suite  feature  mode  result  reason
# result is PASS, FAIL or SKIP. A boot that never reached init, a payload
# that hung or died without the sentinel, a non-zero exit without a FAIL
# line, or no result lines at all each become one FAIL row: a broken run is
# never an empty (and so "green") column.
#
# Usage: parse.sh KERNEL SUITE BOOTDIR MODE
#   BOOTDIR holds results.log and status (from boot.sh); MODE labels results
#   until the payload prints a line "MODE: <mode>".
set -euo pipefail

[ $# -eq 4 ] || { echo "usage: parse.sh KERNEL SUITE BOOTDIR MODE" >&2; exit 64; }
kernel=$1 suite=$2 dir=$3 mode=$4
how=missing rc=-1
if [ -r "$dir/status" ]; then read -r how rc _ < "$dir/status"; fi
[ -e "$dir/results.log" ] || : > "$dir/results.log"

awk -v kernel="$kernel" -v suite="$suite" -v mode="$mode" -v how="$how" -v rc="$rc" \
    -v timeout="${VMTEST_TIMEOUT:-480}" -v dir="$dir" '
function emit(verdict, feature, reason) {
    gsub(/\t/, " ", reason); gsub(/\t/, " ", feature)
    printf "%s\t%s\t%s\t%s\t%s\t%s\n", kernel, suite, feature, mode, verdict, reason
    results++
    if (verdict == "FAIL") fails++
}
{ sub(/\r$/, "") }
/^VMTEST-BOOTED: / { booted = 1; next }
/^VMTEST-EXIT: /   { exit_rc = $2; next }
/^VMTEST-DONE$/    { done = 1; next }
/^MODE: /          { mode = substr($0, 7); next }
/^(PASS|FAIL|SKIP): / {
    verdict = substr($0, 1, 4); rest = substr($0, 7); reason = ""
    i = index(rest, ": ")
    if (i) { reason = substr(rest, i + 2); rest = substr(rest, 1, i - 1) }
    if (verdict != "PASS" && reason == "") reason = "(no reason given)"
    emit(verdict, rest, reason)
}
END {
    if (how == "missing")
        emit("FAIL", "boot", "qemu did not run (no " dir "/status)")
    else if (!booted && how == "timeout")
        emit("FAIL", "boot", "init not reached within " timeout " s; see " dir "/console.log")
    else if (!booted)
        emit("FAIL", "boot", "guest stopped before init (qemu exit " rc "; panic?); see " dir "/console.log and qemu.log")
    else if (!done && how == "timeout")
        emit("FAIL", "payload", "no sentinel after " timeout " s: payload hung; see " dir "/console.log")
    else if (!done)
        emit("FAIL", "payload", "guest stopped without the sentinel (qemu exit " rc "); see " dir "/console.log")
    else if (exit_rc != 0 && !fails)
        emit("FAIL", "payload", "payload exited " exit_rc " without a FAIL line; see " dir "/console.log")
    else if (!results)
        emit("FAIL", "payload", "payload printed no PASS/FAIL/SKIP line")
}' "$dir/results.log"

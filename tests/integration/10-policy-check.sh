#!/usr/bin/env bash
# `sandguard policy check`: exit codes and the exact file:line:col lines it
# prints for good and bad policy files (see docs/policy.md).
set -u
bin=${SANDGUARD_BIN:-build/sandguard}
src=${SANDGUARD_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
dir=$(mktemp -d /tmp/sg-policy-check.XXXXXX)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
failed=0

pass() { echo "PASS: $1"; }
fail() { echo "FAIL: $1: $2"; failed=1; }

# check NAME WANT_RC WANT_STDOUT WANT_STDERR FILE...: runs the check and
# compares the exit code and both outputs exactly.
check() {
    local name=$1 want_rc=$2 want_out=$3 want_err=$4; shift 4
    local out err rc
    out=$("$bin" policy check "$@" 2>"$dir/.stderr"); rc=$?
    err=$(cat "$dir/.stderr")
    if [ "$rc" != "$want_rc" ]; then
        fail "$name" "exit $rc, want $want_rc (stderr: $err)"
    elif [ "$out" != "$want_out" ]; then
        fail "$name" "stdout '$out', want '$want_out'"
    elif [ "$err" != "$want_err" ]; then
        fail "$name" "stderr '$err', want '$want_err'"
    else
        pass "$name"
    fi
}

# bad NAME FILE 'LINE:COL: MESSAGE' CONTENT: one invalid file, one line.
bad() {
    printf '%s' "$4" > "$2"
    check "$1" 1 "" "$2:$3" "$2"
}

# The shipped policies are valid.
cp "$src/policies/default.json" default.json
check "shipped default.json" 0 "default.json: ok" "" default.json
for f in "$src"/policies/examples/*.json; do
    cp "$f" .
    check "example $(basename "$f")" 0 "$(basename "$f"): ok" "" "$(basename "$f")"
done
printf '{"tenant": "acme"}\n' > acme.json
printf '{}\n' > bob.json
check "several good files" 0 "$(printf 'acme.json: ok\nbob.json: ok')" "" acme.json bob.json

# The documented example: the value's position, not the key's.
bad "out of range" bad1.json '7:18: limits.max_tasks: expected an integer in 1..65536, got -3' \
'{
  "tenant": "bad1",
  "limits": {
    "timeout_ms": 5000,
    "memory_mb": 256,

    "max_tasks": -3
  }
}
'
bad "JSON syntax" bad2.json '3:1: invalid JSON: string or '"'}'"' expected near '"'}'"'' \
'{
  "tenant": "bad2",
}
'
bad "unknown key" bad3.json '3:5: limits.max_task: unknown key (expected one of: timeout_ms, memory_mb, max_tasks, max_forks, cpu, concurrency, on_excess, queue_timeout_ms, output_bytes, open_files, file_size_mb, io_read_mbps, io_write_mbps, io_read_iops, io_write_iops)' \
'{
  "limits": {
    "max_task": 3
  }
}
'
bad "duplicate key" bad4.json '3:3: duplicate key "enabled": each key may appear once per object' \
'{
  "enabled": true,
  "enabled": false
}
'
bad "wrong type" bad5.json '2:14: enabled: expected true or false, got "yes"' \
'{
  "enabled": "yes"
}
'
bad "bad CIDR" bad6.json '3:24: egress.allow[0].cidr: expected a CIDR such as "10.0.0.0/8" or "fd00::/8", got "10.0.0.0/33": the prefix length after / must be a whole number in 0..32' \
'{
  "egress": {
    "allow": [{"cidr": "10.0.0.0/33", "port": 443}]
  }
}
'
bad "bad port" bad7.json '3:46: egress.allow[0].port: expected an integer in 0..65535, got 65536' \
'{
  "egress": {
    "allow": [{"cidr": "10.0.0.0/8", "port": 65536}]
  }
}
'
bad "bad glob" bad8.json "3:35: exec.allow[1]: expected an absolute path glob, got \"/usr/bin/[abc\": unbalanced '[': no ']' before the end of its path component" \
'{
  "exec": {
    "allow": ["/usr/bin/python3", "/usr/bin/[abc"]
  }
}
'
bad "relative read_only path" bad9.json '3:27: files.read_only[1]: expected an absolute normalized path, got "usr/lib": not an absolute path (it must start with /)' \
'{
  "files": {
    "read_only": ["/usr", "usr/lib"]
  }
}
'
bad "tenant differs from file name" bad10.json '2:13: tenant: expected "bad10" (the file is bad10.json), got "acme"' \
'{
  "tenant": "acme"
}
'
bad "action not allowed for the rule" bad11.json '3:13: actions.fork: expected one of "kill", "log", got "deny"' \
'{
  "actions": {
    "fork": "deny"
  }
}
'

# Good and bad together: ok lines for the good, one line per bad file, exit 1.
printf '{"limits": {"cpu": 0}}\n' > carol.json
printf '{"health": {"window": 0}}\n' > dave.json
check "mixed good and bad" 1 "$(printf 'acme.json: ok\nbob.json: ok')" \
    "$(printf 'carol.json:1:20: limits.cpu: expected a number in 0.01..1024, got 0\ndave.json:1:23: health.window: expected an integer in 1..100000, got 0')" \
    acme.json carol.json bob.json dave.json
check "missing file" 1 "acme.json: ok" "nosuch.json: cannot read: No such file or directory" acme.json nosuch.json

# Usage errors exit 64; --help exits 0.
usage() {
    local name=$1 want=$2; shift 2
    "$bin" policy "$@" >/dev/null 2>&1; local rc=$?
    [ "$rc" = "$want" ] && pass "$name" || fail "$name" "exit $rc, want $want"
}
usage "usage: no subcommand" 64
usage "usage: no files" 64 check
usage "usage: unknown subcommand" 64 lint acme.json
usage "usage: unknown option" 64 check --strict acme.json
usage "usage: --help" 0 --help
usage "usage: check --help" 0 check --help
exit $failed

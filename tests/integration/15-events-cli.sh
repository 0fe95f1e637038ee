#!/usr/bin/env bash
# sandguard events: filters, the table, --json, rotated files with --since,
# --follow across a rotation, and the errors on-call gets for bad input.
# Works on a sample events file (current + two rotated), no agent needed.
set -u
bin=${SANDGUARD_BIN:?}
dir=$(mktemp -d /tmp/sg-events-cli.XXXXXX)
follow_pid=
cleanup() {
    [ -n "$follow_pid" ] && kill "$follow_pid" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT
file=$dir/events.jsonl

pass() { echo "PASS: $1"; }
fail() { echo "FAIL: $1: $2"; }

now=$(date +%s)
ts() { date -u -d "@$((now - $1))" +%Y-%m-%dT%H:%M:%S.123Z; }   # $1 seconds ago

# One line per event, as the agent writes them.
ev() { # age type action tenant sandbox pid comm rule detail
    local rule=null; [ "$8" != - ] && rule="\"$8\""
    printf '{"ts":"%s","node":"node-1","tenant":"%s","sandbox":"%s","pid":%s,"ppid":1,"uid":61000,"comm":"%s","type":"%s","rule":%s,"detail":%s,"action":"%s"}\n' \
        "$(ts "$1")" "$4" "$5" "$6" "$7" "$2" "$rule" "$9" "$3"
}

# Three hours ago (rotated twice), two hours ago (rotated once), then the
# current file: an hour ago and the last ten minutes.
ev 10800 exec allowed acme sb-old 100 python3 - '{"filename":"/usr/bin/python3","argv":["python3","old.py"],"truncated":false,"mode":null}' > "$file.2"
ev 7200 exec allowed acme sb-mid 200 python3 - '{"filename":"/usr/bin/python3","argv":["python3","mid.py"],"truncated":false,"mode":null}' > "$file.1"
touch -d "@$((now - 10800))" "$file.2"
touch -d "@$((now - 7200))" "$file.1"
{
    ev 3600 exit allowed acme sb-1 300 python3 - '{"exit_code":0,"signal":9,"core":false,"oom_killed":true}'
    ev 600 egress_denied denied acme sb-1 301 python3 egress '{"family":"inet","dst":"10.0.0.1:80","proto":"tcp","hook":"connect4"}'
    ev 500 fork_limit killed acme sb-2 302 sh fork '{"forks":70,"tasks":65,"limit":64,"which":"max_tasks"}'
    echo 'this line is not an event'
    ev 400 exec_denied killed globex sb-9 303 'a\u001B[31mb' exec '{"filename":"/tmp/x","argv":["x","--evil"],"truncated":true,"mode":"fallback"}'
    ev 300 file_tripped killed globex sb-9 304 cat file '{"path":"/etc/hostname","write":false,"flags":0,"mode":"fallback"}'
    printf '{"ts":"%s","node":"node-1","tenant":"acme","sandbox":"sb-2","pid":null,"ppid":null,"uid":null,"comm":null,"type":"sandbox_killed","rule":"fork","detail":{"trigger":"fork_limit","trigger_pid":302,"kill_latency_ms":3.25,"method":"cgroup.kill"},"action":"killed"}\n' "$(ts 200)"
} > "$file"

# run NAME ARGS...: stdout in $dir/NAME.out, stderr in $dir/NAME.err, $rc
run() {
    local name=$1; shift
    "$bin" events "$@" > "$dir/$name.out" 2> "$dir/$name.err"; rc=$?
}
rows() { tail -n +2 "$dir/$1.out"; }
# The TYPE column (the table's fourth) of each row, by position.
types_of() { rows "$1" | cut -c66-79 | sed 's/ *$//' | tr '\n' ' ' | sed 's/ $//'; }

# --- The table ---------------------------------------------------------
run table --file "$file"
header=$(head -1 "$dir/table.out")
if [ $rc -ne 0 ]; then fail table "exit $rc: $(cat "$dir/table.err")"
elif ! [[ $header == "TIME (UTC)"*TENANT*SANDBOX*TYPE*ACTION*PID*COMM*DETAIL ]]; then fail table "header '$header'"
elif [ "${header:65:4}" != TYPE ]; then fail table "TYPE column not at 66: '$header'"
elif [ "$(types_of table)" != "exit egress_denied fork_limit exec_denied file_tripped sandbox_killed" ]; then
    fail table "types by column: '$(types_of table)'"
else pass "table: header and one aligned row per event of the current file"; fi

row=$(grep egress_denied "$dir/table.out")
if [[ $row == "$(ts 600 | sed 's/T/ /; s/Z$//')  acme"*"sb-1"*"egress_denied   denied   301"*"python3"*"tcp 10.0.0.1:80 (connect4)" ]]; then
    pass "table: egress row shows time, tenant, sandbox, action, pid, comm and destination"
else fail "table egress row" "'$row'"; fi

if grep -q 'signal 9 SIGKILL, oom-killed' "$dir/table.out" &&
   grep -q 'max_tasks 64: tasks 65, forks 70' "$dir/table.out" &&
   grep -q '/tmp/x --evil \.\.\. \[fallback\]' "$dir/table.out" &&
   grep -q '/etc/hostname (read, fallback)' "$dir/table.out" &&
   grep -q 'rule fork after fork_limit, empty in 3.250 ms (cgroup.kill)' "$dir/table.out"; then
    pass "table: detail summaries per type"
else fail "table summaries" "$(cat "$dir/table.out")"; fi

if grep -q $'\x1b' "$dir/table.out"; then fail "hostile comm" "a raw ESC reached the terminal"
elif grep -q 'a\\x1b\[31mb' "$dir/table.out"; then pass "table: control characters in comm are shown escaped"
else fail "hostile comm" "$(grep exec_denied "$dir/table.out")"; fi

if grep -q "skipped 1 line that is not an event (first at line 4: not a JSON object)" "$dir/table.err"; then
    pass "a malformed line is skipped with a warning naming its line"
else fail "malformed line" "stderr: $(cat "$dir/table.err")"; fi

# --- Filters -----------------------------------------------------------
run tenant --file "$file" --tenant globex
if [ $rc -eq 0 ] && [ "$(types_of tenant)" = "exec_denied file_tripped" ]; then
    pass "--tenant"
else fail "--tenant" "rc $rc, types '$(types_of tenant)'"; fi

run type --file "$file" --type fork_limit,sandbox_killed
if [ $rc -eq 0 ] && [ "$(types_of type)" = "fork_limit sandbox_killed" ]; then
    pass "--type with a list"
else fail "--type" "rc $rc, types '$(types_of type)'"; fi

run sandbox --file "$file" --sandbox sb-2 --tenant acme
if [ $rc -eq 0 ] && [ "$(types_of sandbox)" = "fork_limit sandbox_killed" ]; then
    pass "--sandbox (with --tenant)"
else fail "--sandbox" "rc $rc, types '$(types_of sandbox)'"; fi

run since30 --file "$file" --since 30m
if [ $rc -eq 0 ] && [ "$(types_of since30)" = "egress_denied fork_limit exec_denied file_tripped sandbox_killed" ]; then
    pass "--since 30m drops the hour-old event"
else fail "--since 30m" "rc $rc, types '$(types_of since30)'"; fi

run since150 --file "$file" --since 150m
sandboxes=$(rows since150 | cut -c44-63 | sed 's/ *$//' | tr '\n' ' ')
if [ $rc -eq 0 ] && [ "$sandboxes" = "sb-mid sb-1 sb-1 sb-2 sb-9 sb-9 sb-2 " ]; then
    pass "--since 150m reads back into the rotated file, oldest first, not further"
else fail "--since 150m" "rc $rc, sandboxes '$sandboxes'"; fi

run since4h --file "$file" --since 4h --type exec
if [ $rc -eq 0 ] && [ "$(rows since4h | cut -c44-63 | sed 's/ *$//' | tr '\n' ' ')" = "sb-old sb-mid " ]; then
    pass "--since 4h reads every rotated file"
else fail "--since 4h" "rc $rc: $(cat "$dir/since4h.out")"; fi

run since_rfc --file "$file" --since "$(ts 450)"
if [ $rc -eq 0 ] && [ "$(types_of since_rfc)" = "exec_denied file_tripped sandbox_killed" ]; then
    pass "--since with an RFC 3339 time"
else fail "--since RFC 3339" "rc $rc, types '$(types_of since_rfc)'"; fi

run json --file "$file" --tenant globex --json
if [ $rc -eq 0 ] && diff -q <(grep '"tenant":"globex"' "$file") "$dir/json.out" >/dev/null; then
    pass "--json prints the matching raw lines, unchanged"
else fail "--json" "rc $rc: $(cat "$dir/json.out")"; fi

run none --file "$file" --tenant nobody
if [ $rc -eq 0 ] && [ "$(wc -l < "$dir/none.out")" -eq 1 ] && grep -q "no events match" "$dir/none.err"; then
    pass "no match: the header, exit 0 and a note on stderr"
else fail "no match" "rc $rc: $(cat "$dir/none.err")"; fi

# --- Errors ------------------------------------------------------------
check_usage() { # name expected-stderr args...
    local name=$1 want=$2; shift 2
    run "$name" "$@"
    if [ $rc -eq 64 ] && grep -q -- "$want" "$dir/$name.err"; then pass "usage error: $name (exit 64)"
    else fail "usage error $name" "rc $rc, stderr: $(cat "$dir/$name.err")"; fi
}
check_usage bad-flag "unknown option '--bogus'" --file "$file" --bogus
check_usage bad-type "unknown event type 'exex'" --file "$file" --type exec,exex
check_usage bad-since "expected a duration" --file "$file" --since 10 minutes
check_usage bad-since-unit "'10y'" --file "$file" --since 10y
check_usage no-value "option '--tenant' needs a value" --file "$file" --tenant
check_usage extra-arg "unexpected argument 'acme'" --file "$file" acme

run missing --file "$dir/nope.jsonl"
if [ $rc -eq 1 ] && grep -q "$dir/nope.jsonl: No such file or directory" "$dir/missing.err"; then
    pass "a missing file: exit 1 and a message naming it"
else fail "missing file" "rc $rc: $(cat "$dir/missing.err")"; fi

# --- Follow ------------------------------------------------------------
# Without --since it starts at the end: only lines appended afterwards show.
# Those appear; a rotation (rename + new file) loses nothing.
"$bin" events --file "$file" --follow --json --tenant acme > "$dir/follow.out" 2> "$dir/follow.err" &
follow_pid=$!
wait_for() { # pattern: up to 10 s
    for _ in $(seq 100); do grep -q "$1" "$dir/follow.out" && return 0; sleep 0.1; done
    return 1
}
exec_ev() { ev "$1" exec allowed "$2" "$3" 400 python3 - '{"filename":"/usr/bin/python3","argv":["python3"],"truncated":false,"mode":null}'; }
# When it has reached the end is unknown: append markers until one shows.
ready=0
for _ in $(seq 50); do
    exec_ev 6 acme sb-ready >> "$file"
    sleep 0.2
    grep -q sb-ready "$dir/follow.out" && { ready=1; break; }
done
if [ $ready = 1 ] && ! grep -v -q sb-ready "$dir/follow.out"; then
    pass "--follow without --since starts at the end of the file"
else fail "--follow start" "output: $(cat "$dir/follow.out") stderr: $(cat "$dir/follow.err")"; fi
exec_ev 5 acme sb-f1 >> "$file"
exec_ev 5 globex sb-f2 >> "$file"
if wait_for sb-f1 && ! grep -q sb-f2 "$dir/follow.out"; then
    pass "--follow prints new lines that match the filters"
else fail "--follow" "output: $(cat "$dir/follow.out") stderr: $(cat "$dir/follow.err")"; fi
mv "$file" "$file.1"
exec_ev 4 acme sb-f3 >> "$file.1"
exec_ev 3 acme sb-f4 > "$file"
if wait_for sb-f4 && grep -q sb-f3 "$dir/follow.out" &&
   [ "$(grep -v sb-ready "$dir/follow.out" | grep -o 'sb-f[0-9]' | tr '\n' ' ')" = "sb-f1 sb-f3 sb-f4 " ]; then
    pass "--follow across a rotation: the old file's last line, then the new file"
else fail "--follow rotation" "output: $(cat "$dir/follow.out") stderr: $(cat "$dir/follow.err")"; fi
# Two rotations between two looks (the follower stopped meanwhile): the
# file between them was never the live one when it looked, and is read
# too, in order, once; the files before the followed one are not read again.
kill -STOP "$follow_pid"
exec_ev 2 acme sb-g1 >> "$file"
mv "$file.2" "$file.3"; mv "$file.1" "$file.2"; mv "$file" "$file.1"
exec_ev 2 acme sb-g2 > "$file"
exec_ev 2 acme sb-g3 >> "$file"
mv "$file.3" "$file.4"; mv "$file.2" "$file.3"; mv "$file.1" "$file.2"; mv "$file" "$file.1"
exec_ev 1 acme sb-g4 > "$file"
kill -CONT "$follow_pid"
if wait_for sb-g4 &&
   [ "$(grep -v sb-ready "$dir/follow.out" | grep -o 'sb-[fg][0-9]' | tr '\n' ' ')" = "sb-f1 sb-f3 sb-f4 sb-g1 sb-g2 sb-g3 sb-g4 " ] &&
   ! grep -q warning "$dir/follow.err"; then
    pass "--follow across two rotations between two looks: the file between is read too, once"
else fail "--follow two rotations" "output: $(cat "$dir/follow.out") stderr: $(cat "$dir/follow.err")"; fi
# The followed file removed, not rotated: the new file is followed, with
# a warning, and no older file is read again.
rm "$file"
exec_ev 1 acme sb-h1 > "$file"
if wait_for sb-h1 && grep -q "is not among its rotated files" "$dir/follow.err" &&
   [ "$(grep -v sb-ready "$dir/follow.out" | grep -o 'sb-[fgh][0-9]' | tr '\n' ' ')" = "sb-f1 sb-f3 sb-f4 sb-g1 sb-g2 sb-g3 sb-g4 sb-h1 " ]; then
    pass "--follow: a followed file removed, not rotated: the new one followed, with a warning"
else fail "--follow removed" "output: $(cat "$dir/follow.out") stderr: $(cat "$dir/follow.err")"; fi
# Rotated past the files kept (two kept here) while the follower looked
# away: the followed file is gone (what was appended to it is still read,
# through the follower's descriptor), the newer rotated files are read, in
# order, then the new one, with the warning.
kill -STOP "$follow_pid"
rm -f "$file".[1-9]
exec_ev 1 acme sb-k0 >> "$file"
mv "$file" "$file.1"; exec_ev 1 acme sb-k1 > "$file"
mv "$file.1" "$file.2"; mv "$file" "$file.1"; exec_ev 1 acme sb-k2 > "$file"
rm "$file.2"; mv "$file.1" "$file.2"; mv "$file" "$file.1"; exec_ev 1 acme sb-k3 > "$file"
: > "$dir/follow.err"
kill -CONT "$follow_pid"
if wait_for sb-k3 &&
   [ "$(grep -o 'sb-k[0-9]' "$dir/follow.out" | tr '\n' ' ')" = "sb-k0 sb-k1 sb-k2 sb-k3 " ] &&
   grep -q "is not among its rotated files" "$dir/follow.err"; then
    pass "--follow: the followed file rotated past the files kept: the newer ones read, in order"
else fail "--follow rotated away" "output: $(cat "$dir/follow.out") stderr: $(cat "$dir/follow.err")"; fi
kill "$follow_pid" 2>/dev/null; wait "$follow_pid" 2>/dev/null; follow_pid=
exit 0

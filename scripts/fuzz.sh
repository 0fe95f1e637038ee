#!/usr/bin/env bash
# Builds and runs the libFuzzer targets in tests/fuzz/, each for a bounded
# time: scripts/fuzz.sh [SECONDS] (default $FUZZ_SECONDS, else 60).
#
# For each target: build it with clang (-fsanitize=fuzzer,address,undefined)
# into build-fuzz/ (FUZZ_BUILD overrides), replay every input in
# tests/fuzz/regressions/<target>/ (each once crashed it), then fuzz for
# SECONDS over a copy of its seed corpus, tests/fuzz/corpus/<corpus>/. The
# repository is never written to: new inputs go to the copy. One line per
# target (PASS, FAIL or SKIP with why), then "fuzz: N passed, N failed,
# N skipped". A crash leaves its reproducer in build-fuzz/artifacts/<target>/
# and prints how to keep it as a regression input.
set -u
cd "$(dirname "$0")/.."

seconds=${1:-${FUZZ_SECONDS:-60}}
out=${FUZZ_BUILD:-build-fuzz}
cc=${FUZZ_CC:-clang-14}
case $seconds in
    ''|*[!0-9]*|0) echo "usage: scripts/fuzz.sh [SECONDS]  (a whole number > 0, got '$seconds')" >&2; exit 64 ;;
esac
command -v "$cc" >/dev/null 2>&1 || cc=clang

# target | seed corpus (tests/fuzz/corpus/<name>) | what it links besides
# tests/fuzz/<target>.c: only the src/ files it needs, and their libraries.
targets=(
    "fuzz_policy|policy|src/policy/policy.c src/policy/policy_parse.c src/policy/policy_schema.c src/lib/json_locate.c src/policy/match.c src/lib/base64.c src/policy/default_policy.S -ljansson -lm"
    "fuzz_scores|scores|src/judge/scores.c -ljansson -lm"
    "fuzz_event_decode|events|src/telemetry/event_decode.c src/telemetry/event_json.c src/lib/json_out.c src/lib/rule_names.c src/lib/utf8.c -ljansson -lm"
    "fuzz_event_json|event_json|src/telemetry/event_decode.c src/telemetry/event_json.c src/lib/json_out.c src/lib/rule_names.c src/lib/utf8.c -ljansson -lm"
    "fuzz_metrics|metrics|src/telemetry/metrics.c src/lib/log.c src/lib/utf8.c -lpthread -lm"
)

cflags=(-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
        -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Werror -D_GNU_SOURCE -Iinclude -Isrc)
# A sanitizer report must end the run; leaks count as findings too.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

pass=0; fail=0; skip=0
mkdir -p "$out/logs"

# The line of a libFuzzer log that says what went wrong.
why() {
    grep -m1 -E 'check failed|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|SUMMARY' "$1" |
        sed -e 's/^ *//' -e 's/^fuzz_[a-z_]*: //' | cut -c1-200
}

run_target() {
    local name=$1 corpus=$2 link=$3
    local src=tests/fuzz/$name.c bin=$out/$name log=$out/logs/$name.log
    local regs=tests/fuzz/regressions/$name work=$out/corpus/$name art=$out/artifacts/$name/
    local n_regs=0 rc

    if [ ! -f "$src" ]; then
        echo "SKIP: $name: $src is not in this tree"; skip=$((skip + 1)); return
    fi
    if [ ! -d "tests/fuzz/corpus/$corpus" ]; then
        echo "FAIL: $name: no seed corpus tests/fuzz/corpus/$corpus/"; fail=$((fail + 1)); return
    fi
    # shellcheck disable=SC2086  # $link is a list of files and -l flags
    if ! "$cc" "${cflags[@]}" "$src" $link -o "$bin" > "$out/logs/$name.build.log" 2>&1; then
        echo "FAIL: $name: build failed ($cc); see $out/logs/$name.build.log:"
        sed -n '1,15s/^/    /p' "$out/logs/$name.build.log"
        fail=$((fail + 1)); return
    fi

    # Every input that once crashed it, each run once.
    if [ -d "$regs" ]; then
        local files=("$regs"/*)
        [ -e "${files[0]}" ] && n_regs=${#files[@]}
    fi
    mkdir -p "$art"
    touch "$out/logs/$name.start"
    if [ "$n_regs" -gt 0 ]; then
        "$bin" -timeout=10 -artifact_prefix="$art" "$regs"/* > "$log.regressions" 2>&1; rc=$?
        if [ $rc -ne 0 ]; then
            echo "FAIL: $name: a regression input fails again (exit $rc): $(why "$log.regressions")"
            grep '^Running: ' "$log.regressions" | tail -1 | sed 's/^/    last input: /'
            echo "    replay: $bin $regs/*   (log: $log.regressions)"
            fail=$((fail + 1)); return
        fi
    fi

    rm -rf "$work"
    mkdir -p "$work"
    cp -pR "tests/fuzz/corpus/$corpus"/. "$work"/
    local seeds; seeds=$(find "$work" -type f | wc -l)
    "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$art" "$work" > "$log" 2>&1; rc=$?
    local runs; runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    local cov; cov=$(grep -oE "cov: [0-9]+" "$log" | tail -1 | cut -d" " -f2)
    local corp; corp=$(find "$work" -type f | wc -l)
    if [ $rc -ne 0 ]; then
        local repro; repro=$(find "$art" -type f -newer "$out/logs/$name.start" -printf '%f\n' | head -1)
        echo "FAIL: $name: $(why "$log") (exit $rc, after ${runs:-?} runs; log: $log)"
        if [ -n "$repro" ]; then
            echo "    reproducer: $art$repro"
            echo "    replay it:  $bin $art$repro"
            echo "    once fixed, keep it as a regression input (replayed on every run):"
            echo "      mkdir -p $regs && cp $art$repro $regs/<what-it-found>"
        fi
        fail=$((fail + 1)); return
    fi
    echo "PASS: $name: ${runs:-?} runs in ${seconds}s, ${cov:-?} edges covered, corpus $seeds -> $corp inputs, $n_regs regression inputs replayed"
    pass=$((pass + 1))
}

if ! command -v "$cc" >/dev/null 2>&1; then
    echo "FAIL: fuzz: no clang ($cc): run scripts/install-deps.sh"
    echo "fuzz: 0 passed, 1 failed, 0 skipped"
    exit 1
fi
listed=" "
for t in "${targets[@]}"; do
    IFS='|' read -r name corpus link <<< "$t"
    listed+="$name "
    run_target "$name" "$corpus" "$link"
done
# A target nobody told this script how to build is not silently left out.
for src in tests/fuzz/*.c; do
    [ -e "$src" ] || continue
    name=$(basename "$src" .c)
    case $listed in *" $name "*) continue ;; esac
    echo "FAIL: $name: $src has no entry in scripts/fuzz.sh's target list (what it links)"
    fail=$((fail + 1))
done
echo "fuzz: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]

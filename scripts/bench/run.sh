#!/usr/bin/env bash
# sandguard benchmarks (issues 7, 14): launch (cold and warm, CLI and HTTP), hook overhead outside and inside
# sandboxes, event pipeline, verifier throughput; each against a baseline
# measured in the same run. Prints one table; writes <build>/bench/results.json.
# By hand only (never in CI); the machine should be as idle as you can get it.
#
#   scripts/bench/run.sh [--quick] [--build DIR] [--only 1,2,...,17] [--programs N]
#
# --quick: about a minute, scaled down (fewer rounds, cycles, events and 16
# verifier programs instead of 1024). Without it: the full run, ~10 minutes,
# plus scenario 17 (one RL iteration, 15,360 tests, ~20 minutes on 2 cores;
# --programs N scales it, with scenario 5, to N problems).
# Builds its helpers (plainrun, hookloop, eventgen, ringgen, cgjoin, progstats, layers,
# admission) into <build>/bench/.
# Runs a private agent (own cgroup root, pins, socket, state) like the
# integration tests do, so a real agent on the node is never touched.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-build}
args=()
while [ $# -gt 0 ]; do
    case $1 in
        --quick) args+=(--quick) ;;
        --build|--only|--programs)
            [ $# -ge 2 ] || { echo "bench: $1 needs a value (see --help)" >&2; exit 64; }
            if [ "$1" = --build ]; then build=$2; else args+=("$1" "$2"); fi
            shift ;;
        -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench: unknown argument $1 (see --help)" >&2; exit 64 ;;
    esac
    shift
done
case $build in /*) ;; *) build=$src/$build ;; esac

[ "$(id -u)" = 0 ] || { echo "bench: run as root (the agent loads BPF programs)" >&2; exit 2; }
[ -x "$build/sandguard" ] || { echo "bench: no $build/sandguard: run make first" >&2; exit 2; }
for t in bwrap strace bpftool xargs timeout cmp; do
    command -v "$t" >/dev/null || { echo "bench: '$t' not found: run scripts/install-deps.sh --bench" >&2; exit 2; }
done

# A killed earlier run's agent would still be attached and tax every
# figure: sweep what runs that are gone left (pins, cgroup roots).
python3 "$src/tests/lib/sweep_stale.py" || true

out=$build/bench
mkdir -p "$out"
for helper in plainrun hookloop eventgen cgjoin progstats; do
    if [ ! -x "$out/$helper" ] || [ "$src/scripts/bench/$helper.c" -nt "$out/$helper" ]; then
        libs=; [ $helper = progstats ] && libs=-lbpf
        ${CC:-gcc} -O2 -std=gnu11 -Wall -Wextra -Wno-format-truncation \
            -o "$out/$helper" "$src/scripts/bench/$helper.c" $libs
    fi
done

# Scenario 8's programs: built against the tree's vmlinux.h (make made it).
if [ ! -f "$out/syscost.bpf.o" ] || [ "$src/scripts/bench/syscost.bpf.c" -nt "$out/syscost.bpf.o" ]; then
    ${CLANG:-clang} -g -O2 -target bpf -mcpu=v3 -D__TARGET_ARCH_x86 -I"$build" \
        -c "$src/scripts/bench/syscost.bpf.c" -o "$out/syscost.bpf.o"
fi
if [ ! -x "$out/syscost" ] || [ "$src/scripts/bench/syscost.c" -nt "$out/syscost" ]; then
    ${CC:-gcc} -O2 -std=gnu11 -Wall -Wextra -o "$out/syscost" "$src/scripts/bench/syscost.c" -lbpf
fi

# Scenario 11's event source: the agent's own maps and submit (common.bpf.h),
# rebuilt whenever they change.
if [ ! -f "$out/ringgen.bpf.o" ] || [ "$src/scripts/bench/ringgen.bpf.c" -nt "$out/ringgen.bpf.o" ] ||
   [ -n "$(find "$src/src/agent/bpf/common.bpf.h" "$src/include/abi" -newer "$out/ringgen.bpf.o")" ]; then
    ${CLANG:-clang} -g -O2 -target bpf -mcpu=v3 -D__TARGET_ARCH_x86 -Wall -I"$src/include" \
        -I"$src/src/agent/bpf" -I"$build" -I/usr/include/"$(uname -m)"-linux-gnu \
        -c "$src/scripts/bench/ringgen.bpf.c" -o "$out/ringgen.bpf.o"
fi
if [ ! -x "$out/ringgen" ] || [ "$src/scripts/bench/ringgen.c" -nt "$out/ringgen" ]; then
    ${CC:-gcc} -O2 -std=gnu11 -Wall -Wextra -o "$out/ringgen" "$src/scripts/bench/ringgen.c" -lbpf
fi

# The layers helper runs sandguard's own sandbox code: it links the build's
# component archives (and uses the tests' sandbox_run for whole launches).
make --no-print-directory -C "$src" BUILD="$build" "$build/tests/sandbox_run" \
    "$build/lib/libsg_sandbox.a" >/dev/null
ln -sf "$build/tests/sandbox_run" "$out/sandbox_run"
if [ ! -x "$out/layers" ] || [ "$src/scripts/bench/layers.c" -nt "$out/layers" ] ||
   [ "$build/lib/libsg_sandbox.a" -nt "$out/layers" ]; then
    ${CC:-gcc} -O2 -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wno-format-truncation \
        -D_GNU_SOURCE -I"$src/include" -I"$src/src" -I"$build" -o "$out/layers" \
        "$src/scripts/bench/layers.c" -Wl,--start-group "$build"/lib/libsg_sandbox.a \
        "$build"/lib/libsg_control.a "$build"/lib/libsg_telemetry.a "$build"/lib/libsg_policy.a \
        "$build"/lib/libsg_lib.a -Wl,--end-group -ljansson -lbpf -lelf -lz -lpthread -lm
fi

# Scenario 18's helper: the node's admission line, the build's own code.
make --no-print-directory -C "$src" BUILD="$build" "$build/lib/libsg_node.a" \
    "$build/lib/libsg_policy.a" "$build/lib/libsg_lib.a" >/dev/null
if [ ! -x "$out/admission" ] || [ "$src/scripts/bench/admission.c" -nt "$out/admission" ] ||
   [ "$build/lib/libsg_node.a" -nt "$out/admission" ]; then
    ${CC:-gcc} -O2 -std=gnu11 -Wall -Wextra -D_GNU_SOURCE -I"$src/include" -I"$src/src" \
        -I"$build" -o "$out/admission" "$src/scripts/bench/admission.c" -Wl,--start-group \
        "$build/lib/libsg_node.a" "$build/lib/libsg_policy.a" "$build/lib/libsg_lib.a" \
        -Wl,--end-group -ljansson -lpthread
fi

exec /usr/bin/python3 -B "$src/scripts/bench/bench.py" --sandguard "$build/sandguard" \
    --tools "$out" --out "$out/results.json" "${args[@]}"

#!/usr/bin/env bash
# make vmtest: boots stock Debian kernels under qemu (TCG) with BPF LSM on
# and runs a test payload inside each, then prints the kernel x feature x
# mode matrix and ends with "vmtest: N passed, N failed, N skipped".
# See docs/kernel-support.md.
#
# Usage: scripts/vmtest/run.sh [BUILD]     (default $BUILD, else "build";
#                                           relative to the repo top)
#
# The payload: pick a preset with ONE variable,
#   VMTEST_PAYLOAD=selftest  tests/vmtest/selftest.c, built here:
#                            proves the guest plumbing and that BPF LSM denies.
#   VMTEST_PAYLOAD=bench     (make vmbench) the hook-overhead loops of make bench in LSM
#                            mode, agent on/off, medians and ratios per kernel
#                            (scripts/vmtest/bench-payload.sh, bench-report.sh).
#   VMTEST_PAYLOAD=agent     (default) $BUILD/sandguard, $BUILD/tests/agent_test, enroll_test
#                            (built with make), run by tests/vmtest/agent-payload.sh:
#                            a row per kernel feature from "sandguard probe"
#                            (the table must say lsm), "agent_test --mode auto
#                            --expect-mode lsm", "enroll_test", and with
#                            VMTEST_FALLBACKS=1, on kernels with the newer
#                            features, agent_test with them turned off;
#                            then the benign corpus
#                            (tests/programs/benign/run.sh) under the agent,
#                            with the host's /usr/bin/python3 and its
#                            standard library copied into the guest.
# or override any part of it (these win over the preset):
#   VMTEST_BINS    host binaries, space-separated; each becomes /bin/<name>
#                  in the guest, with its shared libraries (static ones work too).
#   VMTEST_CMD     the guest command: busybox `sh -c`, cwd /tmp (tmpfs),
#                  PATH=/bin:/sbin:/usr/bin:/usr/sbin, run as root. It prints
#                  "PASS: name", "FAIL: name: why", "SKIP: name: why" on stdout
#                  (stderr goes to the console log only).
#   VMTEST_FILES   extra files, space-separated HOST:/GUEST/PATH pairs.
#   VMTEST_MODE    mode column for results until the payload prints a line
#                  "MODE: <mode>" (selftest: "selftest"; agent: "lsm").
# The matrix and the machine:
#   VMTEST_KERNELS  Debian suites to boot (default "bullseye bookworm trixie
#                   bullseye-nolsm": Debian 11 = 5.10, Debian 12 = 6.1,
#                   Debian 13 = 6.12; SUITE-nolsm boots that kernel without
#                   bpf in lsm=, where the agent must refuse to start)
#   VMTEST_TIMEOUT  hard limit per boot in seconds (480: the benign corpus runs Python under emulation); a hung guest is a FAIL
#   VMTEST_MEM (1024 MiB), VMTEST_SMP (2), VMTEST_CPU (max,-cx16: see boot.sh),
#   VMTEST_APPEND (extra kernel args)
#   VMTEST_CACHE (vmcache/), VMTEST_REFRESH=1, VMTEST_MIRROR: see fetch-kernel.sh
#
# Output in $BUILD/vmtest/: results.tsv (kernel suite feature mode result
# reason), kernels.tsv, matrix.md, initrd.gz, and <suite>/console.log
# (ttyS0), results.log (ttyS1), qemu.log, status per kernel.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.." || exit 1
build=${1:-${BUILD:-build}}
out=$build/vmtest
started=$(date +%s)

payload=${VMTEST_PAYLOAD:-agent}
case $payload in
    selftest)
        bins=${VMTEST_BINS:-$out/selftest}
        cmd=${VMTEST_CMD:-selftest}
        mode=${VMTEST_MODE:-selftest} ;;
    agent)
        bins=${VMTEST_BINS:-$build/sandguard $build/tests/agent_test $build/tests/enroll_test}
        # The probe table as one row per kernel feature, then the agent
        # and enrollment suites (auto must pick LSM on these kernels);
        # VMTEST_FALLBACKS=1: on kernels with the newer features, the agent
        # suite again without them.
        cmd=${VMTEST_CMD:-VMTEST_FALLBACKS=${VMTEST_FALLBACKS:-0} sh /vmtest/agent-payload.sh}
        [ -n "${VMTEST_CMD:-}" ] || VMTEST_FILES="tests/vmtest/agent-payload.sh:/vmtest/agent-payload.sh ${VMTEST_FILES:-}"
        # The benign corpus: its runner, the policies it runs under, and
        # an interpreter at the path the policies allow.
        if [ -z "${VMTEST_CMD:-}" ] && [ -x /usr/bin/python3 ]; then
            VMTEST_FILES="$VMTEST_FILES tests/programs/benign:/vmtest/src/tests/programs/benign policies:/vmtest/src/policies"
            python=$(readlink -f /usr/bin/python3)
            stdlib=$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')
            VMTEST_TREES="$python $stdlib ${VMTEST_TREES:-}"
            # What the corpus reads at run time, as on a node: locale,
            # time zones, CA certificates, Python's site configuration.
            for t in /usr/lib/locale /usr/share/zoneinfo /etc/ssl /usr/lib/ssl /etc/localtime \
                /etc/locale.alias "/etc/python${stdlib##*/python}"; do
                [ -e "$t" ] && VMTEST_TREES="$VMTEST_TREES $t"
            done
            cmd="VMTEST_PYTHON=$python $cmd"
        fi
        mode=${VMTEST_MODE:-lsm} ;;
    bench)
        # make vmbench: the hook-overhead loops in LSM mode, agent on/off,
        # measured in the guest (scripts/vmtest/bench-payload.sh); the
        # BENCH lines are collected into $BUILD/vmtest/bench.tsv.
        bins=${VMTEST_BINS:-$build/sandguard $out/hookloop $out/progstats}
        cmd=${VMTEST_CMD:-sh /vmtest/bench-payload.sh}
        [ -n "${VMTEST_CMD:-}" ] || VMTEST_FILES="scripts/vmtest/bench-payload.sh:/vmtest/bench-payload.sh ${VMTEST_FILES:-}"
        mode=${VMTEST_MODE:-lsm} ;;
    *)
        echo "vmtest: unknown VMTEST_PAYLOAD '$payload' (selftest, agent or bench)" >&2
        echo "vmtest: 0 passed, 1 failed, 0 skipped"
        exit 1 ;;
esac
kernels=${VMTEST_KERNELS:-bullseye bookworm trixie bullseye-nolsm}

mkdir -p "$out"
results=$out/results.tsv
kernel_rows=$out/kernels.tsv
: > "$results"
: > "$kernel_rows"
setup_log=$out/setup.log
: > "$setup_log"

fail_row() {  # kernel suite feature reason
    printf '%s\t%s\t%s\t%s\tFAIL\t%s\n' "$1" "$2" "$3" "$mode" "$4" >> "$results"
}
last_error() { grep -v '^ *$' "$setup_log" | tail -n 1; }

# The payload binaries: the selftest is built here; binaries under $BUILD
# are make targets; anything else must already exist.
build_payload() {
    local b targets=()
    if [ "$payload" = selftest ] && [ -z "${VMTEST_BINS:-}" ]; then
        ${CC:-gcc} -std=gnu11 -O2 -g -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE -Werror \
            tests/vmtest/selftest.c -o "$out/selftest" -lbpf || return 1
    fi
    if [ "$payload" = bench ] && [ -z "${VMTEST_BINS:-}" ]; then
        ${CC:-gcc} -std=gnu11 -O2 -Wall -Wextra -Wno-format-truncation \
            scripts/bench/hookloop.c -o "$out/hookloop" || return 1
        ${CC:-gcc} -std=gnu11 -O2 -Wall -Wextra scripts/bench/progstats.c -o "$out/progstats" \
            -lbpf || return 1
    fi
    for b in $bins; do
        case $b in "$out"/*) ;; "$build"/*) targets+=("$b") ;; esac
    done
    if [ ${#targets[@]} -gt 0 ]; then
        make --no-print-directory BUILD="$build" "${targets[@]}" || return 1
    fi
}

missing_tools=()
for t in qemu-system-x86_64:qemu-system-x86 cpio:cpio busybox:busybox-static dpkg-deb:dpkg apt-get:apt; do
    command -v "${t%%:*}" >/dev/null || missing_tools+=("${t##*:}")
done

echo "vmtest: payload '$payload': $cmd"
ready=1
if [ ${#missing_tools[@]} -gt 0 ]; then
    fail_row all - setup "missing ${missing_tools[*]}: run scripts/install-deps.sh"
    ready=0
elif ! build_payload >>"$setup_log" 2>&1; then
    fail_row all - payload-build "building the payload failed: $(last_error) (see $setup_log)"
    ready=0
else
    extra=()
    for f in ${VMTEST_FILES:-}; do extra+=(-f "$f"); done
    for t in ${VMTEST_TREES:-}; do extra+=(-t "$t"); done
    # What a reward program never needs: bytecode caches (rebuilt in
    # memory), the static library and build config, test suites, GUIs.
    # (dist-packages: numpy's copy there is partial; the guest has no numpy
    # and the corpus skips it.)
    for x in __pycache__ 'config-*' test idlelib tkinter turtledemo ensurepip lib2to3 dist-packages; do
        extra+=(-x "$x")
    done
    # shellcheck disable=SC2086  # $bins is a list
    if ! "$here/mkinitrd.sh" -o "$out/initrd.gz" -c "$cmd" "${extra[@]}" $bins >>"$setup_log" 2>&1; then
        fail_row all - initramfs "$(last_error) (see $setup_log)"
        ready=0
    fi
fi

if [ $ready = 1 ]; then
    for entry in $kernels; do
        # SUITE-nolsm: the same kernel booted without bpf in lsm= (Debian
        # 11's default), where the agent must refuse to start.
        suite=${entry%-nolsm}
        append=${VMTEST_APPEND:-}
        [ "$suite" != "$entry" ] && append="$append lsm=lockdown,yama"
        if ! fetched=$("$here/fetch-kernel.sh" "$suite" 2>>"$setup_log"); then
            fail_row "$entry" "$suite" fetch-kernel "$(last_error) (see $setup_log)"
            printf '%s\t%s\t-\t-\t-\n' "$entry" "$suite" >> "$kernel_rows"
            continue
        fi
        read -r vmlinuz version package <<< "$fetched"
        [ "$suite" != "$entry" ] && version="$version-nolsm"
        dir=$out/$entry
        echo "vmtest: booting $package ($version, $entry)"
        VMTEST_APPEND="$append" "$here/boot.sh" "$vmlinuz" "$out/initrd.gz" "$dir" 2>>"$setup_log"
        "$here/parse.sh" "$version" "$suite" "$dir" "$mode" > "$dir/rows.tsv"
        cat "$dir/rows.tsv" >> "$results"

        init_s=$(sed -n 's/^VMTEST-BOOTED: [^ ]* \([0-9.]*\).*/\1/p' "$dir/results.log" | head -n 1)
        wall_s=$(cut -d' ' -f3 "$dir/status" 2>/dev/null)
        printf '%s\t%s\t%s\t%s\t%s\n' "$version" "$suite" "$package" "${init_s:--}" "${wall_s:--}" >> "$kernel_rows"
        echo "vmtest: $version: $(cut -f5 "$dir/rows.tsv" | sort | uniq -c | awk '{ printf "%s%d %s", sep, $1, $2; sep = ", " }')" \
             "(init reached at ${init_s:-?} s guest time; ${wall_s:-?} s wall for boot, run and poweroff)"
        # A broken boot: show the end of the console right here, for CI logs.
        if awk -F '\t' '($3 == "boot" || $3 == "payload") && $5 == "FAIL" { bad = 1 } END { exit !bad }' "$dir/rows.tsv"; then
            echo "vmtest: last console lines of $entry ($dir/console.log):"
            # (without the terminal escapes SeaBIOS prints)
            tail -n 25 "$dir/console.log" 2>/dev/null | sed -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' -e 's/\x1bc//g' -e 's/\r$//' -e 's/^/    /'
        fi
    done
fi

if [ "$payload" = bench ]; then
    "$here/bench-report.sh" "$out" $kernels
fi
echo "vmtest: $(( $(date +%s) - started )) s in all; results in $results, $out/matrix.md"
"$here/report.sh" "$results" "$kernel_rows" "$out/matrix.md"

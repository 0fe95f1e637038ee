#!/usr/bin/env bash
# Stage for tests/run-all.sh: the tree reads as the architecture. Component
# layering (no include crosses a component upwards, so no include or call
# cycle crosses one), folder sizes, the format (.clang-format) and a
# warning-free build at -Wall -Wextra -Werror. Ends with
# "tree: N passed, N failed, N skipped". The BUILD argument is not used.
set -u
cd "$(dirname "$0")/../.."
pass=0; fail=0; skip=0
result() {  # PASS|FAIL|SKIP name [why]
    echo "$1: $2${3:+: $3}"
    case $1 in PASS) pass=$((pass + 1)) ;; FAIL) fail=$((fail + 1)) ;; *) skip=$((skip + 1)) ;; esac
}

out=$(python3 tests/stages/tree_layers.py 2>&1); rc=$?
if [ $rc -eq 0 ]; then result PASS "layers: components include only the ones below them" "$out"
else result FAIL "layers" "$out"; fi

if command -v clang-format >/dev/null; then
    out=$(make --no-print-directory format-check 2>&1) && result PASS "format: make format-check" ||
        result FAIL "format" "$out"
else
    result SKIP "format" "no clang-format (apt-get install clang-format)"
fi

# The same build writes the compiler's call graph and frame sizes
# (-fcallgraph-info, GCC 10+) for the serve worker's stack check below.
log=$(mktemp)
cgi= probe=$(mktemp -d)
if (cd "$probe" && echo 'int f(void){return 0;}' | ${CC:-cc} -fcallgraph-info=su -x c -c - -o p.o) 2>/dev/null; then
    cgi=-fcallgraph-info=su
fi
rm -rf "$probe"
# (An object built earlier without it is built again: make does not track flags.)
[ -n "$cgi" ] && [ -d build-werror/obj ] &&
    find build-werror/obj -name '*.o' | while read -r o; do [ -e "${o%.o}.ci" ] || rm -f "$o"; done
if make --no-print-directory -j"$(nproc)" BUILD=build-werror EXTRA_CFLAGS="-Werror $cgi" all >"$log" 2>&1; then
    result PASS "build: warning-free at -Wall -Wextra (-Werror)"
else
    result FAIL "build with -Werror" "$(grep -m3 -E 'warning|error' "$log" | tr '\n' ' ')"
fi
rm -f "$log"

# A request runs whole on a serve worker's 256 KiB stack: the deepest
# path the compiler can see must leave half of it (tests/stages/worker_stack.py).
if [ -z "$cgi" ]; then
    result SKIP "stack: a serve worker's deepest path" "${CC:-cc} has no -fcallgraph-info (GCC 10+)"
elif out=$(python3 tests/stages/worker_stack.py build-werror/obj . 2>&1); then
    result PASS "stack: a serve worker's deepest path leaves half its stack" "$out"
else
    result FAIL "stack: a serve worker's deepest path" "$out"
fi

# Every `sandguard exec` pays for the shared libraries the binary needs
# before it can hand its run over: libmicrohttpd (and gnutls behind it) is
# loaded only by the HTTP servers (src/lib/mhd_lazy.h), and libbpf, libelf,
# zlib and jansson are linked in (the Makefile's LDLIBS): libc alone.
if [ ! -x build-werror/sandguard ]; then
    result SKIP "start: the binary's shared libraries" "no build-werror/sandguard"
elif ! needed=$(readelf -d build-werror/sandguard | grep NEEDED); then
    result FAIL "start: the binary's shared libraries" "readelf found no NEEDED entry"
elif other=$(echo "$needed" | grep -v '\[libc\.so\.6\]'); then
    result FAIL "start: the binary needs more than libc" "$(echo "$other" | tr -s ' ' | tr '\n' ' ')"
else
    result PASS "start: the binary needs libc alone ($(echo "$needed" | wc -l) shared library)"
fi

# ... and what the loader does before main: each relocation is processed,
# and each page of them written (a copy-on-write fault), at every start.
# OpenSSL's EVP layer, linked in, was 16,600 of them (its tables): it is
# loaded by the executor that checks a signature (src/artifact/crypto_lazy.h).
if [ -x build-werror/sandguard ]; then
    relocs=$(readelf -rW build-werror/sandguard | grep -c 'R_X86_64_\|R_AARCH64_')
    if [ "$relocs" -lt 4000 ]; then
        result PASS "start: $relocs relocations (fewer than 4000)"
    else
        result FAIL "start: $relocs relocations at each start (fewer than 4000 expected)" \
            "readelf -rW build-werror/sandguard; a library's tables linked in? (src/artifact/crypto_lazy.h)"
    fi
fi

echo "tree: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]

#!/usr/bin/env bash
# Installs the Debian packages sandguard builds, tests and demos with.
# Idempotent: packages already installed are not touched, and apt-get is
# only called (after one `apt-get update`) when something is missing;
# PY_RUNTIME is rebuilt only when its packages' versions or python's change.
set -euo pipefail

# Build: compiler, BPF toolchain and the libraries the binary links (libssl-dev:
# the static libcrypto for SHA-256, src/lib/sha256.c, and libcrypto.so.3 for Ed25519,
# loaded by an executor that checks a signature, src/artifact/crypto_lazy.h).
BUILD_PKGS=(make gcc clang llvm bpftool pkg-config libbpf-dev libelf-dev
            zlib1g-dev libjansson-dev libmicrohttpd-dev libcmocka-dev libssl-dev)
# Tests: the reward programs are Python; the VM matrix boots stock kernels;
# the scrape test runs a real Prometheus; the deploy check parses YAML;
# the HTTP server's languages (tests/integration/64-serve-languages.py):
# g++ (cpp), openjdk-17-jdk-headless (java), golang-go (go), rustc (rust),
# nodejs (below; bash and python3 are there already). Those three add
# about 250 MB to download and a minute to a fresh install. strace: the
# executor's order of steps and its races (30-exec, 33-warm-prerun).
# podman, runc, debootstrap: the deploy stage builds deploy/Dockerfile and
# runs the agent and serve from it (deploy/build-image.sh; podman's default
# runtime, crun, refuses hybrid cgroup hosts, so runc). minisign: the
# signed artifacts of 67-artifacts.
TEST_PKGS=(python3 python3-yaml python3-numpy busybox-static qemu-system-x86 cpio
           prometheus iproute2 curl libclang-rt-14-dev g++
           openjdk-17-jdk-headless golang-go rustc strace
           podman runc debootstrap minisign)
# The libraries SandboxFusion's runtime images ship, where Debian packages
# them, so that its programs run unchanged on /run_code: the javatuples jar
# on java's classpath, lodash for node (src/serve/serve_lang_find.c finds
# them; docs/trainer-integration.md). python's requests: PY_RUNTIME below.
RUNTIME_PKGS=(libjavatuples-java node-lodash)
# python's requests and what it imports, NOT installed system-wide: a
# system certifi is imported by every python start on some machines (a
# site .pth), and a host's python should not change for a sandbox's
# sake. Their .debs are extracted into PY_RUNTIME instead, which
# /run_code's and /v1/verify's python get as PYTHONPATH (serve_lang.c).
# Under /usr: read-only to sandboxes by every language's policy snippet.
PY_RUNTIME=/usr/lib/sandguard/python3-runtime
PY_RUNTIME_PKGS=(python3-requests python3-urllib3 python3-idna python3-charset-normalizer
                 python3-chardet python3-certifi python3-six)
# Benchmarks only (make bench).
BENCH_PKGS=(bubblewrap linux-perf)

want=("${BUILD_PKGS[@]}" "${TEST_PKGS[@]}" "${RUNTIME_PKGS[@]}")
# The manifests' schema check uses npm packages (tests/stages/deploy.sh),
# and /run_code's nodejs language runs node. A machine that already has
# node/npm from elsewhere keeps its own.
command -v npm >/dev/null 2>&1 || want+=(nodejs npm)
[ "${1:-}" = "--bench" ] && want+=("${BENCH_PKGS[@]}")

missing=()
for p in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
export DEBIAN_FRONTEND=noninteractive
if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all ${#want[@]} packages present"
elif [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing ${missing[*]}; run as root: apt-get install ${missing[*]}" >&2
    exit 1
else
    echo "install-deps: installing ${missing[*]}"
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# PY_RUNTIME: "<package> <version>" of each .deb extracted there, and the
# python that compiled it (its .pyc files: a sandbox cannot write them):
# Debian's, which serve runs, whatever python3 comes first in PATH.
PY=/usr/bin/python3
py_runtime_wanted() {
    local p v
    for p in "${PY_RUNTIME_PKGS[@]}"; do
        v=$(apt-cache policy "$p" 2>/dev/null | sed -n 's/^ *Candidate: //p')
        [ -n "$v" ] && [ "$v" != "(none)" ] || return 1
        echo "$p $v"
    done
    echo "python3 $("$PY" -c 'import sys; print(sys.version.split()[0])')"
}
stamp="$PY_RUNTIME/.sandguard-versions"
wanted=$(py_runtime_wanted) || { apt-get update -qq && wanted=$(py_runtime_wanted); } || {
    echo "install-deps: apt knows no candidate for one of ${PY_RUNTIME_PKGS[*]}" >&2
    exit 1
}
if [ "$(cat "$stamp" 2>/dev/null)" = "$wanted" ]; then
    echo "install-deps: $PY_RUNTIME up to date"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: $PY_RUNTIME missing or stale; run this script as root" >&2
    exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download -qq -o APT::Sandbox::User=root $(echo "$wanted" | grep -v '^python3 ' | tr ' ' '='))
for deb in "$tmp"/*.deb; do dpkg-deb -x "$deb" "$tmp/root"; done
mkdir -p "$(dirname "$PY_RUNTIME")"
rm -rf "$PY_RUNTIME.new"
cp -a "$tmp/root/usr/lib/python3/dist-packages" "$PY_RUNTIME.new"
"$PY" -m compileall -q -d "$PY_RUNTIME" "$PY_RUNTIME.new" >/dev/null
echo "$wanted" >"$PY_RUNTIME.new/.sandguard-versions"
chown -R root:root "$PY_RUNTIME.new"
chmod -R u=rwX,go=rX "$PY_RUNTIME.new"
rm -rf "$PY_RUNTIME"
mv "$PY_RUNTIME.new" "$PY_RUNTIME"
echo "install-deps: $PY_RUNTIME has $(echo "$wanted" | tr '\n' ' ')"

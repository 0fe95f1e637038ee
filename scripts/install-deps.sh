#!/usr/bin/env bash
# Installs the Debian packages sandguard builds, tests and demos with.
# Idempotent: packages already installed are not touched, and apt-get is
# only called (after one `apt-get update`) when something is missing.
set -euo pipefail

# Build: compiler, BPF toolchain and the libraries the binary links.
BUILD_PKGS=(make gcc clang llvm bpftool pkg-config libbpf-dev libelf-dev
            zlib1g-dev libjansson-dev libmicrohttpd-dev libcmocka-dev)
# Tests: the reward programs are Python; the VM matrix boots stock kernels;
# the scrape test runs a real Prometheus; the deploy check parses YAML;
# the HTTP server's languages (tests/integration/64-serve-languages.py):
# g++ (cpp), openjdk-17-jdk-headless (java), golang-go (go), rustc (rust),
# nodejs (below; bash and python3 are there already). Those three add
# about 250 MB to download and a minute to a fresh install. strace: the
# executor's order of steps and its races (30-exec, 33-warm-prerun).
# podman, runc, debootstrap: the deploy stage builds deploy/Dockerfile and
# runs the agent and serve from it (deploy/build-image.sh; podman's default
# runtime, crun, refuses hybrid cgroup hosts, so runc).
TEST_PKGS=(python3 python3-yaml python3-numpy busybox-static qemu-system-x86 cpio
           prometheus iproute2 curl libclang-rt-14-dev g++
           openjdk-17-jdk-headless golang-go rustc strace
           podman runc debootstrap)
# The libraries SandboxFusion's runtime images ship, where Debian packages
# them, so that its programs run unchanged on /run_code: requests for
# python, the javatuples jar on java's classpath, lodash for node
# (src/serve/serve_lang_find.c finds them; docs/trainer-integration.md).
RUNTIME_PKGS=(python3-requests libjavatuples-java node-lodash)
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
if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all ${#want[@]} packages present"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing ${missing[*]}; run as root: apt-get install ${missing[*]}" >&2
    exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"

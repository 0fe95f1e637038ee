#!/usr/bin/env bash
# Builds deploy/Dockerfile with podman from Debian packages only, where no
# image registry is reachable:
#   deploy/build-image.sh [TAG]        (default localhost/sandguard:<VERSION>)
# The Dockerfile's base images (debian:12, debian:12-slim) are one root
# filesystem made by `debootstrap --variant=minbase bookworm` from the Debian
# mirror and imported under both names. The root filesystem is made once and
# kept as a tarball in $SANDGUARD_IMAGE_CACHE (default
# /var/cache/sandguard-image); it is imported only when podman's storage lacks
# the base, so that podman's layer cache (apt-get, make) stays valid between
# runs. Needs root, podman, runc and debootstrap (scripts/install-deps.sh).
# Env: DEBIAN_MIRROR (default http://deb.debian.org/debian).
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${1:-localhost/sandguard:$(cat VERSION)}
cache=${SANDGUARD_IMAGE_CACHE:-/var/cache/sandguard-image}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
base_tar=$cache/debian-bookworm-minbase.tar
# crun (podman's default runtime on Debian 12) refuses hybrid cgroup hosts;
# runc and cgroupfs work on both kinds.
podman=(podman --runtime runc --cgroup-manager cgroupfs)

die() { echo "build-image: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, rootful podman)"
for tool in podman runc debootstrap; do
    command -v "$tool" >/dev/null || die "$tool not installed: apt-get install podman runc debootstrap"
done

if ! "${podman[@]}" image exists localhost/debian:12; then
    if [ ! -s "$base_tar" ]; then
        mkdir -p "$cache"
        root=$(mktemp -d "$cache/rootfs.XXXXXX")
        trap 'rm -rf "$root"' EXIT
        echo "build-image: debootstrap bookworm from $mirror (once; kept in $base_tar)"
        debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.log" 2>&1 ||
            die "debootstrap failed: $(tail -n 3 "$root.log" | tr '\n' ' ')"
        rm -f "$root.log"
        # Point releases and security updates too, as Debian's own images have.
        printf '%s\n' "deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
            "deb ${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security} bookworm-security main" \
            >"$root/etc/apt/sources.list"
        rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
        tar -C "$root" -cf "$base_tar.tmp" . && mv "$base_tar.tmp" "$base_tar"
    fi
    "${podman[@]}" import --quiet "$base_tar" localhost/debian:12 >/dev/null ||
        die "podman import $base_tar failed"
fi
"${podman[@]}" tag localhost/debian:12 localhost/debian:12-slim

# The Dockerfile's RUN steps run as root in the build's containers; podman's
# default file and process limits exceed what this runtime may set on some
# hosts (EPERM), so ask for the usual ones.
"${podman[@]}" build --pull=never --ulimit nofile=1024:1024 --ulimit nproc=4096:4096 \
    -f deploy/Dockerfile -t "$tag" . ||
    die "podman build failed"
echo "build-image: $tag"

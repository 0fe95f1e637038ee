#!/usr/bin/env bash
# Builds the vmtest guest's initramfs: busybox-static with every applet
# linked, the payload binaries with their shared libraries, the guest init
# (scripts/vmtest/init.sh) and the payload command.
#
# Usage: mkinitrd.sh -o OUT.cpio.gz -c 'GUEST COMMAND' [-f HOST:GUEST]...
#                    [-t PATH]... [-x NAME]... BIN...
#   BIN       host binaries, installed as /bin/<basename> in the guest.
#             Dynamic ones get the libraries ldd names, plus the dynamic
#             loader, at the same paths; static ones are copied as they are.
#   -f        an extra file or directory (policy, .bpf.o, a test corpus)
#             copied to GUEST path.
#   -t        a host file or tree copied to the same path in the guest,
#             with the libraries of every ELF file in it (an interpreter
#             and its standard library: the sandbox sees the same paths).
#   -x        a file or directory name left out of every -t tree
#             (__pycache__, test suites, static libraries).
#   -c        the command init runs (busybox sh -c, cwd /tmp, PATH=/bin:...).
#
# The image does not depend on the kernel, so one is built per run and
# booted on every kernel of the matrix.
set -euo pipefail

die() { echo "mkinitrd: $*" >&2; exit 1; }

here=$(cd "$(dirname "$0")" && pwd)
out='' cmd='' files=() trees=() excludes=()
while getopts 'o:c:f:t:x:' opt; do
    case $opt in
        o) out=$OPTARG ;;
        c) cmd=$OPTARG ;;
        f) files+=("$OPTARG") ;;
        t) trees+=("$OPTARG") ;;
        x) excludes+=(--exclude="$OPTARG") ;;
        *) die "usage: mkinitrd.sh -o OUT -c CMD [-f HOST:GUEST]... [-t PATH]... [-x NAME]... BIN..." ;;
    esac
done
shift $((OPTIND - 1))
[ -n "$out" ] || die "-o OUT is required"
[ -n "$cmd" ] || die "-c CMD is required"
[ $# -gt 0 ] || die "no payload binaries given"

busybox=$(command -v busybox || true)
[ -n "$busybox" ] || die "busybox not found: apt-get install busybox-static"
ldd "$busybox" >/dev/null 2>&1 && die "$busybox is dynamically linked: apt-get install busybox-static"
command -v cpio >/dev/null || die "cpio not found: apt-get install cpio"

root=$(mktemp -d "${TMPDIR:-/tmp}/vmtest-initrd.XXXXXX")
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,dev,proc,sys,tmp,run,root,etc,vmtest}

# Copies a host file to the same path under the image root (following
# symlinks: the loader looks the library up by the name ldd printed).
copy_same_path() {
    mkdir -p "$root$(dirname "$1")"
    cp -L "$1" "$root$1"
}

# The shared libraries (and the loader) a dynamic ELF file needs, at the
# same paths; nothing for a static one or a file that is not ELF.
copy_libs() {
    local libs lib
    libs=$(ldd "$1" 2>/dev/null) || return 0
    # "libx.so.1 => /lib/.../libx.so.1 (0x...)" and "/lib64/ld-linux-x86-64.so.2 (0x...)";
    # linux-vdso has no file.
    for lib in $(printf '%s\n' "$libs" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do
        [ -e "$root$lib" ] || copy_same_path "$lib"
    done
    if printf '%s\n' "$libs" | grep -q 'not found'; then
        die "$1: $(printf '%s\n' "$libs" | grep 'not found' | head -n 1)"
    fi
}

for bin in "$@"; do
    [ -f "$bin" ] && [ -x "$bin" ] || die "payload binary '$bin' is missing or not executable"
    name=$(basename "$bin")
    [ -e "$root/bin/$name" ] && die "two payload binaries are named '$name'"
    cp -L "$bin" "$root/bin/$name"
    copy_libs "$bin"
done

for tree in "${trees[@]}"; do
    [ "${tree#/}" != "$tree" ] && [ -e "$tree" ] || die "-t wants an existing absolute path, got '$tree'"
    mkdir -p "$root$(dirname "$tree")"
    tar -C "$(dirname "$tree")" "${excludes[@]}" -chf - "$(basename "$tree")" |
        tar -C "$root$(dirname "$tree")" -xf - || die "cannot copy $tree"
    # The ELF files of such a tree: shared objects and executables (ldd
    # of anything else fails, and copy_libs skips it).
    while IFS= read -r -d '' f; do
        copy_libs "$f"
    done < <(find "$root$tree" -type f \( -name '*.so' -o -name '*.so.*' -o -perm -0100 \) -print0 |
        sed -z "s|^$root||")
done

# Every applet as a symlink, except where a payload binary has the name.
cp "$busybox" "$root/bin/busybox"
"$busybox" --list-full | while read -r applet; do
    [ -e "$root/$applet" ] || [ -L "$root/$applet" ] || ln -s /bin/busybox "$root/$applet"
done

for spec in "${files[@]}"; do
    src=${spec%%:*} dst=${spec#*:}
    [ "$src" != "$spec" ] && [ "${dst#/}" != "$dst" ] || die "-f wants HOST:/GUEST/PATH, got '$spec'"
    [ -e "$src" ] || die "extra file '$src' is missing"
    mkdir -p "$root$(dirname "$dst")"
    cp -rL "$src" "$root$dst"
done

# Tests that drop privileges need the usual names.
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' > "$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$root/etc/group"

printf '%s\n' "$cmd" > "$root/vmtest/cmd"
install -m 0755 "$here/init.sh" "$root/init"

mkdir -p "$(dirname "$out")"
(cd "$root" && find . -print0 | LC_ALL=C sort -z |
    cpio --null --create --format=newc --owner=0:0 --quiet) | gzip -1 > "$out.tmp"
mv "$out.tmp" "$out"

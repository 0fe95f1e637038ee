#!/usr/bin/env bash
# Boots one kernel with the vmtest initramfs under qemu (TCG) and a hard
# timeout, so a hung guest ends the run instead of hanging it.
#
# Usage: boot.sh VMLINUZ INITRD OUTDIR
# Writes OUTDIR/console.log (ttyS0), OUTDIR/results.log (ttyS1, see init.sh)
# and OUTDIR/status, one line: "<how> <qemu exit status> <wall seconds>",
# where <how> is "exited" or "timeout".
#
# Environment: VMTEST_TIMEOUT (seconds, default 480), VMTEST_MEM (MiB,
# default 1024), VMTEST_SMP (default 2), VMTEST_CPU (default max,-cx16),
# VMTEST_APPEND (extra kernel args).
set -euo pipefail

die() { echo "boot: $*" >&2; exit 1; }

[ $# -eq 3 ] || die "usage: boot.sh VMLINUZ INITRD OUTDIR"
vmlinuz=$1 initrd=$2 outdir=$3
timeout_s=${VMTEST_TIMEOUT:-480}
case $timeout_s in ''|*[!0-9]*) die "VMTEST_TIMEOUT must be whole seconds, got '$timeout_s'" ;; esac
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 not found: apt-get install qemu-system-x86"
[ -r "$vmlinuz" ] || die "no kernel at $vmlinuz"
[ -r "$initrd" ] || die "no initramfs at $initrd"

mkdir -p "$outdir"
rm -f "$outdir/console.log" "$outdir/results.log" "$outdir/status"

# TCG only: -enable-kvm hangs in the nested VM CI runs on. No NIC (the
# guest uses loopback); -no-reboot with panic=-1 turns a panic into an exit.
# -cx16: Debian 12's qemu 7.2 appears to mis-emulate CMPXCHG16B under TCG,
# which 6.12's SLUB fast path uses: with plain "max", 6.12 oopsed at boot in
# about one boot in five here (double faults right after that instruction in
# __kmalloc, with a garbage EFLAGS; any model, -smp 1 or 2); without CX16 it
# booted 80 times out of 80. Nothing sandguard tests depends on CX16.
start=$(date +%s.%N)
set +e
timeout --kill-after=10 "$timeout_s" \
    qemu-system-x86_64 -accel tcg,thread=single -cpu "${VMTEST_CPU:-max,-cx16}" \
        -m "${VMTEST_MEM:-1024}" -smp "${VMTEST_SMP:-2}" \
        -nographic -monitor none -nic none -no-reboot \
        -serial "file:$outdir/console.log" -serial "file:$outdir/results.log" \
        -kernel "$vmlinuz" -initrd "$initrd" \
        -append "console=ttyS0 quiet loglevel=5 softlockup_all_cpu_backtrace=1 panic=-1 lsm=landlock,lockdown,yama,bpf vmtest_watchdog=$((timeout_s * 9 / 10)) ${VMTEST_APPEND:-}" \
        </dev/null >"$outdir/qemu.log" 2>&1
rc=$?
set -e
end=$(date +%s.%N)

how=exited
if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then how=timeout; fi
awk -v how="$how" -v rc="$rc" -v s="$start" -v e="$end" \
    'BEGIN { printf "%s %d %.1f\n", how, rc, e - s }' > "$outdir/status"

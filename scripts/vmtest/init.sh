#!/bin/sh
# PID 1 of the vmtest guest (busybox sh). Mounts what the agent needs, runs
# the payload command from /vmtest/cmd and powers the VM off.
#
# Two serial ports: ttyS0 is the console (kernel messages, payload stderr),
# ttyS1 carries only the payload's stdout and these markers, so kernel
# messages can never split a result line:
#   VMTEST-BOOTED: <uname -r> <seconds since boot>
#   VMTEST-EXIT: <payload exit status>
#   VMTEST-DONE                      (the sentinel: the run completed)
# A mount that fails is reported as "FAIL: guest-mount: ..." on ttyS1.
export PATH=/bin:/sbin:/usr/bin:/usr/sbin HOME=/root

# A sandbox's root is made with pivot_root, which cannot leave the
# initramfs (rootfs: EINVAL), while a node's root is always a real mount.
# So the first thing: copy the image to a tmpfs and make that the root.
if [ ! -e /.vmtest-root ]; then
    mkdir -p /newroot
    if mount -t tmpfs -o mode=0755 tmpfs /newroot; then
        for e in /*; do
            case $e in /newroot|/proc|/sys|/dev) continue ;; esac
            cp -a "$e" /newroot/
        done
        mkdir -p /newroot/proc /newroot/sys /newroot/dev
        touch /newroot/.vmtest-root
        exec switch_root /newroot /init
    fi
    echo "vmtest-init: cannot mount a tmpfs root; sandboxes will fail to build theirs" >&2
fi

mount -t devtmpfs devtmpfs /dev 2>/dev/null
exec </dev/console >/dev/console 2>&1
results=/dev/ttyS1

failed_mounts=
try_mount() {  # type target [options]
    mkdir -p "$2"
    if ! mount -t "$1" ${3:+-o "$3"} "$1" "$2"; then
        failed_mounts="$failed_mounts $1:$2"
    fi
}
try_mount proc /proc
try_mount sysfs /sys
try_mount securityfs /sys/kernel/security
try_mount bpf /sys/fs/bpf
try_mount cgroup2 /sys/fs/cgroup
# As systemd does on a node: the root offers its controllers to its
# children, so that sandboxes get their limits from cgroups (not rlimits).
for c in cpu memory pids io; do
    grep -qw "$c" /sys/fs/cgroup/cgroup.controllers 2>/dev/null &&
        echo "+$c" > /sys/fs/cgroup/cgroup.subtree_control
done
# libbpf reads tracepoint ids from tracefs.
try_mount tracefs /sys/kernel/tracing
try_mount debugfs /sys/kernel/debug
try_mount tmpfs /tmp mode=1777
try_mount tmpfs /run mode=0755
try_mount tmpfs /dev/shm mode=1777
try_mount devpts /dev/pts
# No NIC: loopback is the guest's only network.
ip link set lo up

# A payload that hangs is killed by the host's timeout, and all the host
# keeps is the console. So before that timeout (vmtest_watchdog=SECONDS on
# the kernel command line, from boot.sh) the guest says what is stuck: a
# FAIL line on the results channel naming each process with its state and
# where it waits in the kernel, and every task's kernel stack on the
# console (sysrq t), to read in console.log.
watchdog() {
    after=$(sed -n 's/.*vmtest_watchdog=\([0-9]*\).*/\1/p' /proc/cmdline)
    [ -n "$after" ] || return 0
    sleep "$after"
    stuck=
    for d in /proc/[0-9]*; do
        pid=${d#/proc/}
        [ "$pid" = $$ ] && continue
        cmd=$(tr '\0' ' ' < "$d/cmdline" 2>/dev/null | cut -c1-80)
        [ -n "$cmd" ] || continue # a kernel thread
        state=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "$d/status" 2>/dev/null)
        # (wchan reads 0 on these kernels: the stack's top says where.)
        where=$(sed -n '1s/^[^]]*] \([^+]*\).*/\1/p' "$d/stack" 2>/dev/null)
        stuck="$stuck [$pid $state ${where:-?}: $cmd]"
        echo "vmtest-watchdog: $pid $state ${where:-?}: $cmd" >&2
        cat "$d/stack" >&2 2>/dev/null
    done
    echo 8 > /proc/sys/kernel/printk # past "quiet": the dump reaches the console
    echo t > /proc/sysrq-trigger 2>/dev/null
    echo "FAIL: watchdog: the payload still runs after $after s; processes:$stuck" > "$results"
}

if [ ! -c "$results" ]; then
    echo "vmtest-init: no $results: results cannot reach the host"
else
    # Raw: no \n -> \r\n translation on the results channel.
    stty -F "$results" raw -echo 2>/dev/null
    cd /tmp || cd /
    watchdog &
    {
        echo "VMTEST-BOOTED: $(uname -r) $(cut -d' ' -f1 /proc/uptime)"
        for m in $failed_mounts; do
            echo "FAIL: guest-mount: mount -t ${m%%:*} on ${m#*:} failed"
        done
        sh -c "$(cat /vmtest/cmd)" 2>/dev/console
        echo "VMTEST-EXIT: $?"
        echo "VMTEST-DONE"
    } | tee "$results"
    # tee's last close of the tty waits until the UART has sent everything.
fi

poweroff -f
echo o > /proc/sysrq-trigger
sleep 3600

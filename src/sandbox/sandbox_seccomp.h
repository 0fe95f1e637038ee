/* The sandbox's seccomp filter. Denied calls fail with EPERM rather than
 * killing the caller, so that a tenant probing the sandbox shows up as its
 * own error, never as a crash the platform has to explain:
 *   io_uring_*, ptrace, bpf, perf_event_open, the mount API, unshare,
 *   setns, the key syscalls, kexec_*, process_vm_readv/writev,
 *   open_by_handle_at, userfaultfd, module loading, swap, reboot,
 *   inotify_init*, fanotify_init (a watch on a file sandboxes share
 *   read-only would see other tenants' opens), ...;
 *   clone() with any namespace flag, and clone() of a process (not a
 *   thread) sharing the fd table (CLONE_FILES without CLONE_THREAD): EPERM;
 *   clone3() (ENOSYS, whose flags hide behind a pointer: libc falls back
 *   to clone());
 *   memfd_create() without MFD_NOEXEC_SEAL (EPERM): no executable memfds;
 *   socket(): AF_INET/AF_INET6 only as TCP (SOCK_STREAM, protocol 0 or
 *   IPPROTO_TCP; not MPTCP), plus UDP (SOCK_DGRAM, 0 or IPPROTO_UDP) when
 *   the egress allowlist has a UDP or any-protocol entry; AF_UNIX only when
 *   the policy allows unix sockets; every other family (AF_NETLINK,
 *   AF_PACKET, ...) EPERM. socketpair() stays allowed (multiprocessing):
 *   in the sandbox's mount and network namespaces, no pathname or abstract
 *   unix name of the host is reachable from it;
 *   listen() (EPERM) unless the policy allows listeners;
 *   TCP Fast Open: sendto/sendmsg/sendmmsg with MSG_FASTOPEN, and
 *   setsockopt(IPPROTO_TCP, TCP_FASTOPEN_CONNECT or TCP_FASTOPEN) (EPERM);
 *   prlimit64, sched_setaffinity, sched_setscheduler, sched_setparam,
 *   sched_setattr, setpriority (PRIO_PROCESS) and ioprio_set
 *   (IOPRIO_WHO_PROCESS) on any process but the caller (pid 0): EPERM.
 * Syscalls of another ABI (i386 on x86_64, arm32 on arm64) get ENOSYS: they
 * would bypass a table written in native numbers. x32 calls get EPERM. */
#ifndef SG_SANDBOX_SECCOMP_H
#define SG_SANDBOX_SECCOMP_H
#include <linux/filter.h>
#include <stdbool.h>

#define SB_SECCOMP_MAX_INSNS 192 /* the filter is ~120: room for more calls */

struct sb_seccomp {
	struct sock_filter insns[SB_SECCOMP_MAX_INSNS];
	struct sock_fprog prog;
};

/* What the policy opens up in the filter. */
struct sb_seccomp_rules {
	bool allow_unix;   /* socket(AF_UNIX, ...) */
	bool allow_udp;    /* socket(AF_INET{,6}, SOCK_DGRAM, 0|IPPROTO_UDP) */
	bool allow_listen; /* listen() ... */
	bool own_netns;    /* ... only in a network namespace of the sandbox's own */
};

/* Build the filter (in the parent). 0, or -EOPNOTSUPP on an architecture
 * this filter does not know. */
int seccomp_filter_build(struct sb_seccomp *f, const struct sb_seccomp_rules *rules);

/* Child side, after PR_SET_NO_NEW_PRIVS. Async-signal-safe; 0 or -errno. */
int seccomp_filter_install(const struct sb_seccomp *f);

#endif

/* The sandbox's seccomp filter (see src/sandbox/sandbox_seccomp.h). */
#include <errno.h>
#include <linux/audit.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "sandbox_seccomp.h"
#include "lib/array_len.h"

#if defined(__x86_64__)
#define NATIVE_ARCH     AUDIT_ARCH_X86_64
#define X32_SYSCALL_BIT 0x40000000
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#endif

/* Denied with EPERM. Each is guarded: not every architecture has every
 * call (and old headers lack new ones). */
static const int denied[] = {
#ifdef __NR_io_uring_setup
	__NR_io_uring_setup,
	__NR_io_uring_enter,
	__NR_io_uring_register,
#endif
	__NR_ptrace,
	__NR_bpf,
	__NR_perf_event_open,
	__NR_mount,
	__NR_umount2,
	__NR_pivot_root,
	__NR_chroot,
#ifdef __NR_fsopen
	__NR_fsopen,
	__NR_fsconfig,
	__NR_fsmount,
	__NR_fspick,
	__NR_move_mount,
	__NR_open_tree,
#endif
#ifdef __NR_mount_setattr
	__NR_mount_setattr,
#endif
	__NR_unshare,
	__NR_setns,
	__NR_keyctl,
	__NR_add_key,
	__NR_request_key,
	__NR_kexec_load,
#ifdef __NR_kexec_file_load
	__NR_kexec_file_load,
#endif
	__NR_process_vm_readv,
	__NR_process_vm_writev,
	__NR_open_by_handle_at,
	__NR_name_to_handle_at,
	__NR_userfaultfd,
#ifdef __NR_pidfd_getfd
	__NR_pidfd_getfd,
#endif
	__NR_init_module,
	__NR_finit_module,
	__NR_delete_module,
	__NR_swapon,
	__NR_swapoff,
	__NR_reboot,
	__NR_acct,
	__NR_quotactl,
	__NR_syslog,
	__NR_vhangup,
#ifdef __NR_uselib
	__NR_uselib,
#endif
#ifdef __NR_iopl
	__NR_iopl,
	__NR_ioperm,
#endif
	/* A watch on a file that sandboxes share read-only (/usr, the
	 * programs) reports every other sandbox's opens and reads of it, with
	 * names and timing: a channel across tenants. No reward needs one. */
	__NR_inotify_init1,
	__NR_fanotify_init,
#ifdef __NR_inotify_init
	__NR_inotify_init,
#endif
};

/* clone() flags that would create a namespace (CLONE_NEWTIME is only
 * accepted by clone3 and unshare, both covered). */
#define CLONE_NS_FLAGS                                                                 \
	(CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | \
	 CLONE_NEWPID | CLONE_NEWNET)

/* Calls that change another process's limits or scheduling, which the
 * kernel allows for any process of the caller's uid: Landlock's scopes do
 * not cover them (it scopes signals and ptrace, not these). A warm call
 * shares its uid and process group with its forkserver parent, and every
 * later call's child inherits what was set on the parent
 * (docs/warm-interpreters.md, "Threat model of the warm parent"). Only on the caller itself (pid 0). */
static const int self_only[] = {
	__NR_prlimit64,     __NR_sched_setaffinity, __NR_sched_setscheduler, __NR_sched_setparam,
#ifdef __NR_sched_setattr
	__NR_sched_setattr,
#endif
};

#define IOPRIO_WHO_PROCESS 1 /* linux/ioprio.h, not in every libc's headers */

#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U /* linux 6.3 */
#endif

enum label {
	L_NEXT,
	L_ALLOW,
	L_EPERM,
	L_ENOSYS,
	L_SOCKET,
	L_INET,
	L_INET_STREAM,
	L_INET_DGRAM,
	L_MEMFD,
	L_SEND_FLAGS2, /* sendmsg: flags in args[2] */
	L_SEND_FLAGS3, /* sendto, sendmmsg: flags in args[3] */
	L_SETSOCKOPT,
	L_SELF0,  /* args[0] (a pid) must be 0: the caller itself */
	L_SELF1,  /* args[1] (a pid) must be 0 */
	L_PRIO,   /* setpriority: PRIO_PROCESS, then L_SELF1 */
	L_IOPRIO, /* ioprio_set: IOPRIO_WHO_PROCESS, then L_SELF1 */
	L_CLONE,  /* clone: its flags */
	L__COUNT  /* then the search tree's own labels (new_label()) */
};

#define MAX_LABELS (L__COUNT + 64)
#define TREE_LEAF  4 /* numbers compared one by one at a leaf of the tree */

struct builder {
	struct sb_seccomp *f;
	unsigned n;
	uint8_t jt[SB_SECCOMP_MAX_INSNS], jf[SB_SECCOMP_MAX_INSNS]; /* labels */
	int at[MAX_LABELS];
	int n_labels;
	int err;
};

/* A syscall number the filter looks at further, and where it goes. */
struct dispatch {
	uint32_t nr;
	uint8_t to; /* a label */
};

static void emit(struct builder *b, uint16_t code, uint32_t k, int jt, int jf)
{
	if (b->n >= SB_SECCOMP_MAX_INSNS) {
		b->err = -E2BIG;
		return;
	}
	b->f->insns[b->n] = (struct sock_filter){ .code = code, .k = k };
	b->jt[b->n] = jt;
	b->jf[b->n] = jf;
	b->n++;
}

static void place(struct builder *b, int l)
{
	b->at[l] = (int)b->n;
}

static int new_label(struct builder *b)
{
	if (b->n_labels >= MAX_LABELS) {
		b->err = -E2BIG;
		return L_ALLOW;
	}
	return b->n_labels++;
}

static int by_nr(const void *a, const void *b)
{
	const struct dispatch *x = a, *y = b;

	return x->nr < y->nr ? -1 : x->nr > y->nr;
}

/* The numbers d[0..n) (sorted) as a balanced search tree: any syscall
 * takes a handful of comparisons, where a chain of one JEQ after another
 * took up to ~70 instructions. That length is paid at every install: the
 * kernel runs a new filter once for each syscall number, to cache the
 * calls it always allows (seccomp_cache_prepare()): with the chain,
 * installing the filter cost 0.2-0.24 ms over a bare fork, with the tree
 * 0.13-0.14 (docs/performance.md, section 6; tests/unit/
 * test_sandbox_seccomp.c bounds the longest path). Numbers found nowhere
 * are allowed. */
static void emit_tree(struct builder *b, const struct dispatch *d, size_t n)
{
	size_t mid = n / 2;
	int right;

	if (n <= TREE_LEAF) {
		for (size_t i = 0; i < n; i++)
			emit(b, BPF_JMP | BPF_JEQ | BPF_K, d[i].nr, d[i].to,
			     i + 1 < n ? L_NEXT : L_ALLOW);
		return;
	}
	right = new_label(b);
	emit(b, BPF_JMP | BPF_JGE | BPF_K, d[mid].nr, right, L_NEXT);
	emit_tree(b, d, mid);
	place(b, right);
	emit_tree(b, d + mid, n - mid);
}

/* Every number that is not simply allowed, sorted; -EINVAL for a number
 * listed twice with two fates (a mistake in the lists). */
static int dispatch_table(const struct sb_seccomp_rules *rules, struct dispatch *d, size_t cap,
			  size_t *n)
{
	size_t k = 0;

#define ADD(x, label)                                                                \
	do {                                                                         \
		if (k < cap)                                                         \
			d[k] = (struct dispatch){ (uint32_t)(x), (uint8_t)(label) }; \
		k++;                                                                 \
	} while (0)
	for (size_t i = 0; i < ARRAY_LEN(denied); i++)
		ADD(denied[i], L_EPERM);
#ifdef __NR_clone3
	ADD(__NR_clone3, L_ENOSYS);
#endif
	ADD(__NR_socket, L_SOCKET);
	/* listen() without bind() takes an ephemeral port nobody granted;
	 * a listener is no business of a reward unless the policy says so,
	 * and never in the host's port space: only where the sandbox has a
	 * network namespace of its own, which nothing outside reaches. */
	if (!rules->allow_listen || !rules->own_netns)
		ADD(__NR_listen, L_EPERM);
	/* TCP Fast Open connects inside a send, where connect rules do not
	 * look: no MSG_FASTOPEN, no TCP_FASTOPEN(_CONNECT). */
	ADD(__NR_sendmsg, L_SEND_FLAGS2);
	ADD(__NR_sendto, L_SEND_FLAGS3);
	ADD(__NR_sendmmsg, L_SEND_FLAGS3);
	ADD(__NR_setsockopt, L_SETSOCKOPT);
#ifdef __NR_memfd_create
	ADD(__NR_memfd_create, L_MEMFD);
#endif
	for (size_t i = 0; i < ARRAY_LEN(self_only); i++)
		ADD(self_only[i], L_SELF0);
	ADD(__NR_setpriority, L_PRIO);
	ADD(__NR_ioprio_set, L_IOPRIO);
	ADD(__NR_clone, L_CLONE);
#undef ADD
	if (k > cap)
		return -E2BIG;
	qsort(d, k, sizeof(*d), by_nr);
	*n = 0;
	for (size_t i = 0; i < k; i++) {
		if (*n && d[*n - 1].nr == d[i].nr) {
			if (d[*n - 1].to != d[i].to)
				return -EINVAL;
			continue;
		}
		d[(*n)++] = d[i];
	}
	return 0;
}

/* Turn label references into the relative offsets BPF jumps take. */
static void resolve(struct builder *b)
{
	for (unsigned i = 0; i < b->n; i++) {
		struct sock_filter *in = &b->f->insns[i];
		int jt = b->jt[i] == L_NEXT ? 0 : b->at[b->jt[i]] - (int)(i + 1);
		int jf = b->jf[i] == L_NEXT ? 0 : b->at[b->jf[i]] - (int)(i + 1);

		if (BPF_CLASS(in->code) != BPF_JMP)
			continue;
		if (jt < 0 || jt > 255 || jf < 0 || jf > 255) {
			b->err = -ERANGE;
			return;
		}
		in->jt = (uint8_t)jt;
		in->jf = (uint8_t)jf;
	}
}

int seccomp_filter_build(struct sb_seccomp *f, const struct sb_seccomp_rules *rules)
{
#ifndef NATIVE_ARCH
	memset(f, 0, sizeof(*f));
	return -EOPNOTSUPP;
#else
	struct builder b = { .f = f, .n_labels = L__COUNT };
	struct dispatch table[SB_SECCOMP_MAX_INSNS];
	size_t n_table = 0;
	/* The low 32 bits of args[0..3]: clone's flags, socket()'s,
	 * memfd_create's, setsockopt's and the send calls' int arguments, the
	 * pids of the self-only calls. */
	uint32_t arg_lo[4];

	for (int i = 0; i < 4; i++) {
		arg_lo[i] = (uint32_t)(offsetof(struct seccomp_data, args) + 8 * i);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
		arg_lo[i] += 4;
#endif
	}
	memset(f, 0, sizeof(*f));
	b.err = dispatch_table(rules, table, ARRAY_LEN(table), &n_table);
	emit(&b, BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch), 0, 0);
	/* Another ABI's numbers (i386's int 0x80 on x86_64) would dodge a
	 * table written in native numbers: that whole ABI is "not here". */
	emit(&b, BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, L_NEXT, L_ENOSYS);
	emit(&b, BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr), 0, 0);
#ifdef X32_SYSCALL_BIT
	emit(&b, BPF_JMP | BPF_JGE | BPF_K, X32_SYSCALL_BIT, L_EPERM, L_NEXT);
#endif
	if (!b.err)
		emit_tree(&b, table, n_table);
	place(&b, L_CLONE);
	emit(&b, BPF_LD | BPF_W | BPF_ABS, arg_lo[0], 0, 0);
	emit(&b, BPF_JMP | BPF_JSET | BPF_K, CLONE_NS_FLAGS, L_EPERM, L_NEXT);
	/* A process (not a thread) sharing the fd table outlives a SIGKILL
	 * of the task that opened a file and keeps the fd. */
	emit(&b, BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, L_ALLOW, L_NEXT);
	emit(&b, BPF_JMP | BPF_JSET | BPF_K, CLONE_FILES, L_EPERM, L_ALLOW);

	/* socket(domain, type, protocol): the int arguments, low words. */
	place(&b, L_SOCKET);
	emit(&b, BPF_LD | BPF_W | BPF_ABS, arg_lo[0], 0, 0);
	emit(&b, BPF_JMP | BPF_JEQ | BPF_K, AF_INET, L_INET, L_NEXT);
	emit(&b, BPF_JMP | BPF_JEQ | BPF_K, AF_INET6, L_INET, L_NEXT);
	emit(&b, BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, rules->allow_unix ? L_ALLOW : L_EPERM,
	     L_EPERM);
	place(&b, L_INET);
	emit(&b, BPF_LD | BPF_W | BPF_ABS, arg_lo[1], 0, 0);
	emit(&b, BPF_ALU | BPF_AND | BPF_K, ~(uint32_t)(SOCK_NONBLOCK | SOCK_CLOEXEC), 0, 0);
	emit(&b, BPF_JMP | BPF_JEQ | BPF_K, SOCK_STREAM, L_INET_STREAM, L_NEXT);
	emit(&b, BPF_JMP | BPF_JEQ | BPF_K, SOCK_DGRAM, rules->allow_udp ? L_INET_DGRAM : L_EPERM,
	     L_EPERM);
	/* TCP only: MPTCP (262) is a stream protocol Landlock's TCP rules
	 * do not cover, SCTP and raw sockets are no business of a reward. */
	place(&b, L_INET_STREAM);
	emit(&b, BPF_LD | BPF_W | BPF_ABS, arg_lo[2], 0, 0);
	emit(&b, BPF_JMP | BPF_JEQ | BPF_K, 0, L_ALLOW, L_NEXT);
	emit(&b, BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_TCP, L_ALLOW, L_EPERM);
	place(&b, L_INET_DGRAM);
	emit(&b, BPF_LD | BPF_W | BPF_ABS, arg_lo[2], 0, 0);
	emit(&b, BPF_JMP | BPF_JEQ | BPF_K, 0, L_ALLOW, L_NEXT);
	emit(&b, BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_UDP, L_ALLOW, L_EPERM);
	place(&b, L_SEND_FLAGS2);
	emit(&b, BPF_LD | BPF_W | BPF_ABS, arg_lo[2], 0, 0);
	emit(&b, BPF_JMP | BPF_JSET | BPF_K, MSG_FASTOPEN, L_EPERM, L_ALLOW);
	place(&b, L_SEND_FLAGS3);
	emit(&b, BPF_LD | BPF_W | BPF_ABS, arg_lo[3], 0, 0);
	emit(&b, BPF_JMP | BPF_JSET | BPF_K, MSG_FASTOPEN, L_EPERM, L_ALLOW);
	place(&b, L_SETSOCKOPT);
	emit(&b, BPF_LD | BPF_W | BPF_ABS, arg_lo[1], 0, 0);
	emit(&b, BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_TCP, L_NEXT, L_ALLOW);
	emit(&b, BPF_LD | BPF_W | BPF_ABS, arg_lo[2], 0, 0);
	emit(&b, BPF_JMP | BPF_JEQ | BPF_K, TCP_FASTOPEN_CONNECT, L_EPERM, L_NEXT);
	emit(&b, BPF_JMP | BPF_JEQ | BPF_K, TCP_FASTOPEN, L_EPERM, L_ALLOW);
	/* The pid arguments: the low words, as the kernel reads a pid_t. */
	place(&b, L_SELF0);
	emit(&b, BPF_LD | BPF_W | BPF_ABS, arg_lo[0], 0, 0);
	emit(&b, BPF_JMP | BPF_JEQ | BPF_K, 0, L_ALLOW, L_EPERM);
	/* setpriority(PRIO_PGRP or PRIO_USER, 0) would reach the parent too. */
	place(&b, L_PRIO);
	emit(&b, BPF_LD | BPF_W | BPF_ABS, arg_lo[0], 0, 0);
	emit(&b, BPF_JMP | BPF_JEQ | BPF_K, PRIO_PROCESS, L_SELF1, L_EPERM);
	place(&b, L_IOPRIO);
	emit(&b, BPF_LD | BPF_W | BPF_ABS, arg_lo[0], 0, 0);
	emit(&b, BPF_JMP | BPF_JEQ | BPF_K, IOPRIO_WHO_PROCESS, L_SELF1, L_EPERM);
	place(&b, L_SELF1);
	emit(&b, BPF_LD | BPF_W | BPF_ABS, arg_lo[1], 0, 0);
	emit(&b, BPF_JMP | BPF_JEQ | BPF_K, 0, L_ALLOW, L_EPERM);
#ifdef __NR_memfd_create
	/* An executable memfd runs code that never was in the scratch
	 * (execveat, /proc/self/fd/N); a sealed non-executable one is a
	 * plain buffer. MFD_NOEXEC_SEAL exists since linux 6.3: on older
	 * kernels every memfd_create fails, which libraries survive. */
	place(&b, L_MEMFD);
	emit(&b, BPF_LD | BPF_W | BPF_ABS, arg_lo[1], 0, 0);
	emit(&b, BPF_JMP | BPF_JSET | BPF_K, MFD_NOEXEC_SEAL, L_ALLOW, L_EPERM);
#endif
	place(&b, L_ALLOW);
	emit(&b, BPF_RET | BPF_K, SECCOMP_RET_ALLOW, 0, 0);
	place(&b, L_EPERM);
	emit(&b, BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA), 0, 0);
	place(&b, L_ENOSYS);
	emit(&b, BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA), 0, 0);
	if (!b.err)
		resolve(&b);
	if (b.err)
		return b.err;
	f->prog.len = (unsigned short)b.n;
	f->prog.filter = f->insns;
	return 0;
#endif
}

int seccomp_filter_install(const struct sb_seccomp *f)
{
	if (syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &f->prog))
		return -errno;
	return 0;
}

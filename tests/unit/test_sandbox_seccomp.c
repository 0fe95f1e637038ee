/* The sandbox's seccomp filter, without root: run through a small
 * classic-BPF interpreter on synthetic seccomp_data, so that each
 * syscall's verdict is checked without installing the filter. Kept apart
 * from test_sandbox.c (scratch, fetch, the root's plan), which needs a
 * file tree and, for some tests, root. */
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <limits.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include "policy/policy.h"
#include "sandbox/sandbox.h"
#include "sandbox/sandbox_landlock.h"
#include "sandbox/sandbox_root.h"
#include "sandbox/sandbox_scratch.h"
#include "sandbox/sandbox_seccomp.h"

/* ---- seccomp --------------------------------------------------------------- */

static unsigned last_steps; /* instructions the last run_filter() ran */

/* Run the filter on one syscall: the subset of classic BPF it uses. */
static uint32_t run_filter(const struct sb_seccomp *f, const struct seccomp_data *d)
{
	uint32_t a = 0;

	last_steps = 0;
	for (unsigned pc = 0; pc < f->prog.len; pc++) {
		const struct sock_filter *in = &f->prog.filter[pc];

		last_steps++;

		switch (in->code) {
		case BPF_LD | BPF_W | BPF_ABS:
			assert_true(in->k + 4 <= sizeof(*d));
			memcpy(&a, (const char *)d + in->k, 4);
			break;
		case BPF_JMP | BPF_JEQ | BPF_K:
			pc += a == in->k ? in->jt : in->jf;
			break;
		case BPF_JMP | BPF_JGE | BPF_K:
			pc += a >= in->k ? in->jt : in->jf;
			break;
		case BPF_JMP | BPF_JSET | BPF_K:
			pc += (a & in->k) ? in->jt : in->jf;
			break;
		case BPF_ALU | BPF_AND | BPF_K:
			a &= in->k;
			break;
		case BPF_RET | BPF_K:
			return in->k;
		default:
			fail_msg("unexpected BPF opcode 0x%x at %u", in->code, pc);
		}
	}
	fail_msg("the filter ran off its end");
	return 0;
}

static uint32_t verdict4(const struct sb_seccomp *f, uint32_t arch, int nr, uint64_t arg0,
			 uint64_t arg1, uint64_t arg2, uint64_t arg3)
{
	struct seccomp_data d = { .nr = nr, .arch = arch, .args = { arg0, arg1, arg2, arg3 } };

	return run_filter(f, &d);
}

static uint32_t verdict3(const struct sb_seccomp *f, uint32_t arch, int nr, uint64_t arg0,
			 uint64_t arg1, uint64_t arg2)
{
	return verdict4(f, arch, nr, arg0, arg1, arg2, 0);
}

static uint32_t verdict(const struct sb_seccomp *f, uint32_t arch, int nr, uint64_t arg0)
{
	return verdict3(f, arch, nr, arg0, 0, 0);
}

#if defined(__x86_64__)
#define NATIVE  AUDIT_ARCH_X86_64
#define FOREIGN AUDIT_ARCH_I386
#elif defined(__aarch64__)
#define NATIVE  AUDIT_ARCH_AARCH64
#define FOREIGN AUDIT_ARCH_ARM
#endif

static void test_seccomp_filter(void **state)
{
#ifndef NATIVE
	skip();
#else
	static const int denied[] = {
		__NR_io_uring_setup,
		__NR_io_uring_enter,
		__NR_io_uring_register,
		__NR_ptrace,
		__NR_bpf,
		__NR_perf_event_open,
		__NR_mount,
		__NR_umount2,
		__NR_unshare,
		__NR_setns,
		__NR_keyctl,
		__NR_add_key,
		__NR_request_key,
		__NR_kexec_load,
		__NR_kexec_file_load,
		__NR_process_vm_readv,
		__NR_process_vm_writev,
		__NR_open_by_handle_at,
		__NR_userfaultfd,
	};
	static const int allowed[] = {
		__NR_read, __NR_write,     __NR_openat, __NR_execve,     __NR_exit_group,
		__NR_mmap, __NR_getrandom, __NR_wait4,  __NR_socketpair,
	};
	const uint32_t eperm = SECCOMP_RET_ERRNO | EPERM;
	const struct sb_seccomp_rules rules = { 0 };
	struct sb_seccomp f;

	assert_int_equal(seccomp_filter_build(&f, &rules), 0);
	assert_ptr_equal(f.prog.filter, f.insns);
	for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++)
		assert_int_equal(verdict(&f, NATIVE, denied[i], 0), eperm);
	for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
		assert_int_equal(verdict(&f, NATIVE, allowed[i], 0), SECCOMP_RET_ALLOW);
	/* fork()/pthread_create() stay possible; namespaces do not. */
	assert_int_equal(verdict(&f, NATIVE, __NR_clone, SIGCHLD), SECCOMP_RET_ALLOW);
	assert_int_equal(verdict(&f, NATIVE, __NR_clone, CLONE_VM | CLONE_THREAD | CLONE_SIGHAND),
			 SECCOMP_RET_ALLOW);
	assert_int_equal(verdict(&f, NATIVE, __NR_clone, SIGCHLD | CLONE_NEWUSER), eperm);
	assert_int_equal(verdict(&f, NATIVE, __NR_clone, CLONE_NEWNET), eperm);
	assert_int_equal(verdict(&f, NATIVE, __NR_clone, CLONE_NEWNS), eperm);
	/* A process sharing the fd table would outlive a kill of its twin. */
	assert_int_equal(verdict(&f, NATIVE, __NR_clone, CLONE_FILES | SIGCHLD), eperm);
	assert_int_equal(verdict(&f, NATIVE, __NR_clone,
				 CLONE_VM | CLONE_FILES | CLONE_THREAD | CLONE_SIGHAND),
			 SECCOMP_RET_ALLOW);
	assert_int_equal(verdict(&f, NATIVE, __NR_clone, CLONE_VM | CLONE_VFORK | SIGCHLD),
			 SECCOMP_RET_ALLOW);
	/* clone3 hides its flags behind a pointer: ENOSYS sends libc to clone. */
	assert_int_equal(verdict(&f, NATIVE, __NR_clone3, 0), SECCOMP_RET_ERRNO | ENOSYS);
	/* Another ABI's numbers would dodge the table. */
	assert_int_equal(verdict(&f, FOREIGN, __NR_read, 0), SECCOMP_RET_ERRNO | ENOSYS);
	/* No executable memfd. */
	assert_int_equal(verdict3(&f, NATIVE, __NR_memfd_create, 0, 0, 0), eperm);
	assert_int_equal(verdict3(&f, NATIVE, __NR_memfd_create, 0, 1 /* CLOEXEC */, 0), eperm);
	assert_int_equal(verdict3(&f, NATIVE, __NR_memfd_create, 0, 0x8 | 1, 0), SECCOMP_RET_ALLOW);
#ifdef __x86_64__
	assert_int_equal(verdict(&f, NATIVE, 0x40000000 | __NR_read, 0), eperm);
#endif
#endif
}

/* Every syscall number, native and not, gets a verdict in a few steps:
 * the kernel runs a new filter for each number when it is installed (to
 * cache the calls it always allows), so a long path is paid ~450 times at
 * every sandbox's start. The numbers are looked up in a search tree; one
 * JEQ after another took ~85 steps for an allowed call. */
static void test_seccomp_every_number_short(void **state)
{
#ifndef NATIVE
	skip();
#else
	static const uint64_t args[][4] = {
		{ 0, 0, 0, 0 },
		{ AF_INET, SOCK_STREAM, IPPROTO_TCP, 0 },
		{ AF_UNIX, SOCK_DGRAM, 0, 0 },
		{ SIGCHLD, IPPROTO_TCP, 0, 0 },
	};
	const struct sb_seccomp_rules rules[] = { { 0 }, { true, true, true, true } };
	unsigned longest = 0, worst = 0, eperm = 0;

	for (size_t r = 0; r < sizeof(rules) / sizeof(rules[0]); r++) {
		struct sb_seccomp f;

		assert_int_equal(seccomp_filter_build(&f, &rules[r]), 0);
		for (int nr = 0; nr < 1024; nr++)
			for (size_t a = 0; a < sizeof(args) / sizeof(args[0]); a++) {
				uint32_t v = verdict4(&f, NATIVE, nr, args[a][0], args[a][1],
						      args[a][2], args[a][3]);

				assert_true(v == SECCOMP_RET_ALLOW ||
					    v == (SECCOMP_RET_ERRNO | EPERM) ||
					    v == (SECCOMP_RET_ERRNO | ENOSYS));
				eperm += r == 0 && a == 0 && v == (SECCOMP_RET_ERRNO | EPERM);
				if (last_steps > longest) {
					longest = last_steps;
					worst = (unsigned)nr;
				}
			}
		assert_int_equal(verdict(&f, FOREIGN, __NR_read, 0), SECCOMP_RET_ERRNO | ENOSYS);
	}
	/* The denied calls (~45 on x86_64, fewer where some do not exist)
	 * and the argument checks that refuse zeros. */
	assert_true(eperm >= 40);
	if (longest > 20)
		fail_msg("syscall %u takes %u filter instructions (at most 20)", worst, longest);
#endif
}

/* The calls the kernel allows on any process of the caller's uid (a warm
 * call's parent among them): on the caller itself only. */
static void test_seccomp_self_only(void **state)
{
#ifndef NATIVE
	skip();
#else
	static const int by_pid[] = { __NR_prlimit64, __NR_sched_setaffinity,
				      __NR_sched_setscheduler, __NR_sched_setparam,
				      __NR_sched_setattr };
	const uint32_t eperm = SECCOMP_RET_ERRNO | EPERM;
	const struct sb_seccomp_rules rules = { 0 };
	struct sb_seccomp f;

	assert_int_equal(seccomp_filter_build(&f, &rules), 0);
	for (size_t i = 0; i < sizeof(by_pid) / sizeof(by_pid[0]); i++) {
		assert_int_equal(verdict(&f, NATIVE, by_pid[i], 0), SECCOMP_RET_ALLOW);
		assert_int_equal(verdict(&f, NATIVE, by_pid[i], 1234), eperm);
		assert_int_equal(verdict(&f, NATIVE, by_pid[i], 1), eperm);
	}
	/* setpriority(which, who, prio), ioprio_set(which, who, prio). */
	assert_int_equal(verdict3(&f, NATIVE, __NR_setpriority, PRIO_PROCESS, 0, 10),
			 SECCOMP_RET_ALLOW);
	assert_int_equal(verdict3(&f, NATIVE, __NR_setpriority, PRIO_PROCESS, 1234, 10), eperm);
	assert_int_equal(verdict3(&f, NATIVE, __NR_setpriority, PRIO_PGRP, 0, 10), eperm);
	assert_int_equal(verdict3(&f, NATIVE, __NR_setpriority, PRIO_USER, 0, 10), eperm);
	assert_int_equal(verdict3(&f, NATIVE, __NR_ioprio_set, 1 /* PROCESS */, 0, 0),
			 SECCOMP_RET_ALLOW);
	assert_int_equal(verdict3(&f, NATIVE, __NR_ioprio_set, 1, 1234, 0), eperm);
	assert_int_equal(verdict3(&f, NATIVE, __NR_ioprio_set, 2 /* PGRP */, 0, 0), eperm);
	assert_int_equal(verdict3(&f, NATIVE, __NR_ioprio_set, 3 /* USER */, 0, 0), eperm);
	/* Reading them stays open. */
	assert_int_equal(verdict(&f, NATIVE, __NR_getpriority, 1234), SECCOMP_RET_ALLOW);
	assert_int_equal(verdict(&f, NATIVE, __NR_sched_getaffinity, 1234), SECCOMP_RET_ALLOW);
#endif
}

static void test_seccomp_sockets(void **state)
{
#ifndef NATIVE
	skip();
#else
	const uint32_t eperm = SECCOMP_RET_ERRNO | EPERM;
	const struct sb_seccomp_rules closed = { 0 },
				      open = { .allow_unix = true, .allow_udp = true };
	struct sb_seccomp f, g;

	assert_int_equal(seccomp_filter_build(&f, &closed), 0);
	assert_int_equal(seccomp_filter_build(&g, &open), 0);
	for (int i = 0; i < 2; i++) {
		const struct sb_seccomp *x = i ? &g : &f;

		/* TCP, with or without flags or an explicit protocol. */
		assert_int_equal(verdict3(x, NATIVE, __NR_socket, AF_INET, SOCK_STREAM, 0),
				 SECCOMP_RET_ALLOW);
		assert_int_equal(verdict3(x, NATIVE, __NR_socket, AF_INET6,
					  SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP),
				 SECCOMP_RET_ALLOW);
		/* MPTCP, SCTP, raw, netlink, packet: never. */
		assert_int_equal(verdict3(x, NATIVE, __NR_socket, AF_INET, SOCK_STREAM, 262),
				 eperm);
		assert_int_equal(verdict3(x, NATIVE, __NR_socket, AF_INET, SOCK_STREAM,
					  IPPROTO_SCTP),
				 eperm);
		assert_int_equal(verdict3(x, NATIVE, __NR_socket, AF_INET, SOCK_RAW, IPPROTO_ICMP),
				 eperm);
		assert_int_equal(verdict3(x, NATIVE, __NR_socket, AF_INET, SOCK_SEQPACKET, 0),
				 eperm);
		assert_int_equal(verdict3(x, NATIVE, __NR_socket, AF_NETLINK, SOCK_RAW, 0), eperm);
		assert_int_equal(verdict3(x, NATIVE, __NR_socket, AF_PACKET, SOCK_RAW, 0), eperm);
		assert_int_equal(verdict3(x, NATIVE, __NR_socket, AF_VSOCK, SOCK_STREAM, 0), eperm);
		assert_int_equal(
			verdict3(x, NATIVE, __NR_socket, AF_INET, SOCK_DGRAM, IPPROTO_ICMP), eperm);
		assert_int_equal(verdict3(x, NATIVE, __NR_socketpair, AF_UNIX, SOCK_STREAM, 0),
				 SECCOMP_RET_ALLOW);
	}
	/* UDP and unix sockets only when the policy opens them. */
	assert_int_equal(verdict3(&f, NATIVE, __NR_socket, AF_INET, SOCK_DGRAM, 0), eperm);
	assert_int_equal(verdict3(&f, NATIVE, __NR_socket, AF_INET6, SOCK_DGRAM, IPPROTO_UDP),
			 eperm);
	assert_int_equal(verdict3(&f, NATIVE, __NR_socket, AF_UNIX, SOCK_STREAM, 0), eperm);
	assert_int_equal(verdict3(&g, NATIVE, __NR_socket, AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0),
			 SECCOMP_RET_ALLOW);
	assert_int_equal(verdict3(&g, NATIVE, __NR_socket, AF_INET6, SOCK_DGRAM, IPPROTO_UDP),
			 SECCOMP_RET_ALLOW);
	assert_int_equal(verdict3(&g, NATIVE, __NR_socket, AF_UNIX, SOCK_STREAM, 0),
			 SECCOMP_RET_ALLOW);
	/* The upper words of an int argument are not a way around. */
	assert_int_equal(
		verdict3(&f, NATIVE, __NR_socket, AF_INET | (1ULL << 32), SOCK_STREAM, 262), eperm);
#endif
}

/* TCP Fast Open never; listen() only where the policy allows it. */
static void test_seccomp_fastopen_listen(void **state)
{
#ifndef NATIVE
	skip();
#else
	const uint32_t eperm = SECCOMP_RET_ERRNO | EPERM;
	const struct sb_seccomp_rules closed = { 0 },
				      listening = { .allow_listen = true, .own_netns = true },
				      host_ports = { .allow_listen = true };
	struct sb_seccomp f, g, h;

	assert_int_equal(seccomp_filter_build(&f, &closed), 0);
	assert_int_equal(seccomp_filter_build(&g, &listening), 0);
	assert_int_equal(seccomp_filter_build(&h, &host_ports), 0);
	assert_int_equal(verdict(&f, NATIVE, __NR_listen, 3), eperm);
	assert_int_equal(verdict(&g, NATIVE, __NR_listen, 3), SECCOMP_RET_ALLOW);
	/* Sharing the host's network namespace, the policy's word is not
	 * enough: the ports would be the host's. */
	assert_int_equal(verdict(&h, NATIVE, __NR_listen, 3), eperm);
	for (int i = 0; i < 2; i++) {
		const struct sb_seccomp *x = i ? &g : &f;

		assert_int_equal(verdict4(x, NATIVE, __NR_sendto, 3, 0, 4, MSG_FASTOPEN), eperm);
		assert_int_equal(verdict4(x, NATIVE, __NR_sendto, 3, 0, 4,
					  MSG_FASTOPEN | MSG_NOSIGNAL),
				 eperm);
		assert_int_equal(verdict4(x, NATIVE, __NR_sendto, 3, 0, 4, MSG_NOSIGNAL),
				 SECCOMP_RET_ALLOW);
		assert_int_equal(verdict3(x, NATIVE, __NR_sendmsg, 3, 0, MSG_FASTOPEN), eperm);
		assert_int_equal(verdict3(x, NATIVE, __NR_sendmsg, 3, 0, 0), SECCOMP_RET_ALLOW);
		assert_int_equal(verdict4(x, NATIVE, __NR_sendmmsg, 3, 0, 1, MSG_FASTOPEN), eperm);
		assert_int_equal(verdict4(x, NATIVE, __NR_setsockopt, 3, IPPROTO_TCP,
					  30 /* TCP_FASTOPEN_CONNECT */, 0),
				 eperm);
		assert_int_equal(verdict4(x, NATIVE, __NR_setsockopt, 3, IPPROTO_TCP,
					  23 /* TCP_FASTOPEN */, 0),
				 eperm);
		assert_int_equal(verdict4(x, NATIVE, __NR_setsockopt, 3, IPPROTO_TCP,
					  1 /* TCP_NODELAY */, 0),
				 SECCOMP_RET_ALLOW);
		/* Option 30 at another level is another option. */
		assert_int_equal(verdict4(x, NATIVE, __NR_setsockopt, 3, SOL_SOCKET, 30, 0),
				 SECCOMP_RET_ALLOW);
	}
#endif
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_seccomp_filter),
		cmocka_unit_test(test_seccomp_every_number_short),
		cmocka_unit_test(test_seccomp_self_only),
		cmocka_unit_test(test_seccomp_sockets),
		cmocka_unit_test(test_seccomp_fastopen_listen),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

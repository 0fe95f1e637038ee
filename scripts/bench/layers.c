/* What each isolation layer of a sandbox costs to set up (make bench,
 * scenario 6): a child that makes only that layer, timed from fork to
 * reap, against a child that makes nothing (the baseline), rounds
 * interleaved in a shuffled order. The layers are sandguard's own code
 * (sb_root_*, sb_net_*, sb_scratch_*, seccomp_filter_*), linked from the build.
 *
 *   layers ROUNDS SCRATCH_ROOT    (as root)
 *
 * Prints one JSON object: {"<layer>": [ns, ns, ...], ...}. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "policy/policy.h"
#include "sandbox/sandbox_child.h"
#include "sandbox/sandbox_net.h"
#include "sandbox/sandbox_root.h"
#include "sandbox/sandbox_scratch.h"
#include "sandbox/sandbox_seccomp.h"

enum layer {
	L_FORK, /* the baseline: fork, exit, reap */
	L_PIDNS,
	L_IPC,
	L_UTS,
	L_NET,
	L_NET_RELAY,
	L_ROOT,
	L_SCRATCH,
	L_SECCOMP,
	L__COUNT
};

static const char *const names[L__COUNT] = {
	"fork (baseline)",
	"pid namespace + init",
	"ipc namespace",
	"uts namespace + hostname",
	"network namespace (loopback down)",
	"network namespace + relay routes and listeners",
	"mount namespace + minimal root",
	"tmpfs scratch (mount + unmount)",
	"seccomp filter (installed, then freed at exit)",
};

static struct sg_policy policy, allow;
static struct sb_root_plan root;
static struct sb_net_plan net;
static struct sb_seccomp filter;
static char scratch_root[1024], scratch[4096];

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* In the child: make the layer, exit 0 when it worked. */
static _Noreturn void child(enum layer l)
{
	int fds[SB_NET_MAX_LISTENERS], n;
	size_t op;

	switch (l) {
	case L_IPC:
		_exit(unshare(CLONE_NEWIPC) ? 1 : 0);
	case L_UTS:
		_exit(unshare(CLONE_NEWUTS) || sethostname("sandbox", 7) ? 1 : 0);
	case L_NET:
		_exit(unshare(CLONE_NEWNET) ? 1 : 0);
	case L_NET_RELAY:
		_exit(unshare(CLONE_NEWNET) || sb_net_setup(&net, fds, &n) ? 1 : 0);
	case L_ROOT:
		_exit(unshare(CLONE_NEWNS) || sb_root_enter(&root, -1, 0, &op) ? 1 : 0);
	case L_SECCOMP:
		_exit(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || seccomp_filter_install(&filter)
			      ? 1
			      : 0);
	default:
		_exit(0);
	}
}

static int64_t once(enum layer l, const char *id)
{
	struct sb_scratch_spec sp = { .root = scratch_root,
				      .tenant = "bench",
				      .id = id,
				      .uid = 65534,
				      .gid = 65534,
				      .size_mb = 64,
				      .inodes = 4096 };
	char detail[256], path[4096];
	uint64_t t0 = now_ns();
	int status;
	pid_t pid;

	if (l == L_SCRATCH) {
		if (sb_scratch_create(&sp, path, sizeof(path), detail, sizeof(detail)) ||
		    sb_scratch_remove(scratch_root, "bench", id))
			return -1;
		return (int64_t)(now_ns() - t0);
	}
	/* The PID namespace comes with the clone; its init exits at once,
	 * which takes the namespace down. */
	pid = sb_clone(l == L_PIDNS ? CLONE_NEWPID : 0);
	if (pid == 0)
		child(l);
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		return -1;
	return (int64_t)(now_ns() - t0);
}

static int setup(void)
{
	char detail[256];
	struct sb_scratch_spec sp = { .root = scratch_root,
				      .tenant = "bench",
				      .id = "plan",
				      .uid = 65534,
				      .gid = 65534,
				      .size_mb = 64,
				      .inodes = 4096 };

	policy_defaults(&policy);
	snprintf(policy.scratch_root, sizeof(policy.scratch_root), "%s", scratch_root);
	allow = policy;
	if (cidr_parse("127.0.0.1/32", &allow.egress[0]))
		return -1;
	allow.egress[0].port = 3128;
	allow.egress[0].proto = 6;
	allow.n_egress = 1;
	sb_net_plan(&net, &allow);
	if (seccomp_filter_build(&filter, &(struct sb_seccomp_rules){ 0 }))
		return -1;
	if (sb_scratch_create(&sp, scratch, sizeof(scratch), detail, sizeof(detail)) ||
	    sb_root_plan(&root, &policy, scratch, SB_ROOT_BASE, false, detail, sizeof(detail))) {
		fprintf(stderr, "layers: %s\n", detail);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int rounds = argc > 2 ? atoi(argv[1]) : 0, order[L__COUNT];
	static int64_t samples[L__COUNT][1000];

	if (rounds <= 0 || rounds > 1000) {
		fprintf(stderr, "usage: layers ROUNDS SCRATCH_ROOT (1..1000 rounds, as root)\n");
		return 64;
	}
	snprintf(scratch_root, sizeof(scratch_root), "%s", argv[2]);
	if (setup())
		return 1;
	for (int r = 0; r < rounds; r++) {
		for (int i = 0; i < L__COUNT; i++)
			order[i] = i;
		for (int i = L__COUNT - 1; i > 0; i--) {
			unsigned pick;
			int j, t;

			if (getrandom(&pick, sizeof(pick), 0) != sizeof(pick))
				pick = (unsigned)r;
			j = (int)(pick % (unsigned)(i + 1));
			t = order[i];
			order[i] = order[j];
			order[j] = t;
		}
		for (int i = 0; i < L__COUNT; i++) {
			char id[32];

			snprintf(id, sizeof(id), "r%d", r);
			samples[order[i]][r] = once(order[i], id);
			if (samples[order[i]][r] < 0) {
				fprintf(stderr, "layers: %s failed\n", names[order[i]]);
				return 1;
			}
		}
	}
	sb_scratch_remove(scratch_root, "bench", "plan");
	printf("{");
	for (int l = 0; l < L__COUNT; l++) {
		printf("%s\"%s\": [", l ? ", " : "", names[l]);
		for (int r = 0; r < rounds; r++)
			printf("%s%lld", r ? ", " : "", (long long)samples[l][r]);
		printf("]");
	}
	printf("}\n");
	return 0;
}

/* Tenant state across processes: paused tenants (persisted, listed in
 * name order, first reason kept) and the per-tenant concurrency slots
 * (refusal, bounded wait, release, per-tenant caps, waiters served in
 * arrival order). */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <cmocka.h>
#include "tmp_dir.h"
#include "node/tenant_state.h"
#include "queue_lines.h"

static char tmp[64];

static int setup(void **state)
{
	tmp_dir_executor(tmp, sizeof(tmp), "tenant");
	return 0;
}

static int teardown(void **state)
{
	tmp_dir_remove(tmp);
	return 0;
}

static int collect(const char *tenant, const char *info, void *arg)
{
	strcat(arg, tenant);
	strcat(arg, ";");
	return 0;
}

static void test_pause_resume_list(void **state)
{
	char names[256] = "", info[1024];

	assert_int_equal(tenant_pause("zeta", "manual"), 0);
	assert_int_equal(tenant_pause("alpha", "first"), 0);
	assert_int_equal(tenant_pause("alpha", "second"), 0); /* keeps the first reason */
	assert_int_equal(tenant_paused("alpha", info, sizeof(info)), 1);
	assert_non_null(strstr(info, "\"reason\":\"first\""));
	assert_int_equal(tenant_list_paused(collect, names), 0);
	assert_string_equal(names, "alpha;zeta;");
	assert_int_equal(tenant_resume("alpha"), 0);
	assert_int_equal(tenant_resume("zeta"), 0);
	assert_int_equal(tenant_pause("../etc", "x"), -EINVAL);
	assert_int_equal(tenant_paused("alpha", NULL, 0), 0);
	names[0] = '\0';
	assert_int_equal(tenant_list_paused(collect, names), 0);
	assert_string_equal(names, "");
}

static void test_slots(void **state)
{
	struct tenant_slot a, b, c;

	/* Two slots: the third taker is refused, then gets the freed one. */
	assert_int_equal(tenant_slot_acquire("acme", 2, 0, &a), 0);
	assert_int_equal(tenant_slot_acquire("acme", 2, 0, &b), 0);
	assert_int_not_equal(a.index, b.index);
	assert_int_equal(tenant_slot_acquire("acme", 2, 0, &c), -EBUSY);
	assert_int_equal(tenant_slot_acquire("acme", 2, 50, &c), -ETIMEDOUT);
	tenant_slot_release(&a);
	assert_int_equal(tenant_slot_acquire("acme", 2, 0, &c), 0);
	assert_int_equal(c.index, 0);
	tenant_slot_release(&b);
	tenant_slot_release(&c);
	/* Another tenant's cap is its own. */
	assert_int_equal(tenant_slot_acquire("other", 1, 0, &a), 0);
	tenant_slot_release(&a);
}

/* A pass skips the slots this process holds without opening their files
 * (tenant_state.c: each is flock'd by one of its descriptors), and tries
 * a slot again once it is released. Seen through a held slot's file
 * replaced by a directory: opening it would fail the pass (EISDIR). */
static void test_own_slots_skipped_unopened(void **state)
{
	struct tenant_slot a, b, c;
	char path[PATH_MAX];

	assert_int_equal(tenant_slot_acquire("mine", 4, 0, &a), 0);
	assert_int_equal(tenant_slot_acquire("mine", 4, 0, &b), 0);
	assert_int_equal(a.index, 0);
	assert_int_equal(b.index, 1);
	snprintf(path, sizeof(path), "%s/run/tenants/mine/slot-0.lock", tmp);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(mkdir(path, 0700), 0);
	/* Slot 0 is ours, held: not opened, so the pass goes on to 2. */
	assert_int_equal(tenant_slot_acquire("mine", 4, 0, &c), 0);
	assert_int_equal(c.index, 2);
	tenant_slot_release(&c);
	/* Released slots are tried again: 1 is free, and 0's file is now opened. */
	tenant_slot_release(&b);
	assert_int_equal(tenant_slot_acquire("mine", 4, 0, &c), 0);
	assert_int_equal(c.index, 1);
	tenant_slot_release(&a);
	assert_int_equal(tenant_slot_acquire("mine", 4, 0, &b), -EISDIR);
	tenant_slot_release(&c);
	assert_int_equal(rmdir(path), 0);
	assert_int_equal(tenant_slot_acquire("mine", 4, 0, &b), 0);
	assert_int_equal(b.index, 0);
	tenant_slot_release(&b);
}

/* A slot held by another process is refused; when that process dies
 * (killed, no cleanup), the kernel frees the slot. */
static void test_slot_freed_by_death(void **state)
{
	struct tenant_slot s;
	int ready[2], status;
	char c;
	pid_t pid;

	assert_int_equal(pipe(ready), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (tenant_slot_acquire("crashy", 1, 0, &s))
			_exit(1);
		if (write(ready[1], "x", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	assert_int_equal(read(ready[0], &c, 1), 1);
	assert_int_equal(tenant_slot_acquire("crashy", 1, 0, &s), -EBUSY);
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(tenant_slot_acquire("crashy", 1, 0, &s), 0);
	tenant_slot_release(&s);
	close(ready[0]);
	close(ready[1]);
}

/* A waiter for a slot, in its own process: reports its letter on `out`
 * once it holds one, then gives it back. */
static pid_t slot_waiter(char letter, int out, int held_fd)
{
	struct tenant_slot s;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid)
		return pid;
	close(held_fd); /* the test's slot, not this waiter's */
	if (tenant_slot_acquire("queued", 1, 20000, &s) || write(out, &letter, 1) != 1)
		_exit(1);
	tenant_slot_release(&s);
	_exit(0);
}

/* Until `n` waiters are in the tenant's line. */
static void until_waiting(int n)
{
	char dir[160];

	snprintf(dir, sizeof(dir), "%s/run/tenants/queued", tmp);
	queue_until_waiting(dir, n);
}

/* Slots go to waiters in arrival order, and a release wakes the first. */
static void test_slot_waiters_in_arrival_order(void **state)
{
	struct tenant_slot held;
	int out[2], status;
	pid_t w[3];
	char got[4] = "";

	assert_int_equal(pipe(out), 0);
	assert_int_equal(tenant_slot_acquire("queued", 1, 0, &held), 0);
	for (int i = 0; i < 3; i++) {
		w[i] = slot_waiter("ABC"[i], out[1], held.fd);
		until_waiting(i + 1);
	}
	tenant_slot_release(&held);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(waitpid(w[i], &status, 0), w[i]);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	assert_int_equal(read(out[0], got, 3), 3);
	assert_string_equal(got, "ABC");
	close(out[0]);
	close(out[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pause_resume_list),
		cmocka_unit_test(test_slots),
		cmocka_unit_test(test_own_slots_skipped_unopened),
		cmocka_unit_test(test_slot_freed_by_death),
		cmocka_unit_test(test_slot_waiters_in_arrival_order),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

/* The /run_code build cache's store (src/serve/run_build_cache.c) on a
 * temporary directory: an entry comes back whole with its compile_result;
 * a tenant reads only its own; a changed, truncated or group-readable
 * entry is refused and removed; the least recently used entries go
 * beyond the tenant's bound; and an identical compile under way makes a
 * second request wait for it, then read what it left. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include "lib/clock.h"
#include "serve/run_build_cache.h"

static char dir[64];
static struct run_build_cache *bc;

static int setup(void **state)
{
	char err[256];

	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/sg-buildcache-XXXXXX");
	assert_non_null(mkdtemp(dir));
	assert_int_equal(run_build_cache_open(dir, 1, &bc, err, sizeof(err)), 0);
	assert_non_null(bc);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	run_build_cache_free(bc);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static struct run_build_key key_of(const char *tenant, char c)
{
	struct run_build_key k = { 0 };

	snprintf(k.tenant, sizeof(k.tenant), "%s", tenant);
	memset(k.hex, c, SHA256_HEX - 1);
	return k;
}

/* Whether a get finds the key's entry (not waiting for anyone). */
static bool found(struct run_build_key *k, size_t want_len)
{
	void *program = NULL;
	size_t len;
	json_t *result = NULL;
	bool hit = run_build_cache_get(bc, k, clock_ms(CLOCK_MONOTONIC) + 1000, &program, &len,
				       &result);

	if (hit) {
		assert_int_equal(len, want_len);
		assert_int_equal(json_integer_value(json_object_get(result, "return_code")), 0);
		json_decref(result);
		free(program);
	} else if (k->claimed) {
		run_build_cache_done(bc, k, NULL, 0, NULL); /* let it go: nothing to keep */
	}
	return hit;
}

static void keep(struct run_build_key *k, size_t len)
{
	char *program = malloc(len);
	json_t *result = json_pack("{s:s, s:i}", "status", "Finished", "return_code", 0);

	memset(program, 'P', len);
	run_build_cache_done(bc, k, program, len, result);
	json_decref(result);
	free(program);
}

static void entry_path(const struct run_build_key *k, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s/%s", dir, k->tenant, k->hex);
}

static void test_round_trip_and_tenants(void **state)
{
	struct run_build_key a = key_of("alice", 'a'), b = key_of("bob", 'a');
	struct stat st;
	char path[256];

	(void)state;
	keep(&a, 1000);
	assert_true(found(&a, 1000));
	assert_false(found(&b, 1000)); /* the same key, another tenant */
	entry_path(&a, path, sizeof(path));
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
}

static void test_bad_entries_refused(void **state)
{
	static const char *const how[] = { "changed", "truncated", "readable" };
	char path[256];

	(void)state;
	for (size_t i = 0; i < 3; i++) {
		struct run_build_key k = key_of("carol", (char)('b' + i));
		struct stat st;
		int fd;

		keep(&k, 5000);
		entry_path(&k, path, sizeof(path));
		assert_int_equal(stat(path, &st), 0);
		if (!strcmp(how[i], "changed")) {
			fd = open(path, O_WRONLY);
			assert_int_equal(pwrite(fd, "Q", 1, st.st_size - 10), 1);
			close(fd);
		} else if (!strcmp(how[i], "truncated")) {
			assert_int_equal(truncate(path, st.st_size - 10), 0);
		} else {
			assert_int_equal(chmod(path, 0640), 0);
		}
		assert_false(found(&k, 5000));
		assert_int_not_equal(stat(path, &st), 0); /* removed */
	}
}

static void test_least_recently_used_go(void **state)
{
	struct run_build_key k1 = key_of("dave", '1'), k2 = key_of("dave", '2'),
			     k3 = key_of("dave", '3');

	(void)state;
	keep(&k1, 400 << 10);
	keep(&k2, 400 << 10);
	usleep(20000);
	assert_true(found(&k1, 400 << 10)); /* k1 used last: k2 is the oldest */
	keep(&k3, 400 << 10);               /* 1.2 MiB > the 1 MiB bound */
	assert_true(found(&k1, 400 << 10));
	assert_true(found(&k3, 400 << 10));
	assert_false(found(&k2, 400 << 10));
}

static atomic_bool second_done;

static void *second_request(void *arg)
{
	struct run_build_key k = key_of("erin", 'e');

	*(bool *)arg = found(&k, 777);
	atomic_store(&second_done, true);
	return NULL;
}

static void test_identical_compile_waited_for(void **state)
{
	struct run_build_key k = key_of("erin", 'e');
	void *program;
	size_t len;
	json_t *result;
	pthread_t t;
	bool hit = false;

	(void)state;
	assert_false(run_build_cache_get(bc, &k, clock_ms(CLOCK_MONOTONIC) + 1000, &program, &len,
					 &result));
	assert_true(k.claimed); /* this one compiles */
	assert_int_equal(pthread_create(&t, NULL, second_request, &hit), 0);
	usleep(100000); /* the second waits for it... */
	assert_false(atomic_load(&second_done));
	keep(&k, 777); /* ...and reads what it left */
	pthread_join(t, NULL);
	assert_true(hit);
	assert_false(k.claimed);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip_and_tenants),
		cmocka_unit_test(test_bad_entries_refused),
		cmocka_unit_test(test_least_recently_used_go),
		cmocka_unit_test(test_identical_compile_waited_for),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

/* The executor socket's wire format (src/executor/executor_proto.h). The request
 * the CLI parsed travels whole (every field, arguments that are not
 * UTF-8, the shared environment and nothing else) and a head or strings no
 * client sends are refused before anything runs. The send helpers: an answer in
 * parts (a head, an empty part, a part far larger than the socket's
 * buffer) arrives whole and in order, also when signals cut the sender's
 * sendmsg() calls short (each interrupted call returns what it sent so
 * far: the rest must follow, from the right byte); a peer that is gone is
 * -EPIPE, not a SIGPIPE. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>
#include "executor/executor_proto.h"

#define BIG (4u << 20)

#define CHUNK (64u << 10)

struct reader {
	int fd;
	size_t want;
	char *got;
	pthread_t sender, t;
};

static void on_signal(int sig)
{
	(void)sig; /* only there to interrupt the sender's sendmsg() */
}

/* Reads the answer a chunk at a time, signalling the sender after each:
 * while the socket is full, its sendmsg() is blocked with part of a part
 * sent, and returns that much. */
static void *read_thread(void *arg)
{
	struct reader *r = arg;

	r->got = malloc(r->want);
	for (size_t off = 0; r->got && off < r->want;) {
		size_t n = r->want - off < CHUNK ? r->want - off : CHUNK;

		if (executor_recv_all(r->fd, r->got + off, n)) {
			free(r->got);
			r->got = NULL;
		}
		off += n;
		pthread_kill(r->sender, SIGUSR1);
	}
	return NULL;
}

static void test_parts_arrive_whole_in_order(void **state)
{
	static const char head[] = "head:";
	char *big = malloc(BIG);
	int sv[2], one = 4096;
	struct sigaction sa = { .sa_handler = on_signal }; /* no SA_RESTART */
	struct reader r;

	(void)state;
	assert_int_equal(sigaction(SIGUSR1, &sa, NULL), 0);
	assert_non_null(big);
	for (size_t i = 0; i < BIG; i++)
		big[i] = (char)(i * 7 + i / 4099);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	/* A small buffer: the big part goes in many pieces. */
	assert_int_equal(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &one, sizeof(one)), 0);
	r = (struct reader){ .fd = sv[1],
			     .want = sizeof(head) - 1 + BIG,
			     .sender = pthread_self() };
	assert_int_equal(pthread_create(&r.t, NULL, read_thread, &r), 0);

	struct iovec iov[] = { { (void *)head, sizeof(head) - 1 }, { big, 0 }, { big, BIG } };
	assert_int_equal(executor_send_iov(sv[0], iov, 3), 0);
	assert_int_equal(pthread_join(r.t, NULL), 0);
	assert_non_null(r.got);
	assert_memory_equal(r.got, head, sizeof(head) - 1);
	assert_memory_equal(r.got + sizeof(head) - 1, big, BIG);
	close(sv[0]);
	char extra;
	assert_int_equal(read(sv[1], &extra, 1), 0); /* nothing more than was sent */
	close(sv[1]);
	free(r.got);
	free(big);
}

static void test_gone_peer_is_epipe(void **state)
{
	int sv[2];
	char byte = 'x';

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	close(sv[1]);
	struct iovec iov[] = { { &byte, 1 } };
	assert_int_equal(executor_send_iov(sv[0], iov, 1), -EPIPE);
	assert_int_equal(executor_send_all(sv[0], &byte, 1), -EPIPE);
	close(sv[0]);
}

static void assert_same_string(const char *a, const char *b)
{
	if (!a || !b)
		assert_ptr_equal(a, b);
	else
		assert_string_equal(a, b);
}

static void test_request_round_trip(void **state)
{
	char *argv[] = { "/usr/bin/python3", "s\xff\xfe.py", "", NULL };
	char *envp[] = { "PATH=/bin", "SANDGUARD_RUN_DIR=/run/x", "SANDGUARD_WARM=1",
			 "SANDGUARD_STATE_DIR=/var/x", NULL };
	struct exec_request in = { .tenant = "t-1",
				   .policy_dir = "/etc/p\x80",
				   .tests_path = "-",
				   .run_id = "run",
				   .batch_id = "b",
				   .timeout_ms = 1234,
				   .grader_set = true,
				   .grader = SG_GRADER_LCB,
				   .argv = argv },
			    out;
	struct executor_request h;
	char **env, **vec, *s;

	(void)state;
	s = executor_request_pack(&in, envp, &h);
	assert_non_null(s);
	assert_int_equal(h.magic, EXECUTOR_MAGIC);
	assert_int_equal(h.argc, 3);
	assert_int_equal(h.envc, 2); /* SANDGUARD_* but SANDGUARD_WARM */
	assert_int_equal(executor_request_unpack(&h, s, &out, &env, &vec), 0);
	assert_string_equal(out.tenant, "t-1");
	assert_string_equal(out.policy_dir, "/etc/p\x80");
	assert_null(out.batch_path);
	assert_string_equal(out.tests_path, "-");
	assert_string_equal(out.run_id, "run");
	assert_string_equal(out.batch_id, "b");
	assert_null(out.language);
	assert_null(out.code_path);
	assert_int_equal(out.timeout_ms, 1234);
	assert_true(out.grader_set);
	assert_int_equal(out.grader, SG_GRADER_LCB);
	for (int i = 0; i < 4; i++)
		assert_same_string(out.argv[i], argv[i]);
	assert_string_equal(env[0], "SANDGUARD_RUN_DIR=/run/x");
	assert_string_equal(env[1], "SANDGUARD_STATE_DIR=/var/x");
	assert_null(env[2]);
	free(vec);
	free(s);

	/* --language: no command; the policy's grader. */
	in = (struct exec_request){
		.tenant = "t", .tests_path = "t.json", .language = "cpp", .code_path = "-"
	};
	s = executor_request_pack(&in, (char *[]){ NULL }, &h);
	assert_non_null(s);
	assert_int_equal(executor_request_unpack(&h, s, &out, &env, &vec), 0);
	assert_null(out.argv);
	assert_false(out.grader_set);
	assert_string_equal(out.language, "cpp");
	assert_string_equal(out.code_path, "-");
	assert_true(exec_request_reads_stdin(&out));
	assert_null(env[0]);
	free(vec);
	free(s);
}

/* A head and strings no client sends: refused, nothing allocated. */
static void refused(const struct executor_request *h, const char *strings)
{
	struct exec_request r;
	char **env, **vec, *s = malloc(h->len + 1);

	assert_non_null(s);
	memcpy(s, strings, h->len);
	assert_int_equal(executor_request_unpack(h, s, &r, &env, &vec), -EPROTO);
	assert_null(vec);
	assert_null(r.tenant);
	free(s);
}

static void test_request_malformed(void **state)
{
	/* fields: bit 0 tenant, 2 batch, 3 tests, 6 language, 7 code */
	struct executor_request ok = { .magic = EXECUTOR_MAGIC,
				       .fields = 1 | 4,
				       .argc = 1,
				       .len = 6 },
				h = ok;
	struct exec_request r;
	char **env, **vec, s[] = "t\0b\0x\0";

	(void)state;
	assert_int_equal(executor_request_unpack(&ok, s, &r, &env, &vec), 0);
	assert_string_equal(r.argv[0], "x");
	free(vec);
	h.fields |= 1u << 8; /* a field this side does not know */
	refused(&h, s);
	h = ok, h.argc = 0xFFFFFFFF, h.envc = 2; /* counts that wrap */
	refused(&h, s);
	h = ok, h.len = 5; /* the last string without its NUL */
	refused(&h, s);
	h = ok, h.envc = 1; /* a string fewer than the counts */
	refused(&h, "t\0b\0x\0\0\0");
	h = ok, h.len = 8; /* bytes past the strings */
	refused(&h, "t\0b\0x\0z");
	h = ok, h.grader = SG_GRADER_LCB + 2;
	refused(&h, s);
	h = ok, h.zero = 1;
	refused(&h, s);
	/* Well formed, but not a request the CLI lets through. */
	h = ok, h.fields = 4, h.len = 4; /* no tenant */
	refused(&h, "b\0x\0");
	h = ok;
	refused(&h, "T\0b\0x\0"); /* not a tenant name */
	h = ok, h.len = 8;
	refused(&h, "../\0b\0x\0");              /* nor this, a path */
	h = ok, h.fields = 1 | 4 | 8, h.len = 8; /* --batch and --tests */
	refused(&h, "t\0b\0c\0x\0");
	h = ok, h.argc = 0, h.len = 4; /* no command, no language */
	refused(&h, "t\0b\0");
	h = ok, h.fields = 1 | 8 | 64 | 128, h.len = 10; /* --language and a command */
	refused(&h, "t\0c\0l\0f\0x\0");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parts_arrive_whole_in_order),
		cmocka_unit_test(test_gone_peer_is_epipe),
		cmocka_unit_test(test_request_round_trip),
		cmocka_unit_test(test_request_malformed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

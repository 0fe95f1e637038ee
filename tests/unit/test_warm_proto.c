/* The executor socket's send helpers (src/warm/warm_proto.h): an answer in
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
#include "warm/warm_proto.h"

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

		if (warm_recv_all(r->fd, r->got + off, n)) {
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
	assert_int_equal(warm_send_iov(sv[0], iov, 3), 0);
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
	assert_int_equal(warm_send_iov(sv[0], iov, 1), -EPIPE);
	assert_int_equal(warm_send_all(sv[0], &byte, 1), -EPIPE);
	close(sv[0]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parts_arrive_whole_in_order),
		cmocka_unit_test(test_gone_peer_is_epipe),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* For unit tests of first-come, first-served waits (lib/ticket_queue.h):
 * how many wait in a line, and waiting until `n` do. */
#ifndef SG_TEST_QUEUE_LINES_H
#define SG_TEST_QUEUE_LINES_H
#include <dirent.h>
#include <string.h>
#include <unistd.h>

/* Waiters in the line of the resource in `dir` (<dir>/queue/t-*). */
static inline int queue_waiting(const char *dir)
{
	char q[PATH_MAX];
	struct dirent *e;
	int n = 0;
	DIR *d;

	snprintf(q, sizeof(q), "%s/queue", dir);
	if (!(d = opendir(q)))
		return 0;
	while ((e = readdir(d)))
		n += !strncmp(e->d_name, "t-", 2);
	closedir(d);
	return n;
}

/* Until `n` wait there (bounded at 20 s: a failure, not a timing). */
static inline void queue_until_waiting(const char *dir, int n)
{
	for (int i = 0; i < 20000 && queue_waiting(dir) != n; i++)
		usleep(1000);
	assert_int_equal(queue_waiting(dir), n);
}

#endif

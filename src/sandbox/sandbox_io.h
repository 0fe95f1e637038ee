/* The parent's side of a sandbox run while tenant code runs: feed stdin,
 * drain stdout and stderr concurrently (each capped: memory stays bounded
 * whatever the tenant writes), watch for the main process's end (init's
 * DONE on the control socket) and the deadline. */
#ifndef SG_SANDBOX_IO_H
#define SG_SANDBOX_IO_H
#include <stdbool.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

struct sb_capture {
	int fd;     /* read end (O_NONBLOCK); -1 after EOF */
	char *data; /* the first `limit` bytes, NUL-terminated */
	size_t len, alloc;
	size_t limit;
	uint64_t seen; /* everything read, kept or not */
	bool truncated;
};

struct sb_feed {
	int fd; /* write end (O_NONBLOCK); -1 when done */
	const char *data;
	size_t len, off;
};

enum sb_pump_end {
	SB_PUMP_EXITED = 1, /* the main process exited (end_fd became readable) */
	SB_PUMP_DEADLINE,   /* the deadline passed first */
	SB_PUMP_OVERSIZE,   /* stdout went over its limit */
};

struct sb_pump {
	int end_fd; /* readable, or hung up, once the main process ended; -1: it has; not owned */
	struct sb_feed in;
	struct sb_capture out, err;
	uint64_t deadline_ms; /* on clock_ms(CLOCK_MONOTONIC) */
	uint64_t end_ms;      /* when the outcome was decided */
	/* The read buffer, off the stack (a serve worker's is 256 KiB):
	 * made at the first read, freed by sb_pump_close(). NULL before. */
	char *chunk;
};

/* Writes what of f->data its pipe takes now (never blocks), and closes
 * the pipe once all is written, or once nobody reads it. */
void sb_feed(struct sb_feed *f);

/* Runs until the main process ended, the deadline, or stdout oversize.
 * Returns an enum sb_pump_end, or -errno (-ENOMEM, a failed poll). */
int sb_pump_run(struct sb_pump *p);

/* After the end (the run's processes were killed): collect what is left
 * in the pipes, until both are closed or `until_ms`. SB_PUMP_OVERSIZE when
 * stdout went over its limit meanwhile, else SB_PUMP_EXITED; or -errno. */
int sb_pump_drain(struct sb_pump *p, uint64_t until_ms);

/* Closes the pump's fds and frees its read buffer; the captures keep
 * their data. */
void sb_pump_close(struct sb_pump *p);

/* Writing the child's stdin must not kill the executor with SIGPIPE: the
 * signal is blocked in the calling thread for the run, and one raised
 * meanwhile is consumed, unless it was pending already. */
struct sb_sigpipe_guard {
	sigset_t old;
	bool was_pending;
};

void sb_sigpipe_block(struct sb_sigpipe_guard *g);
void sb_sigpipe_restore(struct sb_sigpipe_guard *g);

#endif

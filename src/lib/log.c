#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "log.h"

static enum sg_log_level min_level = SG_LOG_INFO;
static int level_from_env = -1;
static __thread FILE *thread_stream;

void sg_log_to(FILE *f)
{
	thread_stream = f;
}

FILE *sg_log_stream(void)
{
	return thread_stream;
}

void sg_log_set_level(enum sg_log_level lvl)
{
	min_level = lvl;
}

void sg_log(enum sg_log_level lvl, const char *fmt, ...)
{
	static const char *names[] = { "debug", "info", "warning", "error" };
	FILE *f = thread_stream ? thread_stream : stderr;
	va_list ap;

	if (level_from_env < 0) {
		const char *v = getenv("SANDGUARD_DEBUG");
		level_from_env = v && *v && strcmp(v, "0") != 0;
		if (level_from_env)
			min_level = SG_LOG_DEBUG;
	}
	if (lvl < min_level)
		return;
	flockfile(f); /* one line, whole, among other threads' */
	fprintf(f, "sandguard: %s: ", names[lvl]);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	funlockfile(f);
}

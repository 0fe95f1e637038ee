/* Logging to stderr (or a thread's own stream): "sandguard: <level>: message". */
#ifndef SG_LOG_H
#define SG_LOG_H
#include <stdarg.h>
#include <stdio.h>

enum sg_log_level { SG_LOG_DEBUG, SG_LOG_INFO, SG_LOG_WARN, SG_LOG_ERROR };

void sg_log_set_level(enum sg_log_level lvl);

/* Where the calling thread's log lines go: `f`, or stderr again (NULL).
 * A long-lived executor hands each client the lines of its own run. */
void sg_log_to(FILE *f);
/* The calling thread's stream (NULL: stderr), for the threads it starts. */
FILE *sg_log_stream(void);
void sg_log(enum sg_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define sg_debug(...) sg_log(SG_LOG_DEBUG, __VA_ARGS__)
#define sg_info(...)  sg_log(SG_LOG_INFO, __VA_ARGS__)
#define sg_warn(...)  sg_log(SG_LOG_WARN, __VA_ARGS__)
#define sg_error(...) sg_log(SG_LOG_ERROR, __VA_ARGS__)

#endif

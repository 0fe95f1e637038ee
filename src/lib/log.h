/* Logging to stderr: "sandguard: <level>: message". */
#ifndef SG_LOG_H
#define SG_LOG_H
#include <stdarg.h>

enum sg_log_level { SG_LOG_DEBUG, SG_LOG_INFO, SG_LOG_WARN, SG_LOG_ERROR };

void sg_log_set_level(enum sg_log_level lvl);
void sg_log(enum sg_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define sg_debug(...) sg_log(SG_LOG_DEBUG, __VA_ARGS__)
#define sg_info(...)  sg_log(SG_LOG_INFO, __VA_ARGS__)
#define sg_warn(...)  sg_log(SG_LOG_WARN, __VA_ARGS__)
#define sg_error(...) sg_log(SG_LOG_ERROR, __VA_ARGS__)

#endif

/* Appending to a human-readable detail buffer (a cause's explanation, an
 * error message): snprintf at its end, truncating quietly. */
#ifndef SG_LIB_DETAIL_H
#define SG_LIB_DETAIL_H
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static inline __attribute__((format(printf, 3, 4))) void detail_append(char *detail, size_t len,
								       const char *fmt, ...)
{
	size_t used = strnlen(detail, len);
	va_list ap;

	if (used + 1 >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(detail + used, len - used, fmt, ap);
	va_end(ap);
}
#endif

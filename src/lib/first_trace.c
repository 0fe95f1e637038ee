/* A thread's notice before its request's first lasting trace (see
 * src/lib/first_trace.h). */
#include <stddef.h>
#include "first_trace.h"

static __thread first_trace_fn armed;
static __thread void *armed_arg;

void first_trace_arm(first_trace_fn fn, void *arg)
{
	armed = fn;
	armed_arg = arg;
}

void first_trace_disarm(void)
{
	armed = NULL;
	armed_arg = NULL;
}

void first_trace_now(void)
{
	first_trace_fn fn = armed;
	void *arg = armed_arg;

	if (!fn)
		return;
	first_trace_disarm(); /* once: and never again from inside fn */
	fn(arg);
}

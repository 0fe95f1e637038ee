/* libFuzzer target: the agent's fixed-format event encoder. The input is a
 * raw ring-buffer event (any bytes the kernel side could hand over: names
 * and paths are the tenant's) followed by the context strings (node,
 * tenant, sandbox, batch id, run id, separated by NUL bytes: the
 * executor's and the host's bytes). Every line must be valid JSON that
 * jansson writes back as the very same bytes (the encoder is byte for byte
 * jansson's compact dump), fit EVENT_JSON_MAX, and decode with
 * event_parse_line(). Build and run with scripts/fuzz.sh. Seeds:
 * tests/fuzz/corpus/event_json/. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "telemetry/event_json.h"

/* The next NUL-separated string of the tail, NULL when the tail is used
 * up (a null field). */
static const char *next_string(char **p, const char *end)
{
	char *s = *p, *nul;

	if (s >= end)
		return NULL;
	nul = memchr(s, '\0', (size_t)(end - s));
	*p = nul ? nul + 1 : (char *)end;
	return s;
}

static int too_long(const char *s, size_t max)
{
	return s && strlen(s) > max;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sg_event e;
	struct event_ctx ctx = { .boot_to_real_ns = 1795289400LL * 1000000000 };
	char buf[EVENT_JSON_MAX], *tail, *p, *again;
	struct event_record r;
	json_t *j;
	int n;

	if (size < sizeof(e))
		return 0;
	memcpy(&e, data, sizeof(e));
	/* Names are bounded; the strings after the event are terminated. */
	tail = malloc(size - sizeof(e) + 1);
	if (!tail)
		return 0;
	memcpy(tail, data + sizeof(e), size - sizeof(e));
	tail[size - sizeof(e)] = '\0';
	p = tail;
	const char *end = tail + (size - sizeof(e));
	ctx.node = next_string(&p, end);
	ctx.tenant = next_string(&p, end);
	ctx.sandbox = next_string(&p, end);
	ctx.batch_id = next_string(&p, end);
	ctx.run_id = next_string(&p, end);
	/* The agent's bounds: node and tenant names up to 63 bytes, sandbox,
	 * batch and run ids up to SG_ID_MAX. */
	if (too_long(ctx.node, 63) || too_long(ctx.tenant, 63) || too_long(ctx.sandbox, 127) ||
	    too_long(ctx.batch_id, 127) || too_long(ctx.run_id, 127)) {
		free(tail);
		return 0;
	}
	e.ts_ns %= 1ULL << 60;

	n = event_to_json(&e, &ctx, buf, sizeof(buf));
	if (n == -EINVAL) { /* an unknown type or action: refused, never written */
		if (event_type_name(e.type) && event_action_name(e.action) &&
		    !event_type_agents_own(e.type))
			abort();
		free(tail);
		return 0;
	}
	if (n <= 0 || (size_t)n != strlen(buf))
		abort(); /* every known event fits EVENT_JSON_MAX */
	j = json_loads(buf, JSON_REJECT_DUPLICATES, NULL);
	if (!j)
		abort();
	again = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(10));
	if (!again || strcmp(again, buf))
		abort();
	free(again);
	json_decref(j);
	if (event_parse_line(buf, &r))
		abort();
	event_record_free(&r);
	free(tail);
	return 0;
}

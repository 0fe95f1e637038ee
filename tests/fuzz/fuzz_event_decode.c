/* libFuzzer target: the event-line decoder (`sandguard events` reads a
 * file anyone with write access to it could have filled with anything),
 * and the RFC 3339 parser it uses. Build and run with scripts/fuzz.sh:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=gnu11 -D_GNU_SOURCE
 *         -Iinclude -Isrc tests/fuzz/fuzz_event_decode.c src/telemetry/event_decode.c
 *         src/telemetry/event_json.c src/lib/rule_names.c -ljansson -lm
 * Seeds: tests/fuzz/corpus/events/. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "telemetry/event_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct event_record r;
	char *line = malloc(size + 1);
	char ts[32];
	int64_t ms;

	if (!line)
		return 0;
	memcpy(line, data, size);
	line[size] = '\0';

	if (event_parse_ts(line, &ms) == 0)
		event_format_ts(ms, ts, sizeof(ts));

	if (event_parse_line(line, &r) == 0) {
		/* Everything the table reads must be there and terminated. */
		if (!r.type || !r.action || !r.detail || !r.summary || r.error)
			abort();
		if (strlen(r.summary) >= 512 || r.detail[0] != '{')
			abort();
		event_format_ts(r.ts_ms, ts, sizeof(ts));
		event_record_free(&r);
	} else if (!r.error || r.root || r.detail || r.summary) {
		abort();
	}
	free(line);
	return 0;
}

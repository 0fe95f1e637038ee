/* Shared by the event JSON unit tests (test_event_json.c, the encoder;
 * test_event_json_decode.c, the decoder and hostile inputs): one fixed
 * context and event, so that both check lines with the same, known bytes. */
#ifndef SG_TEST_EVENT_FIXTURE_H
#define SG_TEST_EVENT_FIXTURE_H

/* 2026-11-21T19:30:00Z is 1795289400 s after the epoch; the events say
 * 5.123456789 s after boot. */
#define BOOT_TS_NS 5123456789ULL
#define TS         "2026-11-21T19:30:00.123Z"
#define HEAD                                                                               \
	"{\"ts\":\"" TS "\",\"node\":\"node-1\",\"tenant\":\"acme\",\"sandbox\":\"sb-1\"," \
	"\"batch_id\":\"batch-7\",\"run_id\":\"run-3\","

static const struct event_ctx ctx = {
	.node = "node-1",
	.tenant = "acme",
	.sandbox = "sb-1",
	.batch_id = "batch-7",
	.run_id = "run-3",
	.boot_to_real_ns = 1795289400LL * 1000000000 - 5000000000LL,
};

static struct sg_event base_event(uint32_t type, uint32_t action, uint32_t rule)
{
	struct sg_event e;

	memset(&e, 0, sizeof(e));
	e.ts_ns = BOOT_TS_NS;
	e.type = type;
	e.action = action;
	e.rule = rule;
	e.pid = 4242;
	e.ppid = 4200;
	e.uid = 61000;
	strcpy(e.comm, "python3");
	return e;
}

/* The line is valid JSON, and jansson writes the same values back as the
 * very same bytes: the fixed-format encoder is byte for byte jansson's. */
static void assert_jansson_roundtrip(const char *line)
{
	json_error_t err;
	json_t *j = json_loads(line, JSON_REJECT_DUPLICATES, &err);
	char *again;

	if (!j)
		fail_msg("invalid JSON: %s: %s", err.text, line);
	again = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(10));
	if (!again || strcmp(again, line))
		fail_msg("jansson writes it differently:\n ours:    %s\n jansson: %s", line,
			 again ? again : "(null)");
	free(again);
	json_decref(j);
}

static void set_args(struct sg_event *e, const char *args, size_t len, uint32_t args_len)
{
	memcpy(e->exec.args, args, len);
	e->exec.args_len = args_len;
}

static void set_comps(struct sg_event *e, uint32_t depth, const char *const *comps, int n)
{
	for (int i = 0; i < n; i++)
		strncpy(e->file.comps[i], comps[i], SG_COMP_LEN);
	e->file.depth = depth;
}

#endif

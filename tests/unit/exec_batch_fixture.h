/* Shared by the batch-mode unit tests (test_exec_batch.c, the causes,
 * retries and booking; test_exec_result.c, the result object): a fake
 * sandbox that plays a script of results, one per call, and one batch,
 * policy and outcome log per test group, so that both drive
 * exec_run_batch() the same way. */
#ifndef SG_TEST_EXEC_BATCH_FIXTURE_H
#define SG_TEST_EXEC_BATCH_FIXTURE_H

/* ---- the fake sandbox: a script of results, one per call ------------- */

struct step {
	int rc; /* < 0: platform error */
	enum sandbox_end end;
	int code; /* exit code or signal */
	int rule;
	const char *out;
	const char *err;
	const char *detail;
};

static struct step script[8];
static int n_script, calls;
static char last_stdin[4096];
static uint64_t last_timeout;

static int fake_run(const struct sandbox_spec *spec, struct sandbox_result *r)
{
	const struct step *s;

	assert_true(calls < n_script);
	s = &script[calls++];
	snprintf(last_stdin, sizeof(last_stdin), "%.*s", (int)spec->stdin_len,
		 (const char *)spec->stdin_data);
	last_timeout = spec->timeout_ms;
	snprintf(r->sandbox_id, sizeof(r->sandbox_id), "fake-%d", calls);
	r->cgroup_id = 1000 + calls;
	r->uid = 60000 + (uint32_t)calls;
	r->init_pid = 7000 + calls;
	r->wall_ms = 7;
	if (s->detail)
		snprintf(r->detail, sizeof(r->detail), "%s", s->detail);
	if (s->rc < 0)
		return s->rc;
	r->end = s->end;
	r->exit_code = s->end == SB_EXITED ? s->code : 0;
	r->signal = s->end == SB_SIGNALED ? s->code : 0;
	r->rule = s->rule;
	r->out = strdup(s->out ? s->out : "");
	r->out_len = strlen(r->out);
	r->err = strdup(s->err ? s->err : "");
	r->err_len = strlen(r->err);
	return 0;
}

static void play(int n, ...)
{
	va_list ap;

	va_start(ap, n);
	for (int i = 0; i < n; i++)
		script[i] = va_arg(ap, struct step);
	va_end(ap);
	n_script = n;
	calls = 0;
}

#define OK_OUT(o)      ((struct step){ .end = SB_EXITED, .out = (o) })
#define EXIT(c)        ((struct step){ .end = SB_EXITED, .code = (c) })
#define ENDED(e)       ((struct step){ .end = (e), .rule = -1 })
#define PLATFORM(e, d) ((struct step){ .rc = (e), .detail = (d) })

/* ---- fixtures --------------------------------------------------------- */

static char tmp[64];
static struct sg_policy policy;
static struct exec_ctx ctx;
static char *const argv_[] = { "/usr/bin/python3", "reward.py", NULL };
static const char batch_json[] =
	"{\"batch_id\": \"b1\", \"items\": [{\"prompt\": \"p\", \"completion\": \"a\"},"
	" {\"prompt\": \"p\", \"completion\": \"b\"}]}";
static struct exec_batch batch;

static int setup(void **state)
{
	char err[256];

	tmp_dir_executor(tmp, sizeof(tmp), "exec");
	policy_defaults(&policy);
	snprintf(policy.tenant, sizeof(policy.tenant), "acme");
	policy.limits.timeout_ms = 2000;
	ctx = (struct exec_ctx){ .policy = &policy,
				 .tenant = "acme",
				 .run_id = "run-1",
				 .argv = argv_,
				 .run = fake_run };
	assert_int_equal(exec_batch_parse(batch_json, strlen(batch_json), "batch", &batch, err,
					  sizeof(err)),
			 0);
	return 0;
}

static int teardown(void **state)
{
	exec_batch_free(&batch);
	tmp_dir_remove(tmp);
	return 0;
}

/* The journal's records, parsed: an array of objects. */
static json_t *outcomes(void)
{
	return journal_lines();
}

static const char *str(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static json_int_t num(json_t *o, const char *k)
{
	return json_integer_value(json_object_get(o, k));
}

static void truncate_log(void)
{
	journal_clear();
}

#endif

/* The journal record codec (see journal_record.h). */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include "abi/events.h"
#include "event_json.h"
#include "journal_record.h"
#include "lib/json_text.h"
#include "lib/rule_names.h"

#define ID_PREFIX "{\"v\":1,\"id\":\""

int journal_new_id(char *buf, size_t len)
{
	uint64_t r;

	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		return -errno;
	if ((size_t)snprintf(buf, len, "o-%016" PRIx64, r) >= len)
		return -ENAMETOOLONG;
	return 0;
}

/* A bounded C string field as JSON: null when empty. */
static json_t *text_or_null(const char *s, size_t cap)
{
	size_t n = strnlen(s, cap);

	return n ? json_string_lossy(s, n) : json_null();
}

static json_t *ts_json(uint64_t ms)
{
	char buf[32];

	return event_format_ts((int64_t)ms, buf, sizeof(buf)) ? json_null() : json_string(buf);
}

static json_t *text_or_null_c(const char *s)
{
	return s && *s ? json_string_lossy(s, strlen(s)) : json_null();
}

static json_t *limits_json(const struct journal_notes *n)
{
	const struct sg_limits *l = n->limits;

	if (!l)
		return json_null();
	return json_pack("{s:I, s:I, s:I, s:I, s:o, s:I}", "timeout_ms",
			 (json_int_t)(n->timeout_ms ? n->timeout_ms : l->timeout_ms), "memory_mb",
			 (json_int_t)l->memory_mb, "max_tasks", (json_int_t)l->max_tasks,
			 "max_forks", (json_int_t)l->max_forks, "cpu", json_real_or_null(l->cpu),
			 "output_bytes", (json_int_t)l->output_bytes);
}

/* The keys after "detail" (see the header). */
static void put_notes(json_t *j, const struct journal_notes *n)
{
	json_object_set_new(j, "reason", text_or_null_c(n->reason));
	json_object_set_new(j, "decision", text_or_null_c(n->decision));
	json_object_set_new(j, "uid", n->uid ? json_integer(n->uid) : json_null());
	json_object_set_new(j, "init_pid",
			    n->init_pid > 0 ? json_integer(n->init_pid) : json_null());
	json_object_set_new(j, "limits", limits_json(n));
	json_object_set_new(j, "policy", text_or_null_c(n->policy));
	json_object_set_new(j, "test", n->test ? json_integer(n->test - 1) : json_null());
	if (n->step || n->session_end) {
		json_object_set_new(j, "step", n->step ? json_integer(n->step) : json_null());
		json_object_set_new(j, "session_end", text_or_null_c(n->session_end));
		json_object_set_new(j, "cpu_ms",
				    n->cpu_ms >= 0 ? json_integer(n->cpu_ms) : json_null());
	}
}

/* A batch's canaries (src/exec/canary.h), null when it carried none. */
static json_t *canary_json(const struct sg_outcome *o)
{
	if (!o->canary_probes && !o->nondeterministic && !o->canary_detail[0])
		return json_null();
	return json_pack("{s:i, s:i, s:b, s:o}", "probes", (int)o->canary_probes, "failed",
			 (int)o->canary_failed, "nondeterministic", o->nondeterministic, "detail",
			 text_or_null(o->canary_detail, sizeof(o->canary_detail)));
}

int journal_record_encode(const struct sg_outcome *o, const char *detail, char **line, size_t *len)
{
	return journal_record_encode_notes(o, &(struct journal_notes){ .detail = detail }, line,
					   len);
}

int journal_record_encode_notes(const struct sg_outcome *o, const struct journal_notes *notes,
				char **line, size_t *len)
{
	static const struct journal_notes none = { .cpu_ms = -1 };
	const struct journal_notes *n = notes ? notes : &none;
	json_t *j;
	bool scored = o->n_scores > 0;

	*line = NULL;
	if (!strnlen(o->id, sizeof(o->id)) || !strnlen(o->tenant, sizeof(o->tenant)) ||
	    (unsigned)o->mode >= SG_MODE__COUNT || (unsigned)o->cause >= SG_CAUSE__COUNT)
		return -EINVAL;
	/* Insertion order is kept by jansson: "v" and "id" lead, so that the
	 * fold's id scan (journal_record_id) needs no parse. */
	j = json_object();
	if (!j)
		return -ENOMEM;
	json_object_set_new(j, "v", json_integer(JOURNAL_RECORD_VERSION));
	json_object_set_new(j, "id", text_or_null(o->id, sizeof(o->id)));
	json_object_set_new(j, "ts", ts_json(o->ts_ms));
	json_object_set_new(j, "started", ts_json(o->started_ms));
	json_object_set_new(j, "pid", json_integer(o->pid));
	json_object_set_new(j, "mode", json_string(mode_name(o->mode)));
	json_object_set_new(j, "tenant", text_or_null(o->tenant, sizeof(o->tenant)));
	json_object_set_new(j, "run_id", text_or_null(o->run_id, sizeof(o->run_id)));
	json_object_set_new(j, "batch_id",
			    json_string_lossy(o->batch_id,
					      strnlen(o->batch_id, sizeof(o->batch_id))));
	json_object_set_new(j, "sandbox", text_or_null(o->sandbox, sizeof(o->sandbox)));
	json_object_set_new(j, "cgroup_id", json_integer((json_int_t)o->cgroup_id));
	json_object_set_new(j, "attempt", json_integer(o->attempt));
	json_object_set_new(j, "final", json_boolean(o->final));
	json_object_set_new(j, "confirm",
			    o->confirm == SG_CONFIRM_NEXT         ? json_string("next")
			    : o->confirm == SG_CONFIRM_RUN        ? json_string("run")
			    : o->confirm == SG_CONFIRM_UNADMITTED ? json_string("unadmitted")
								  : json_null());
	json_object_set_new(j, "cause", json_string(cause_name(o->cause)));
	json_object_set_new(j, "class",
			    json_string(fault_class_name(outcome_class(o->mode, o->cause))));
	json_object_set_new(j, "rule",
			    rule_name(o->rule) ? json_string(rule_name(o->rule)) : json_null());
	json_object_set_new(j, "wall_ms", json_integer((json_int_t)o->wall_ms));
	json_object_set_new(j, "cpu_us",
			    o->cpu_known ? json_integer((json_int_t)o->cpu_us) : json_null());
	json_object_set_new(j, "mem_peak_bytes",
			    o->mem_peak_known ? json_integer((json_int_t)o->mem_peak_bytes)
					      : json_null());
	json_object_set_new(j, "n_scores", json_integer(o->n_scores));
	json_object_set_new(j, "score_mean",
			    scored ? json_real_or_null(o->score_mean) : json_null());
	json_object_set_new(j, "score_var", scored ? json_real_or_null(o->score_var) : json_null());
	json_object_set_new(j, "constant", json_boolean(o->constant));
	json_object_set_new(j, "invalid", json_boolean(o->invalid));
	json_object_set_new(j, "canary", canary_json(o));
	json_object_set_new(j, "artifact_refused",
			    text_or_null(o->artifact_refused, sizeof(o->artifact_refused)));
	json_object_set_new(j, "detail", text_or_null_c(n->detail));
	put_notes(j, n);
	*line = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	if (!*line)
		return -ENOMEM;
	*len = strlen(*line);
	return 0;
}

int journal_record_id(const char *line, size_t len, char *id, size_t id_len)
{
	size_t pl = strlen(ID_PREFIX);
	const char *start = line + pl, *end;

	if (len <= pl || memcmp(line, ID_PREFIX, pl))
		return -EBADMSG;
	end = memchr(start, '"', len - pl);
	/* A backslash would be an escape: leave that id to the parser. */
	if (!end || end == start || (size_t)(end - start) >= id_len ||
	    memchr(start, '\\', end - start))
		return -EBADMSG;
	memcpy(id, start, end - start);
	id[end - start] = '\0';
	return 0;
}

/* Copy a string field into a fixed buffer; "" for null when allowed. */
static int copy_field(json_t *root, const char *key, char *buf, size_t len, bool nullable)
{
	json_t *v = json_object_get(root, key);
	const char *s = json_string_value(v);

	if (!s && nullable && (!v || json_is_null(v))) {
		buf[0] = '\0';
		return 0;
	}
	if (!s || json_string_length(v) >= len || strlen(s) != json_string_length(v))
		return -1;
	memcpy(buf, s, json_string_length(v) + 1);
	return 0;
}

static int bad(char *why, size_t why_len, const char *what)
{
	snprintf(why, why_len, "%s", what);
	return -EBADMSG;
}

static uint64_t ts_field(json_t *root, const char *key)
{
	int64_t ms = 0;
	const char *s = json_string_value(json_object_get(root, key));

	return s && !event_parse_ts(s, &ms) && ms > 0 ? (uint64_t)ms : 0;
}

/* Absent or null in records of batches without canaries. */
static int canary_decode(json_t *root, struct sg_outcome *o)
{
	json_t *c = json_object_get(root, "canary");
	json_int_t probes = 0, failed = 0;
	int nondet = 0;

	if (!c || json_is_null(c))
		return 0;
	if (json_unpack(c, "{s:I, s:I, s:b}", "probes", &probes, "failed", &failed,
			"nondeterministic", &nondet) ||
	    probes < 0 || failed < 0 || failed > probes || probes > UINT32_MAX)
		return -1;
	o->canary_probes = (uint32_t)probes;
	o->canary_failed = (uint32_t)failed;
	o->nondeterministic = nondet;
	return copy_field(c, "detail", o->canary_detail, sizeof(o->canary_detail), true);
}

/* A count that may be null or missing (records from before metering). */
static int cost_field(json_t *root, const char *key, bool *known, uint64_t *v)
{
	json_t *x = json_object_get(root, key);

	*known = x && !json_is_null(x);
	if (!*known)
		return 0;
	if (!json_is_integer(x) || json_integer_value(x) < 0)
		return -1;
	*v = (uint64_t)json_integer_value(x);
	return 0;
}

static int decode(json_t *root, struct sg_outcome *o, char *why, size_t why_len)
{
	json_t *rule = json_object_get(root, "rule"), *refused;
	json_int_t v = 0, pid = 0, cgid = 0, attempt = -1, wall = -1, n_scores = 0;
	int final = 0, constant = 0, invalid = 0, mode, cause;
	const char *m = NULL, *c = NULL, *confirm;
	double mean = 0, var = 0;

	if (json_unpack(root, "{s:I, s:s, s:s, s:I, s:b, s:I}", "v", &v, "mode", &m, "cause", &c,
			"attempt", &attempt, "final", &final, "wall_ms", &wall))
		return bad(why, why_len, "expected v, mode, cause, attempt, final and wall_ms");
	if (v != JOURNAL_RECORD_VERSION)
		return bad(why, why_len, "unknown record version");
	if (copy_field(root, "id", o->id, sizeof(o->id), false) || !o->id[0])
		return bad(why, why_len, "id: expected a non-empty string of at most 127 bytes");
	if (copy_field(root, "tenant", o->tenant, sizeof(o->tenant), false) ||
	    !tenant_name_valid(o->tenant))
		return bad(why, why_len, "tenant: expected a valid tenant name");
	if (copy_field(root, "run_id", o->run_id, sizeof(o->run_id), true) ||
	    copy_field(root, "batch_id", o->batch_id, sizeof(o->batch_id), true) ||
	    copy_field(root, "sandbox", o->sandbox, sizeof(o->sandbox), true))
		return bad(why, why_len, "run_id, batch_id, sandbox: expected strings or null");
	if ((mode = mode_from_name(m)) < 0 || (cause = cause_from_name(c)) < 0)
		return bad(why, why_len, "unknown mode or cause");
	if (attempt < 0 || attempt > UINT32_MAX || wall < 0)
		return bad(why, why_len, "attempt and wall_ms: expected counts");
	if (json_unpack(root, "{s?I, s?I, s?I, s?b, s?b}", "pid", &pid, "cgroup_id", &cgid,
			"n_scores", &n_scores, "constant", &constant, "invalid", &invalid) ||
	    n_scores < 0 || n_scores > UINT32_MAX)
		return bad(why, why_len, "pid, cgroup_id, n_scores, constant, invalid: wrong type");
	if (cost_field(root, "cpu_us", &o->cpu_known, &o->cpu_us) ||
	    cost_field(root, "mem_peak_bytes", &o->mem_peak_known, &o->mem_peak_bytes))
		return bad(why, why_len, "cpu_us, mem_peak_bytes: expected counts or null");
	if (rule && !json_is_null(rule) && rule_from_name(json_string_value(rule)) < 0)
		return bad(why, why_len, "rule: expected a rule name or null");
	/* Absent in records written before artifact refusals were marked;
	 * truncated, never refused, when longer than the outcome keeps. */
	refused = json_object_get(root, "artifact_refused");
	if (refused && !json_is_null(refused) && !json_is_string(refused))
		return bad(why, why_len, "artifact_refused: expected a string or null");
	snprintf(o->artifact_refused, sizeof(o->artifact_refused), "%s",
		 json_string_value(refused) ?: "");
	if (cause == SG_CAUSE_TENANT_POLICY_VIOLATION && !o->artifact_refused[0] &&
	    rule_from_name(json_string_value(rule)) < 0)
		return bad(why, why_len,
			   "rule: a tenant_policy_violation names its rule (or the artifact "
			   "it refused)");
	/* Absent in records written before confirmation runs existed. */
	confirm = json_string_value(json_object_get(root, "confirm"));
	if (confirm && strcmp(confirm, "next") && strcmp(confirm, "run") &&
	    strcmp(confirm, "unadmitted"))
		return bad(why, why_len,
			   "confirm: expected \"next\", \"run\", \"unadmitted\" or null");
	if (canary_decode(root, o))
		return bad(why, why_len,
			   "canary: expected {probes, failed <= probes, "
			   "nondeterministic, detail} or null");
	mean = json_number_value(json_object_get(root, "score_mean"));
	var = json_number_value(json_object_get(root, "score_var"));
	o->mode = mode;
	o->cause = cause;
	o->rule = rule_from_name(json_string_value(rule));
	o->attempt = (uint32_t)attempt;
	o->final = final;
	o->confirm = !confirm                   ? SG_CONFIRM_NONE
		     : !strcmp(confirm, "next") ? SG_CONFIRM_NEXT
		     : !strcmp(confirm, "run")  ? SG_CONFIRM_RUN
						: SG_CONFIRM_UNADMITTED;
	o->wall_ms = (uint64_t)wall;
	o->pid = (int)pid;
	o->cgroup_id = (uint64_t)cgid;
	o->n_scores = (uint32_t)n_scores;
	o->score_mean = mean;
	o->score_var = var;
	o->constant = constant;
	o->invalid = invalid;
	o->ts_ms = ts_field(root, "ts");
	o->started_ms = ts_field(root, "started");
	return 0;
}

int journal_record_decode(const char *line, size_t len, struct sg_outcome *o, char *why,
			  size_t why_len)
{
	json_error_t jerr;
	json_t *root = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	int err;

	memset(o, 0, sizeof(*o));
	o->rule = -1;
	if (!json_is_object(root)) {
		snprintf(why, why_len, "not a JSON object: %s", root ? "" : jerr.text);
		json_decref(root);
		return -EBADMSG;
	}
	err = decode(root, o, why, why_len);
	json_decref(root);
	return err;
}

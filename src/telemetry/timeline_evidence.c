/* The policy lines behind a timeline, and its verdict (see
 * timeline_evidence.h). */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/rule_names.h"
#include "timeline_evidence.h"

const struct policy_text *policy_cache_get(struct policy_cache *c, const char *path,
					   const char *tenant, const char **why)
{
	char found[PATH_MAX], err[512];
	struct sg_policy_error perr;
	struct sg_policy p;
	void *grown;

	*why = NULL;
	err[0] = '\0';
	if (!path) { /* an older record: the tenant's file as it resolves now */
		if (policy_for_tenant(c->policy_dir, tenant, &p, &perr)) {
			policy_error_format(&perr, err, sizeof(err));
			snprintf(found, sizeof(found), "<policy of %s>", tenant ? tenant : "?");
		} else {
			snprintf(found, sizeof(found), "%s", p.source);
		}
		path = found;
	}
	for (size_t i = 0; i < c->n; i++) {
		if (strcmp(c->v[i].path, path))
			continue;
		*why = c->v[i].err;
		return c->v[i].err ? NULL : &c->v[i].pt;
	}
	grown = realloc(c->v, (c->n + 1) * sizeof(*c->v));
	if (!grown) {
		*why = "out of memory";
		return NULL;
	}
	c->v = grown;
	memset(&c->v[c->n], 0, sizeof(c->v[c->n]));
	c->v[c->n].path = strdup(path);
	if (err[0] || policy_text_load(path, &c->v[c->n].pt, err, sizeof(err)))
		c->v[c->n].err = strdup(err);
	*why = c->v[c->n].err;
	return c->v[c->n++].err ? NULL : &c->v[c->n - 1].pt;
}

void policy_cache_free(struct policy_cache *c)
{
	for (size_t i = 0; i < c->n; i++) {
		policy_text_free(&c->v[i].pt);
		free(c->v[i].path);
		free(c->v[i].err);
	}
	free(c->v);
	c->v = NULL;
	c->n = 0;
}

static json_t *line_json(const struct policy_text *pt, const struct policy_line *pl)
{
	return json_pack("{s:s, s:s, s:s, s:o, s:s}", "key", pl->key, "value", pl->value, "file",
			 pt->file, "line", pl->line ? json_integer(pl->line) : json_null(), "text",
			 pl->text);
}

static json_t *finding_json(const struct policy_text *pt, const struct policy_finding *f)
{
	json_t *listed = json_array();

	for (int i = 0; i < f->n_listed; i++)
		json_array_append_new(listed, line_json(pt, &f->listed[i]));
	return json_pack("{s:s, s:b, s:o, s:o, s:o}", "says", f->says, "matched", f->matched,
			 "entry", f->has_entry ? line_json(pt, &f->entry) : json_null(), "listed",
			 listed, "action", f->has_action ? line_json(pt, &f->action) : json_null());
}

static const char *detail_str(json_t *event, const char *key)
{
	return json_string_value(json_object_get(json_object_get(event, "detail"), key));
}

json_t *evidence_for_event(const struct policy_text *pt, json_t *event)
{
	const char *type = json_string_value(json_object_get(event, "type"));
	const char *rule = json_string_value(json_object_get(event, "rule"));
	json_t *detail = json_object_get(event, "detail");
	struct policy_finding f;

	if (!pt || !type)
		return NULL;
	if (!strcmp(type, "egress_denied"))
		policy_find_egress(pt, detail_str(event, "proto"), detail_str(event, "family"),
				   detail_str(event, "dst"), &f);
	else if (!strcmp(type, "file_denied") || !strcmp(type, "file_tripped"))
		policy_find_file(pt, detail_str(event, "path"),
				 json_is_true(json_object_get(detail, "write")), &f);
	else if (!strcmp(type, "exec") || !strcmp(type, "exec_denied"))
		policy_find_exec(pt, detail_str(event, "filename"), &f);
	else if (!strcmp(type, "fork_limit"))
		policy_find_limit(pt, detail_str(event, "which") ?: "max_tasks", &f);
	else if (!strcmp(type, "exit") && json_is_true(json_object_get(detail, "oom_killed")))
		policy_find_limit(pt, "memory_mb", &f);
	else if (!strcmp(type, "sandbox_killed") && rule && rule_from_name(rule) >= 0) {
		memset(&f, 0, sizeof(f));
		policy_find_action(pt, rule_from_name(rule), &f);
	} else
		return NULL;
	return finding_json(pt, &f);
}

json_t *evidence_for_attempt(const struct policy_text *pt, json_t *attempt)
{
	const char *cause = json_string_value(json_object_get(attempt, "cause"));
	const char *rule = json_string_value(json_object_get(attempt, "rule"));
	struct policy_finding f;

	if (!pt || !cause)
		return NULL;
	if (!strcmp(cause, "tenant_timeout"))
		policy_find_limit(pt, "timeout_ms", &f);
	else if (!strcmp(cause, "tenant_oom"))
		policy_find_limit(pt, "memory_mb", &f);
	else if (!strcmp(cause, "tenant_bad_output"))
		policy_find_limit(pt, "output_bytes", &f);
	else if (!strcmp(cause, "tenant_policy_violation") && rule && !strcmp(rule, "fork"))
		policy_find_limit(pt, "max_tasks", &f);
	else if (!strcmp(cause, "tenant_policy_violation") && rule && rule_from_name(rule) >= 0) {
		memset(&f, 0, sizeof(f));
		policy_find_action(pt, rule_from_name(rule), &f);
	} else
		return NULL;
	return finding_json(pt, &f);
}

/* ---- the verdict ---- */

struct text {
	char *buf;
	size_t len, cap;
};

static void put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		t->len = t->len + (size_t)n < t->cap ? t->len + (size_t)n : t->cap - 1;
}

static const char *str(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* "actions.egress = kill at acme.json:31", "egress.allow = 0 entries,
 * not in acme.json: the default". */
static void put_line(struct text *t, json_t *line)
{
	const char *file = str(line, "file"), *base = file ? strrchr(file, '/') : NULL;
	json_t *n = json_object_get(line, "line");

	base = base ? base + 1 : file ? file : "?";
	put(t, "%s = %s", str(line, "key"), str(line, "value") ?: "?");
	if (json_is_integer(n))
		put(t, " at %s:%lld", base, (long long)json_integer_value(n));
	else
		put(t, ", not in %s: the default", base);
}

static void put_finding(struct text *t, json_t *finding)
{
	json_t *entry = json_object_get(finding, "entry"),
	       *action = json_object_get(finding, "action");

	if (str(finding, "says") && *str(finding, "says"))
		put(t, "; %s", str(finding, "says"));
	if (json_is_object(entry)) {
		put(t, " (");
		put_line(t, entry);
		put(t, ")");
	}
	if (json_is_object(action)) {
		put(t, "; ");
		put_line(t, action);
	}
}

/* What the code did, in words, for an event type. */
static const char *deed(const char *type)
{
	if (!strcmp(type, "egress_denied"))
		return "tried to reach";
	if (!strcmp(type, "file_denied") || !strcmp(type, "file_tripped"))
		return "opened";
	if (!strcmp(type, "exec_denied"))
		return "executed";
	if (!strcmp(type, "fork_limit"))
		return "forked past its limit:";
	return type;
}

/* The attempt's first denied, tripped or killing event with a finding:
 * what the code did, the lines that decided it, and the kill. false:
 * none. */
static bool put_event_evidence(struct text *t, json_t *attempt, const char *lead)
{
	json_t *e, *kill = NULL, *first = NULL;
	size_t i;

	json_array_foreach(json_object_get(attempt, "events"), i, e)
	{
		const char *action = str(e, "action"), *type = str(e, "type");
		if (!kill && type && !strcmp(type, "sandbox_killed"))
			kill = e;
		else if (!first && action && strcmp(action, "allowed") &&
			 json_is_object(json_object_get(e, "policy")))
			first = e;
	}
	if (!first)
		return false;
	put(t, "%sat %.12s UTC its code", lead,
	    strlen(str(first, "ts") ?: "") > 11 ? str(first, "ts") + 11 : "?");
	if (json_is_integer(json_object_get(first, "pid")))
		put(t, " (pid %lld, %s)",
		    (long long)json_integer_value(json_object_get(first, "pid")),
		    str(first, "comm") ?: "?");
	put(t, " %s %s: %s", deed(str(first, "type")), str(first, "summary"), str(first, "action"));
	put_finding(t, json_object_get(first, "policy"));
	if (kill) {
		json_t *ms = json_object_get(json_object_get(kill, "detail"), "kill_latency_ms");
		put(t, "; sandguard emptied the sandbox");
		if (json_is_number(ms))
			put(t, " %.1f ms later", json_number_value(ms));
	}
	return true;
}

static const char *class_sentence(json_t *batch)
{
	const char *cls = str(batch, "class"), *cause = str(batch, "cause");

	if (cause && !strcmp(cause, "tenant_paused"))
		return "No code of the tenant ran.";
	if (!cls)
		return "";
	if (!strcmp(cls, "tenant_code"))
		return "This was the tenant's code, not the platform.";
	if (!strcmp(cls, "platform"))
		return "This was a platform error, not the tenant's fault: it does not count "
		       "against the tenant.";
	if (!strcmp(cls, "verdict"))
		return "This was the model-written program's verdict, nobody's fault.";
	if (json_is_object(json_object_get(batch, "summary")))
		return "Its verdict went to the trainer: a model-written program's failures are "
		       "its verdict, nobody's fault.";
	return "Its scores went to the trainer.";
}

/* An attempt's evidence, else its reason (with the limit or action behind
 * its cause). */
static void put_why(struct text *t, json_t *batch, json_t *attempt)
{
	if (attempt && put_event_evidence(t, attempt, ""))
		return;
	put(t, "%s", str(attempt, "reason") ?: str(batch, "detail") ?: "no reason recorded");
	if (json_is_object(json_object_get(attempt, "policy")))
		put_finding(t, json_object_get(attempt, "policy"));
}

/* A canary finding is news whatever the cause: the reward can be inflated,
 * or scores the same item differently (src/exec/canary.h). */
static void put_canary(struct text *t, json_t *c)
{
	json_int_t failed = json_integer_value(json_object_get(c, "failed"));

	if (failed)
		put(t,
		    " CANARY: %lld of its %lld probes scored outside their accepted range: "
		    "the tenant's reward can be inflated (%s).",
		    (long long)failed, (long long)json_integer_value(json_object_get(c, "probes")),
		    str(c, "detail") ?: "no detail");
	else if (json_is_true(json_object_get(c, "nondeterministic")))
		put(t, " NON-DETERMINISM: %s.", str(c, "detail") ?: "no detail");
}

char *verdict_of(json_t *batch)
{
	json_t *attempts = json_object_get(batch, "attempts"), *summary, *a;
	const char *run = str(batch, "run_id"), *rule = str(batch, "rule");
	struct text t = { .cap = 2048 };
	size_t n = json_array_size(attempts), i, retried = 0;

	t.buf = calloc(1, t.cap);
	if (!t.buf)
		return NULL;
	put(&t, "batch %s of tenant %s", str(batch, "batch_id"), str(batch, "tenant"));
	if (run)
		put(&t, " (run %s)", run);
	if (!json_is_true(json_object_get(batch, "booked"))) {
		put(&t, ": no final outcome is booked (the executor is still running, or died "
			"before booking it; an orphan is booked as platform_error when reaped)");
		return t.buf;
	}
	put(&t, " was booked %s", str(batch, "cause"));
	if (rule)
		put(&t, " (rule %s)", rule);
	json_array_foreach(attempts, i, a)
		retried += str(a, "decision") && !strncmp(str(a, "decision"), "retried", 7);
	summary = json_object_get(batch, "summary");
	if (json_is_object(summary)) { /* a verifier request: its runs, then its verdict */
		put(&t, " after %zu sandbox run%s", n, n == 1 ? "" : "s");
		if (str(summary, "detail"))
			put(&t, ": %s", str(summary, "detail"));
		json_array_foreach(attempts, i, a) /* the first run the policy stopped */
			if (put_event_evidence(&t, a, "; ")) break;
	} else if (n == 1 && json_integer_value(json_object_get(json_array_get(attempts, 0),
								"attempt")) == 0) {
		put(&t, " at admission, before any sandbox ran: %s",
		    str(batch, "detail") ?: "no detail recorded");
	} else {
		put(&t, " after %zu attempt%s", n, n == 1 ? "" : "s");
		if (retried)
			put(&t, " (%zu retried)", retried);
		put(&t, ": ");
		put_why(&t, batch, json_array_get(attempts, n ? n - 1 : 0));
	}
	put(&t, ". %s", class_sentence(batch));
	put_canary(&t, json_object_get(batch, "canary"));
	while (t.len && t.buf[t.len - 1] == ' ')
		t.buf[--t.len] = '\0';
	return t.buf;
}

#include <string.h>
#include <stdio.h>
#include "abi/events.h"
#include "lib/rule_names.h"
#include "outcome_json.h"

json_t *outcome_to_json(const struct sg_outcome *o)
{
	return json_pack(
		"{s:s, s:s, s:s, s:s, s:s, s:I, s:s, s:o, s:i, s:b, s:I, s:i, s:f, s:f, s:b, s:b}",
		"op", "report", "tenant", o->tenant, "run_id", o->run_id, "batch_id", o->batch_id,
		"sandbox", o->sandbox, "cgroup_id", (json_int_t)o->cgroup_id, "cause",
		cause_name(o->cause), "rule",
		rule_name(o->rule) ? json_string(rule_name(o->rule)) : json_null(), "attempt",
		(int)o->attempt, "final", o->final, "wall_ms", (json_int_t)o->wall_ms, "n_scores",
		(int)o->n_scores, "score_mean", o->score_mean, "score_var", o->score_var,
		"constant", o->constant, "invalid", o->invalid);
}

int outcome_from_json(json_t *j, struct sg_outcome *o, char *why, size_t whylen)
{
	const char *tenant, *cause, *run_id = "", *batch_id = "", *sandbox = "";
	json_t *rule = NULL;
	json_int_t cgid = 0, wall = 0;
	int attempt = 1, final = 1, n = 0, constant = 0, invalid = 0;
	double mean = 0, var = 0;
	int c;

	memset(o, 0, sizeof(*o));
	if (json_unpack(
		    j,
		    "{s:s, s:s, s?s, s?s, s?s, s?I, s?o, s?i, s?b, s?I, s?i, s?F, s?F, s?b, s?b}",
		    "tenant", &tenant, "cause", &cause, "run_id", &run_id, "batch_id", &batch_id,
		    "sandbox", &sandbox, "cgroup_id", &cgid, "rule", &rule, "attempt", &attempt,
		    "final", &final, "wall_ms", &wall, "n_scores", &n, "score_mean", &mean,
		    "score_var", &var, "constant", &constant, "invalid", &invalid)) {
		snprintf(why, whylen,
			 "expected tenant and cause (strings) and typed optional fields");
		return -1;
	}
	c = cause_from_name(cause);
	if (c < 0) {
		snprintf(why, whylen, "unknown cause '%.64s'", cause);
		return -1;
	}
	snprintf(o->tenant, sizeof(o->tenant), "%s", tenant);
	snprintf(o->run_id, sizeof(o->run_id), "%s", run_id);
	snprintf(o->batch_id, sizeof(o->batch_id), "%s", batch_id);
	snprintf(o->sandbox, sizeof(o->sandbox), "%s", sandbox);
	o->cgroup_id = cgid;
	o->cause = c;
	o->rule = rule_from_name(json_string_value(rule));
	o->attempt = attempt;
	o->final = final;
	o->wall_ms = wall;
	o->n_scores = n;
	o->score_mean = mean;
	o->score_var = var;
	o->constant = constant;
	o->invalid = invalid;
	return 0;
}

/* The policy behind a timeline (timeline.c): each enforcement event and
 * each attempt's cause against the policy file's lines, and the batch's
 * one-line verdict. Internal to timeline.c. */
#ifndef SG_TIMELINE_EVIDENCE_H
#define SG_TIMELINE_EVIDENCE_H
#include <jansson.h>
#include <stdint.h>
#include "policy/policy_locate.h"

/* The policy files a document needs, each read once. */
struct policy_cache {
	struct {
		char *path;
		struct policy_text pt; /* valid when !err */
		char *err;             /* why it could not be read */
	} * v;
	size_t n;
	const char *policy_dir; /* for records that name no file */
};

/* The policy file at `path`, or (NULL: a record that names none) the
 * tenant's in the policy directory. NULL with *why when it cannot be read. */
const struct policy_text *policy_cache_get(struct policy_cache *c, const char *path,
					   const char *tenant, const char **why);
void policy_cache_free(struct policy_cache *c);

/* The finding behind an event ("policy" key), or NULL when the event
 * type has none. */
json_t *evidence_for_event(const struct policy_text *pt, json_t *event);

/* The limit or action behind an attempt's cause, or NULL. */
json_t *evidence_for_attempt(const struct policy_text *pt, json_t *attempt);

/* The verdict line of a finished batch document. */
char *verdict_of(json_t *batch);

#endif

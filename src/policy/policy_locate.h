/* Which line of a tenant's policy decided an enforcement event: the entry
 * that matched (an egress allow rule, a read-only path, an exec glob), or
 * the list none of whose entries matched, and the action or limit that
 * applied, each as file:line with the line's text. For on-call
 * (`sandguard explain`): the same matching the agent compiles into maps,
 * re-run on the event's details against the policy file as it is now. */
#ifndef SG_POLICY_LOCATE_H
#define SG_POLICY_LOCATE_H
#include <stdbool.h>
#include <stddef.h>
#include "policy.h"

/* A policy file, its text and what it parsed to. */
struct policy_text {
	char file[SG_POLICY_PATHLEN]; /* as given, "<embedded>" for the built-in default */
	char *text;                   /* the bytes parsed (malloc'd) */
	size_t len;
	struct sg_policy policy;
};

/* Read and parse `path` ("<embedded>": the built-in default). 0, or
 * -errno / -EINVAL with `err` saying why (file:line:col for a bad file). */
int policy_text_load(const char *path, struct policy_text *pt, char *err, size_t err_len);
void policy_text_free(struct policy_text *pt);

/* One place in the file: the value at `key` (line 0: the key is not in
 * the file, so the built-in default applies). */
struct policy_line {
	char key[64];    /* "egress.allow[2]", "actions.egress", "limits.max_tasks" */
	char value[128]; /* what applied: "kill", "1500", "/usr", "10.0.0.0/8 port 443 tcp",
			  * "3 entries" */
	int line;        /* 1-based; 0 = not in the file (the default applied) */
	char text[160];  /* that line, trimmed (cut at 159 bytes) */
};

/* What the policy says about one event. */
struct policy_finding {
	bool matched;                 /* an entry matched (`entry` is it) */
	bool has_entry;               /* `entry` is set: the matching entry, or the list */
	struct policy_line entry;     /* ... none of whose entries matched */
	int n_listed;                 /* none matched: the list's first entries, */
	struct policy_line listed[4]; /* so that a reader sees what was allowed */
	bool has_action;              /* `action` is set */
	struct policy_line action;    /* the action (actions.<rule>) or the limit */
	char says[256]; /* one sentence: "no entry of egress.allow matched udp 10.0.0.1:53" */
};

/* An egress attempt: proto "tcp"/"udp"/... (NULL: any), family "inet",
 * "inet6" or "unix", dst as events write it ("10.0.0.1:53", "[::1]:53",
 * a unix path or "@abstract"). */
void policy_find_egress(const struct policy_text *pt, const char *proto, const char *family,
			const char *dst, struct policy_finding *f);
/* A file opened outside the scratch: matched against files.read_only. */
void policy_find_file(const struct policy_text *pt, const char *path, bool write,
		      struct policy_finding *f);
/* An exec of `filename`: matched against exec.allow. */
void policy_find_exec(const struct policy_text *pt, const char *filename, struct policy_finding *f);
/* A limit ("timeout_ms", "memory_mb", "max_tasks", "max_forks", ...). */
void policy_find_limit(const struct policy_text *pt, const char *limit, struct policy_finding *f);
/* The action for a rule (enum sg_rule): actions.<rule>. */
void policy_find_action(const struct policy_text *pt, int rule, struct policy_finding *f);

#endif

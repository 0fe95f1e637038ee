/* Each attempt's sandbox, in the order they ran: what a result carries so
 * that on-call can join it to the kernel's events and to the outcome
 * journal (`sandguard explain --sandbox S`). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "exec.h"
#include "lib/json_text.h"
#include "lib/log.h"

int exec_attempts_add(struct exec_attempts *a, uint32_t attempt, int test, bool confirmation,
		      const char *sandbox, enum sg_cause cause)
{
	struct exec_attempt *v = realloc(a->v, (a->n + 1) * sizeof(*v));

	if (!v) {
		sg_error("exec: out of memory: attempt %u (sandbox %s) is missing from the result",
			 attempt, sandbox);
		return -ENOMEM;
	}
	a->v = v;
	v[a->n] = (struct exec_attempt){
		.attempt = attempt, .test = test, .cause = cause, .confirmation = confirmation
	};
	snprintf(v[a->n].sandbox, sizeof(v[a->n].sandbox), "%s", sandbox ? sandbox : "");
	a->n++;
	return 0;
}

void exec_attempts_free(struct exec_attempts *a)
{
	free(a->v);
	a->v = NULL;
	a->n = 0;
}

json_t *exec_attempts_json(const struct exec_attempts *a)
{
	json_t *arr = json_array();

	for (size_t i = 0; arr && i < a->n; i++) {
		const struct exec_attempt *x = &a->v[i];
		json_t *o =
			json_pack("{s:I, s:o, s:s}", "attempt", (json_int_t)x->attempt, "sandbox",
				  x->sandbox[0] ? json_string_lossy(x->sandbox, strlen(x->sandbox))
						: json_null(),
				  "cause", cause_name(x->cause));
		if (o && x->test >= 0)
			json_object_set_new(o, "test", json_integer(x->test));
		if (o && x->confirmation)
			json_object_set_new(o, "confirmation", json_true());
		json_array_append_new(arr, o);
	}
	return arr;
}

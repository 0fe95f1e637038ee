/* The attempts of one batch, run-once request, verifier test or compile:
 * one loop for every mode (exec_attempt()), so that a confirmation, a
 * retry and a failed booking mean the same in each; and each attempt's
 * sandbox, in the order they ran: what a result carries so that on-call
 * can join it to the kernel's events and to the outcome journal
 * (`sandguard explain --sandbox S`). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "exec_internal.h"
#include "lib/json_text.h"
#include "lib/log.h"

void exec_attempt(const struct exec_attempt_plan *p)
{
	const struct exec_mode_ops *ops = p->ops;
	struct sandbox_spec *spec = p->spec;
	/* Without the caller's box, each attempt takes a fresh sandbox and
	 * retires it once booked. */
	struct exec_box own = { 0 }, *box = p->box ? p->box : &own;

	for (uint32_t attempt = 1;; attempt++, spec->attempt++) {
		struct exec_try t = { .attempt = attempt, .box = box, .spec = spec };
		char id[SG_ID_BUF];
		bool due;
		int err;

		if (ops->before)
			ops->before(p->self, spec);
		t.rc = exec_box_run(p->ctx, box, spec, &t.r);
		ops->judge(p->self, &t);
		/* A confirmation comes whatever the mode's failure rule: a
		 * tenant that pauses or skips at its first fault is not judged
		 * on a run the node starved (exec_confirm.c). */
		due = t.cause == SG_CAUSE_TENANT_TIMEOUT && exec_confirm_wanted(t.rc, &t.r, spec);
		t.confirm = due &&
			    exec_confirm_admit(p->ctx, spec, p->line, t.detail, sizeof(t.detail));
		t.again = ops->again(p->self, &t);
		/* The attempt is the final only where its record owes one: a
		 * verifier's request books its own. */
		struct exec_booking b = {
			.mode = spec->mode,
			.batch_id = p->batch_id,
			.attempt = attempt,
			.final = !t.again && spec->record->owes_final,
			.retried = t.again,
			.confirm = exec_confirm_state(t.confirm, due || t.unadmitted, spec),
			.cause = t.cause,
			.rule = t.rule,
			.wall_ms = t.r.wall_ms,
			.run = &t.r,
			.spec = spec,
			.invalid = p->bad_output_invalid && t.cause == SG_CAUSE_TENANT_BAD_OUTPUT,
			.detail = t.detail,
			.group = p->group,
		};
		if (ops->book)
			ops->book(p->self, &t, &b);
		/* A record that cannot follow makes this booking the final. */
		exec_owed_before_booking(spec->record, &b, id, sizeof(id));
		t.again = b.retried;
		err = exec_book(p->ctx, &b);
		if (err) { /* unbooked: what ran is withheld, and nothing runs again */
			t.cause = exec_book_failed(err, t.cause, t.detail, sizeof(t.detail));
			t.rule = -1;
			t.again = false;
			t.unbooked = true;
		}
		if (p->runs)
			exec_attempts_add(p->runs, attempt, -1, spec->confirm, t.r.sandbox_id,
					  t.cause);
		ops->take(p->self, &t);
		sandbox_result_free(&t.r);
		exec_box_done(p->ctx, &own); /* none with the caller's box */
		if (!t.again)
			return;
		exec_confirm_next(p->ctx, spec, b.confirm == SG_CONFIRM_NEXT);
	}
}

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

/* What a killed executor leaves owed: the batch's run record, kept across
 * its attempts (src/sandbox/sandbox_record.h has the states). The sandbox
 * layer writes it when a run starts; here it is brought up to date before
 * each booking, so that a reaper finding it after any instant of the
 * executor's death books the batch's final outcome exactly once: the
 * executor either appended it already, under the same id, or did not. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "exec_internal.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "telemetry/journal_record.h"

void exec_owed_init(struct sb_run_record *rr, const struct exec_ctx *ctx, const char *mode,
		    const char *batch_id, bool owes_final)
{
	struct sb_record *rec = &rr->rec;

	memset(rr, 0, sizeof(*rr));
	rr->lk.fd = -1;
	rr->owes_final = owes_final;
	rec->kind = SB_RECORD_RUN;
	rec->executor = getpid();
	rec->started_ms = clock_ms(CLOCK_REALTIME);
	snprintf(rec->tenant, sizeof(rec->tenant), "%s", ctx->tenant);
	snprintf(rec->run_id, sizeof(rec->run_id), "%s", ctx->run_id ? ctx->run_id : "");
	snprintf(rec->batch_id, sizeof(rec->batch_id), "%s", batch_id ? batch_id : "");
	snprintf(rec->mode, sizeof(rec->mode), "%s", mode);
}

int exec_owed_final_first(struct sb_run_record *rr, char *detail, size_t len)
{
	char why[512];
	int err = journal_new_id(rr->rec.final_id, sizeof(rr->rec.final_id));

	if (err) {
		snprintf(detail, len, "platform error: cannot make an outcome id: %s",
			 strerror(-err));
		return err;
	}
	err = sb_run_record_write(rr, &rr->rec, why, sizeof(why));
	if (err) {
		snprintf(detail, len, "platform error: %s", why);
		sg_error("exec: %s/%s: %s", rr->rec.tenant, rr->rec.batch_id, why);
	}
	return err;
}

/* The final id the record owes that no run of it stands for (a request's
 * own, or the one owed between two attempts); NULL when none. */
static const char *owed_alone(const struct sb_run_record *rr)
{
	const struct sb_record *rec = &rr->rec;

	if (!rr->lk.path[0] || !rec->final_id[0] || !strcmp(rec->final_id, rec->outcome))
		return NULL;
	return rec->final_id;
}

void exec_owed_before_booking(struct sb_run_record *rr, struct exec_booking *b, char *id,
			      size_t len)
{
	struct sb_record *rec = &rr->rec, want = rr->rec;
	const char *alone = owed_alone(rr);
	char detail[512];
	/* The booking's id, as exec_book() would pick it; a final without a
	 * run of its own is the one the record owes. */
	int err = exec_booking_id(b, b->final ? alone : NULL, id, len);

	b->outcome_id = id;
	if (!err && b->final && alone && !strcmp(id, alone))
		return; /* the final it owes */

	want.attempt = b->attempt;
	snprintf(want.outcome, sizeof(want.outcome), "%s", err ? "" : id);
	if (!rr->owes_final)
		want.final_id[0] = '\0';
	else if (b->final)
		snprintf(want.final_id, sizeof(want.final_id), "%s", id);
	else if (!alone || !strcmp(alone, id))
		err = err ?: journal_new_id(want.final_id, sizeof(want.final_id));
	if (!err && rr->lk.path[0] && !strcmp(want.outcome, rec->outcome) &&
	    !strcmp(want.final_id, rec->final_id))
		return; /* it owes that already */
	if (!err) {
		err = sb_run_record_write(rr, &want, detail, sizeof(detail));
	} else {
		snprintf(detail, sizeof(detail), "cannot make an outcome id: %s", strerror(-err));
	}
	if (!err)
		return;
	/* The record still owes what it owed: when it owes the batch's final,
	 * this booking becomes that final, under that id, and nothing runs
	 * again; so a death after the append leaves one final, not two. */
	sg_error("exec: %s/%s attempt %u: the in-flight record cannot follow (%s): this attempt "
		 "is the batch's final",
		 rec->tenant, rec->batch_id, b->attempt, detail);
	if (!rr->owes_final)
		return;
	b->final = true;
	b->retried = false;
	if (rr->lk.path[0] && rec->final_id[0])
		snprintf(id, len, "%s", rec->final_id);
}

void exec_owed_idle(struct sb_run_record *rr)
{
	sb_run_record_idle(rr); /* deleted if it cannot be: the next run makes one */
}

void exec_owed_done(struct sb_run_record *rr)
{
	sb_record_release(&rr->lk);
}

/* The agent's fold of the outcome journal, its checkpoint and the journal's
 * disk (see agent_outcomes.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "agent.h"
#include "agent_health.h"
#include "agent_metrics.h"
#include "lib/clock.h"
#include "lib/fs_util.h"
#include "lib/log.h"
#include "telemetry/event_json.h"
#include "health/health.h"
#include "telemetry/ledger.h"

#define FOLD_CHUNK 2048 /* records per turn of the loop: nothing else waits long */

const char *ledger_rebuild_name(enum ledger_rebuild r)
{
	static const char *const names[REBUILD__COUNT] = {
		[REBUILD_MISSING] = "missing",       [REBUILD_CORRUPT] = "corrupt",
		[REBUILD_UNREADABLE] = "unreadable", [REBUILD_TENANTS] = "tenant_rows",
		[REBUILD_GAP] = "journal_gap",
	};
	return (unsigned)r < REBUILD__COUNT ? names[r] : "unknown";
}

static void rebuilt(struct agent *a, enum ledger_rebuild why, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void rebuilt(struct agent *a, enum ledger_rebuild why, const char *fmt, ...)
{
	struct outcomes_shown *s = &a->outcomes.shown;
	va_list ap;

	pthread_mutex_lock(&a->lock);
	s->rebuilds[why]++;
	s->last_rebuild_at = (uint64_t)time(NULL);
	va_start(ap, fmt);
	vsnprintf(s->last_rebuild, sizeof(s->last_rebuild), fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&a->lock);
	sg_error("ledger: %s", s->last_rebuild);
}

/* The checkpoint: where the counts start from, and what the log and the
 * status say about it. Returns the position to fold from. */
static int load_checkpoint(struct agent *a, struct journal_pos *from,
			   struct ledger_load_report *rep)
{
	struct agent_outcomes *ao = &a->outcomes;
	struct ledger_checkpoint cp = { 0 };
	uint64_t oldest = journal_oldest(ao->journal.dir);
	int err = ledger_load(a->ledger, ao->checkpoint, 0, &cp, rep);

	*from = (struct journal_pos){ 0, 0 };
	switch (err) {
	case 0:
		if (cp.has_position)
			*from = cp.pos;
		sg_info("ledger: restored %zu tenants from %s (journal segment %" PRIu64
			" offset %" PRIu64 "%s)",
			ledger_tenant_count(a->ledger), ao->checkpoint, cp.pos.segment,
			cp.pos.offset, cp.has_position ? "" : "; a version 1 file: all of it");
		if (rep->n_dropped)
			rebuilt(a, REBUILD_TENANTS,
				"%s: the rows of %zu tenants were unreadable (%s): those tenants' "
				"outcomes are rebuilt from the retained journal, their events and "
				"kills start over; every other tenant was restored",
				ao->checkpoint, rep->n_dropped, rep->why);
		return 0;
	case -ENOENT:
		if (oldest)
			rebuilt(a, REBUILD_MISSING,
				"no checkpoint at %s: counts rebuilt from the journal's retained "
				"segments (%" PRIu64 " on); events and kills start over",
				ao->checkpoint, oldest);
		return 0;
	case -EBADMSG:
		rebuilt(a, REBUILD_CORRUPT,
			"the checkpoint %s is corrupt (%s); kept as %s; counts rebuilt from the "
			"journal's retained segments, events and kills start over",
			ao->checkpoint, rep->why, rep->aside);
		return 0;
	case -ENOMEM:
		return err;
	default:
		rebuilt(a, REBUILD_UNREADABLE,
			"the checkpoint %s: %s; counts rebuilt from the journal's retained "
			"segments; no checkpoint can be saved until the path is fixed",
			ao->checkpoint, rep->why);
		return 0;
	}
}

/* The ledger's question (ledger_set_policy_check): whether a tenant has a
 * policy file of its own, i.e. is a configured customer, booked under its
 * name however many clients invented names before it. Asked of the file,
 * not of the policy slots: it is called from the threads that book, and
 * a file the agent has not compiled yet is still a customer's. */
static bool tenant_has_policy(const char *tenant, void *ctx)
{
	const struct agent *a = ctx;
	char path[PATH_MAX];
	struct stat st;

	if (!strcmp(tenant, "default"))
		return false;
	if (snprintf(path, sizeof(path), "%s/%s.json", a->opts.policy_dir, tenant) >=
	    (int)sizeof(path))
		return false;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int agent_outcomes_start(struct agent *a)
{
	struct agent_outcomes *ao = &a->outcomes;
	struct ledger_load_report rep;
	struct journal_pos from;
	int err, primed;

	ao->inotify_fd = -1;
	if ((err = journal_init(&ao->journal, a->opts.state_dir)))
		return err;
	snprintf(ao->checkpoint, sizeof(ao->checkpoint), "%s/ledger.json", a->opts.state_dir);
	if ((err = fs_mkdir_p(ao->journal.dir, 0755)))
		sg_warn("journal: cannot create %s: %s", ao->journal.dir, strerror(-err));
	ledger_set_policy_check(a->ledger, tenant_has_policy, a);
	err = load_checkpoint(a, &from, &rep);
	if (!err)
		err = fold_init(&ao->fold, ao->journal.dir, a->ledger, &from);
	if (!err) {
		ao->fold.observe = agent_health_observe;
		ao->fold.observe_ctx = a;
		primed = fold_prime(&ao->fold, rep.dropped, rep.n_dropped);
		if (primed < 0)
			err = primed;
		else if (primed)
			sg_info("journal: %d records before the checkpoint's position read for their "
				"ids",
				primed);
	}
	ledger_load_report_free(&rep);
	if (err)
		return err;
	ao->saved = from;
	ao->pending = true;
	ao->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (ao->inotify_fd < 0 ||
	    inotify_add_watch(ao->inotify_fd, ao->journal.dir,
			      IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE) < 0)
		sg_warn("journal: cannot watch %s (%s): folding once a second", ao->journal.dir,
			strerror(errno));
	return 0;
}

/* Fold one chunk; note gaps; copy the figures for status and metrics. */
static void fold_chunk(struct agent *a)
{
	struct agent_outcomes *ao = &a->outcomes;
	int n = fold_run(&ao->fold, FOLD_CHUNK);

	if (n < 0)
		sg_error("journal: folding %s: %s", ao->journal.dir, strerror(-n));
	ao->pending = n == FOLD_CHUNK;
	if (ao->fold.stats.gap_segments > ao->gaps_seen) {
		rebuilt(a, REBUILD_GAP,
			"%" PRIu64 " journal segments of %s were deleted before they were folded: "
			"their outcomes are missing from the ledger (the agent was down while "
			"more than %u segments were written)",
			ao->fold.stats.gap_segments - ao->gaps_seen, ao->journal.dir,
			ao->journal.keep);
		ao->gaps_seen = ao->fold.stats.gap_segments;
	}
	pthread_mutex_lock(&a->lock);
	ao->shown.fold = ao->fold.stats;
	ao->shown.pos = fold_position(&ao->fold);
	pthread_mutex_unlock(&a->lock);
}

void agent_outcomes_fold(struct agent *a, bool notified)
{
	char buf[4096];

	if (notified)
		while (read(a->outcomes.inotify_fd, buf, sizeof(buf)) > 0)
			; /* which file does not matter: the fold reads on from where it is */
	fold_chunk(a);
}

bool agent_outcomes_pending(struct agent *a)
{
	return a->outcomes.pending;
}

int agent_outcomes_fd(struct agent *a)
{
	return a->outcomes.inotify_fd;
}

static void save_checkpoint(struct agent *a)
{
	struct agent_outcomes *ao = &a->outcomes;
	struct journal_pos pos = fold_position(&ao->fold);
	int err;

	if (!a->ledger_dirty && pos.segment == ao->saved.segment && pos.offset == ao->saved.offset)
		return;
	/* The checkpoint counts only what is on disk. Executors sync a
	 * request's records together, before its result
	 * (journal_group_commit()): a record folded before that sync could
	 * still be taken by a power loss, and a ledger saved past it would
	 * count an outcome the journal no longer holds. */
	err = journal_sync_segments(ao->journal.dir, ao->saved.segment, pos.segment);
	if (!err)
		err = ledger_save(a->ledger, ao->checkpoint, &pos);
	pthread_mutex_lock(&a->lock);
	if (err) {
		char was[sizeof(ao->shown.checkpoint_error)];
		snprintf(was, sizeof(was), "%s", ao->shown.checkpoint_error);
		snprintf(ao->shown.checkpoint_error, sizeof(ao->shown.checkpoint_error),
			 "cannot save %s: %s (nothing is lost: the journal has every outcome, "
			 "and a restart folds it from the last checkpoint)",
			 ao->checkpoint, strerror(-err));
		ao->shown.checkpoint_failures++;
		if (strcmp(was, ao->shown.checkpoint_error))
			sg_error("ledger: %s", ao->shown.checkpoint_error);
	} else {
		if (ao->shown.checkpoint_error[0])
			sg_info("ledger: checkpoint %s saved again", ao->checkpoint);
		ao->shown.checkpoint_error[0] = '\0';
		ao->shown.checkpoint_saved_at = (uint64_t)time(NULL);
		ao->saved = pos;
		a->ledger_dirty = false;
	}
	pthread_mutex_unlock(&a->lock);
}

bool agent_outcomes_ready(struct agent *a, char *why, size_t len)
{
	uint64_t free_bytes;
	int err = journal_space(&a->outcomes.journal, &free_bytes);

	if (err == -ENOSPC) {
		char d[PATH_MAX + 96];
		journal_space_describe(&a->outcomes.journal, free_bytes, d, sizeof(d));
		snprintf(why, len, "the outcome journal's disk is full: %s; new runs are refused",
			 d);
		return false;
	}
	if (err) {
		snprintf(why, len, "cannot check the outcome journal's disk %s: %s",
			 a->outcomes.journal.dir, strerror(-err));
		return false;
	}
	return true;
}

void agent_outcomes_tick(struct agent *a)
{
	struct agent_outcomes *ao = &a->outcomes;
	char why[PATH_MAX + 256];
	bool low;

	fold_chunk(a);
	save_checkpoint(a);
	low = !agent_outcomes_ready(a, why, sizeof(why));
	if (low && !ao->disk_low)
		sg_error("%s; readiness is red", why);
	else if (!low && ao->disk_low)
		sg_info("the outcome journal's disk is above its reserve again");
	ao->disk_low = low;
}

void agent_outcomes_stop(struct agent *a)
{
	struct agent_outcomes *ao = &a->outcomes;

	if (!ao->fold.ids)
		return; /* never started */
	do
		fold_chunk(a);
	while (ao->pending);
	a->ledger_dirty = true;
	save_checkpoint(a);
	fold_free(&ao->fold);
	if (ao->inotify_fd >= 0)
		close(ao->inotify_fd);
	ao->inotify_fd = -1;
}

static json_t *rebuilds_json(const struct outcomes_shown *s)
{
	json_t *o = json_object();

	for (int r = 0; r < REBUILD__COUNT; r++)
		if (s->rebuilds[r])
			json_object_set_new(o, ledger_rebuild_name(r),
					    json_integer((json_int_t)s->rebuilds[r]));
	return o;
}

void agent_outcomes_status(struct agent *a, json_t *st)
{
	struct agent_outcomes *ao = &a->outcomes;
	struct outcomes_shown s;
	char why[PATH_MAX + 256];
	uint64_t free_bytes = 0;
	bool ok = agent_outcomes_ready(a, why, sizeof(why));

	journal_space(&ao->journal, &free_bytes);
	pthread_mutex_lock(&a->lock);
	s = ao->shown;
	pthread_mutex_unlock(&a->lock);
	json_object_set_new(
		st, "ledger",
		json_pack("{s:s, s:{s:I, s:I}, s:I, s:I, s:I, s:I, s:b, s:o, s:o, s:o, s:o}",
			  "checkpoint", ao->checkpoint, "position", "segment",
			  (json_int_t)s.pos.segment, "offset", (json_int_t)s.pos.offset, "folded",
			  (json_int_t)s.fold.booked, "duplicates", (json_int_t)s.fold.duplicates,
			  "bad_records", (json_int_t)s.fold.bad, "gap_segments",
			  (json_int_t)s.fold.gap_segments, "catching_up", ao->pending,
			  "checkpoint_saved",
			  s.checkpoint_saved_at ? json_integer((json_int_t)s.checkpoint_saved_at)
						: json_null(),
			  "checkpoint_error",
			  s.checkpoint_error[0] ? json_string(s.checkpoint_error) : json_null(),
			  "rebuilds", rebuilds_json(&s), "last_rebuild",
			  s.last_rebuild[0]
				  ? json_pack("{s:I, s:s}", "at", (json_int_t)s.last_rebuild_at,
					      "why", s.last_rebuild)
				  : json_null()));
	json_object_set_new(st, "journal",
			    json_pack("{s:s, s:I, s:I, s:b, s:o}", "dir", ao->journal.dir,
				      "free_bytes", (json_int_t)free_bytes, "reserve_bytes",
				      (json_int_t)ao->journal.reserve_bytes, "disk_ok", ok,
				      "disk_error", ok ? json_null() : json_string(why)));
}

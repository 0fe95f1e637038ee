/* The local outcome log (see outcome_log.h). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>
#include "abi/events.h"
#include "lib/fs_util.h"
#include "lib/json_text.h"
#include "outcome_log.h"
#include "policy/policy.h"
#include "lib/rule_names.h"

static int log_dir(char *buf, size_t len)
{
	const char *v = getenv("SANDGUARD_LOG_DIR");

	if ((size_t)snprintf(buf, len, "%s", v && *v ? v : SG_LOG_DIR_DEFAULT) >= len)
		return -ENAMETOOLONG;
	return 0;
}

int outcome_log_path(char *buf, size_t len)
{
	char dir[PATH_MAX];
	int ret = log_dir(dir, sizeof(dir));

	if (ret)
		return ret;
	if ((size_t)snprintf(buf, len, "%s/%s", dir, SG_OUTCOME_LOG) >= len)
		return -ENAMETOOLONG;
	return 0;
}

static void timestamp(char *buf, size_t len)
{
	struct timespec ts;
	struct tm tm;
	char sec[32];

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(sec, sizeof(sec), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, len, "%s.%03ldZ", sec, ts.tv_nsec / 1000000);
}

static json_t *line_of(const struct sg_outcome *o, const char *mode, const char *detail)
{
	char ts[48];
	json_t *j = json_object();

	if (!j)
		return NULL;
	timestamp(ts, sizeof(ts));
	json_object_set_new(j, "ts", json_string(ts));
	json_object_set_new(j, "mode", json_string(mode));
	json_object_set_new(j, "tenant",
			    json_string_lossy(o->tenant, strnlen(o->tenant, sizeof(o->tenant))));
	json_object_set_new(j, "run_id",
			    o->run_id[0] ? json_string_lossy(o->run_id,
							     strnlen(o->run_id, sizeof(o->run_id)))
					 : json_null());
	json_object_set_new(j, "batch_id",
			    json_string_lossy(o->batch_id,
					      strnlen(o->batch_id, sizeof(o->batch_id))));
	json_object_set_new(j, "sandbox",
			    o->sandbox[0]
				    ? json_string_lossy(o->sandbox,
							strnlen(o->sandbox, sizeof(o->sandbox)))
				    : json_null());
	json_object_set_new(j, "cgroup_id", json_integer((json_int_t)o->cgroup_id));
	json_object_set_new(j, "attempt", json_integer(o->attempt));
	json_object_set_new(j, "final", json_boolean(o->final));
	json_object_set_new(j, "cause", json_string(cause_name(o->cause)));
	json_object_set_new(j, "class", json_string(fault_class_name(cause_class(o->cause))));
	json_object_set_new(j, "rule",
			    o->rule >= 0 && o->rule < SG_RULE__COUNT
				    ? json_string(rule_name(o->rule))
				    : json_null());
	json_object_set_new(j, "wall_ms", json_integer((json_int_t)o->wall_ms));
	json_object_set_new(j, "n_scores", json_integer(o->n_scores));
	json_object_set_new(j, "score_mean",
			    o->n_scores ? json_real_or_null(o->score_mean) : json_null());
	json_object_set_new(j, "score_var",
			    o->n_scores ? json_real_or_null(o->score_var) : json_null());
	json_object_set_new(j, "constant", json_boolean(o->constant));
	json_object_set_new(j, "invalid", json_boolean(o->invalid));
	json_object_set_new(j, "detail",
			    detail && *detail ? json_string_lossy(detail, strlen(detail))
					      : json_null());
	return j;
}

int outcome_log_append(const struct sg_outcome *o, const char *mode, const char *detail)
{
	char dir[PATH_MAX], path[PATH_MAX];
	json_t *j;
	char *text;
	size_t len;
	int fd, ret;

	if ((ret = log_dir(dir, sizeof(dir))) || (ret = outcome_log_path(path, sizeof(path))))
		return ret;
	if ((ret = fs_mkdir_p(dir, 0755)))
		return ret;
	j = line_of(o, mode, detail);
	text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!text)
		return -ENOMEM;
	len = strlen(text);
	text[len] = '\n'; /* json_dumps left room: replace the NUL, write len + 1 */
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	if (flock(fd, LOCK_EX)) {
		ret = -errno;
	} else {
		ssize_t w = write(fd, text, len + 1);
		if (w < 0)
			ret = -errno;
		else if ((size_t)w != len + 1)
			ret = -ENOSPC;
	}
	close(fd);
out:
	free(text);
	return ret;
}

/* Tenant policies: the built-in defaults, loading a file, finding a
 * tenant's policy in a directory, and the names of rules, actions and
 * failure modes. Parsing and validation live in policy_parse.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "policy.h"
#include "lib/array_len.h"

/* A policy is a few KiB; anything past this is not one. */
#define POLICY_MAX_BYTES (1 << 20)

/* policies/default.json, linked in by src/policy/default_policy.S. */
extern const char sg_default_policy_start[], sg_default_policy_end[];

const char *policy_embedded_default(size_t *len)
{
	if (len)
		*len = (size_t)(sg_default_policy_end - sg_default_policy_start);
	return sg_default_policy_start;
}

/* Must equal policies/default.json: test_policy parses the embedded copy
 * and compares, so the two cannot drift apart. */
void policy_defaults(struct sg_policy *p)
{
	static const char *const read_only[] = {
		"/usr",
		"/lib",
		"/lib64",
		"/bin",
		"/sbin",
		"/etc/ld.so.cache",
		"/etc/alternatives",
		"/etc/localtime",
		"/etc/locale.alias",
		"/etc/python3.11",
		"/etc/ssl",
		"/sys/devices/system/cpu/online",
		"/dev/null",
		"/dev/zero",
		"/dev/urandom",
		"/dev/random",
	};
	static const char *const exec_allow[] = {
		"/usr/bin/python3*",
		"/usr/local/bin/python3*",
	};

	memset(p, 0, sizeof(*p));
	snprintf(p->tenant, sizeof(p->tenant), "default");
	p->enabled = true;
	p->require_agent = false;
	p->warm = (struct sg_warm){ .max_calls = 1000, .max_age_s = 600, .max_growth_mb = 64 };
	p->session = (struct sg_session){ .idle_timeout_s = 300,
					  .max_lifetime_s = 3600,
					  .cpu_seconds = 3600 };
	p->limits = (struct sg_limits){
		.timeout_ms = 10000,
		.memory_mb = 512,
		.max_tasks = 64,
		.max_forks = 1024,
		.cpu = 1.0,
		.concurrency = 8,
		.on_excess = SG_EXCESS_WAIT,
		.queue_timeout_ms = 30000,
		.output_bytes = 1048576,
		.open_files = 1024,
		.file_size_mb = 256,
	};
	p->n_egress = 0;
	p->allow_unix = false;
	p->allow_listen = false;
	p->max_connections = 64;
	snprintf(p->scratch_root, sizeof(p->scratch_root), "/var/lib/sandguard/scratch");
	p->scratch_mb = 256;
	p->scratch_inodes = 32768;
	for (size_t i = 0; i < ARRAY_LEN(read_only); i++)
		snprintf(p->read_only[p->n_read_only++], SG_POLICY_PATHLEN, "%s", read_only[i]);
	for (size_t i = 0; i < ARRAY_LEN(exec_allow); i++)
		snprintf(p->exec_allow[p->n_exec_allow++], SG_POLICY_PATHLEN, "%s", exec_allow[i]);
	p->action[SG_RULE_EGRESS] = SG_POLICY_DENY;
	p->action[SG_RULE_FILE] = SG_POLICY_KILL;
	p->action[SG_RULE_FORK] = SG_POLICY_KILL;
	p->action[SG_RULE_EXEC] = SG_POLICY_KILL;
	p->action[SG_RULE_MEMORY] = SG_POLICY_KILL;
	p->failure = SG_FAILURE_RETRY;
	p->max_retries = 2;
	p->health = (struct sg_health){
		.window = 20,
		.constant_rate = 0.5,
		.invalid_rate = 0.2,
		.dead_windows = 5,
		.dead_epsilon = 1e-6,
		.band_window = 50,
		.band_k = 3,
		.band_min_iqr = 0.01,
	};
	p->canary = (struct sg_canary){
		.rate = 0.1,
		.per_batch = 1,
		.determinism_rate = 0,
		.determinism_tolerance = 1e-9,
	};
	snprintf(p->source, sizeof(p->source), "<embedded>");
}

static int file_error(struct sg_policy_error *err, const char *path, int e, const char *what)
{
	if (err) {
		memset(err, 0, sizeof(*err));
		snprintf(err->file, sizeof(err->file), "%s", path);
		snprintf(err->msg, sizeof(err->msg), "%s%s",
			 what ? what : "cannot read: ", what ? "" : strerror(e));
	}
	return -e;
}

int policy_load_file(const char *path, struct sg_policy *out, struct sg_policy_error *err)
{
	struct stat st;
	char *buf;
	size_t got = 0;
	int fd, r;

	/* O_NONBLOCK: a FIFO in the policy directory must not hang the agent. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return file_error(err, path, errno, NULL);
	if (fstat(fd, &st) < 0) {
		r = errno;
		close(fd);
		return file_error(err, path, r, NULL);
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return file_error(err, path, EINVAL, "not a regular file");
	}
	if (st.st_size > POLICY_MAX_BYTES) {
		close(fd);
		return file_error(err, path, EFBIG, "larger than 1 MiB: not a policy file");
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return file_error(err, path, ENOMEM, NULL);
	}
	/* Read to EOF, not to st_size: the file may change under us. */
	for (;;) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size + 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = errno;
			free(buf);
			close(fd);
			return file_error(err, path, r, NULL);
		}
		if (n == 0)
			break;
		got += (size_t)n;
		if (got > (size_t)st.st_size) {
			free(buf);
			close(fd);
			return file_error(err, path, EAGAIN, "changed while being read; try again");
		}
	}
	close(fd);
	r = policy_parse(buf, got, path, out, err);
	free(buf);
	return r;
}

int policy_for_tenant(const char *dir, const char *tenant, struct sg_policy *out,
		      struct sg_policy_error *err)
{
	static const char *const stems[] = { NULL, "default" };
	char path[SG_POLICY_PATHLEN];
	struct stat st;
	size_t len;
	int r;

	if (!tenant || !tenant_name_valid(tenant)) {
		if (err) {
			memset(err, 0, sizeof(*err));
			snprintf(err->file, sizeof(err->file), "%s", dir ? dir : "policies");
			snprintf(err->msg, sizeof(err->msg),
				 "invalid tenant name \"%.64s\": expected "
				 "[a-z0-9][a-z0-9_-]{0,62}",
				 tenant ? tenant : "(null)");
		}
		return -EINVAL;
	}
	for (size_t i = 0; dir && i < ARRAY_LEN(stems); i++) {
		const char *stem = stems[i] ? stems[i] : tenant;
		if ((size_t)snprintf(path, sizeof(path), "%s/%s.json", dir, stem) >= sizeof(path))
			return file_error(err, dir, ENAMETOOLONG, NULL);
		/* Only a missing entry (or directory) means "not configured":
		 * anything else, a dangling symlink or ENOTDIR included, is an
		 * error, so lstat() and not access(). */
		if (lstat(path, &st) < 0) {
			if (errno == ENOENT)
				continue;
			return file_error(err, path, errno, NULL);
		}
		/* Into `out` itself, as policy_parse() does: no 35 KiB copy. */
		r = policy_load_file(path, out, err);
		if (r)
			return r;
		snprintf(out->tenant, sizeof(out->tenant), "%s", tenant);
		return 0;
	}
	const char *text = policy_embedded_default(&len);
	r = policy_parse(text, len, "<embedded>", out, err);
	if (r)
		return r;
	snprintf(out->tenant, sizeof(out->tenant), "%s", tenant);
	return 0;
}

bool tenant_name_valid(const char *name)
{
	size_t n;

	if (!name || !((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= '0' && name[0] <= '9')))
		return false;
	for (n = 1; name[n]; n++) {
		char c = name[n];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
			return false;
	}
	return n < SG_TENANT_MAX;
}

void policy_error_format(const struct sg_policy_error *e, char *buf, size_t len)
{
	if (e->line > 0)
		snprintf(buf, len, "%s:%d:%d: %s", e->file, e->line, e->col, e->msg);
	else
		snprintf(buf, len, "%s: %s", e->file, e->msg);
}

const char *policy_action_name(int action)
{
	switch (action) {
	case SG_POLICY_DENY:
		return "deny";
	case SG_POLICY_KILL:
		return "kill";
	case SG_POLICY_LOG:
		return "log";
	}
	return "unknown";
}

const char *failure_mode_name(enum sg_failure_mode m)
{
	switch (m) {
	case SG_FAILURE_RETRY:
		return "retry";
	case SG_FAILURE_SKIP:
		return "skip";
	case SG_FAILURE_PAUSE:
		return "pause";
	}
	return "unknown";
}

const char *policy_dir_default(void)
{
	const char *env = getenv("SANDGUARD_POLICY_DIR");

	return env && *env ? env : SG_POLICY_DIR_DEFAULT;
}

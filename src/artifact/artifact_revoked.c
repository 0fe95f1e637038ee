/* Revoked artifacts (see src/artifact/artifact_revoked.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>
#include "artifact_revoked.h"

void artifact_policy_dir(const struct sg_policy *p, char *buf, size_t len)
{
	const char *slash = strrchr(p->source, '/');

	if (p->source[0] == '<' || !slash) /* "<embedded>", or a bare file name */
		snprintf(buf, len, "%s", p->source[0] == '<' ? policy_dir_default() : ".");
	else if (slash == p->source)
		snprintf(buf, len, "/");
	else
		snprintf(buf, len, "%.*s", (int)(slash - p->source), p->source);
}

static int parse_line(char *line, struct artifact_revocation *r)
{
	char *hex = strtok(line, " "), *tenant = strtok(NULL, " "), *at = strtok(NULL, " ");
	char *reason = strtok(NULL, "\n"), *end;

	memset(r, 0, sizeof(*r));
	if (!hex || !tenant || !at || strlen(hex) != SHA256_HEX - 1 ||
	    strspn(hex, "0123456789abcdef") != SHA256_HEX - 1 || !tenant_name_valid(tenant))
		return -EBADMSG;
	r->at = strtoll(at, &end, 10);
	if (*end)
		return -EBADMSG;
	snprintf(r->sha256, sizeof(r->sha256), "%s", hex);
	snprintf(r->tenant, sizeof(r->tenant), "%s", tenant);
	snprintf(r->reason, sizeof(r->reason), "%s", reason ? reason : "");
	return 0;
}

int artifact_revoked_each(const char *policy_dir,
			  int (*fn)(const struct artifact_revocation *r, void *arg), void *arg)
{
	char path[PATH_MAX], line[1024];
	struct artifact_revocation r;
	FILE *f;
	int ret = 0;

	snprintf(path, sizeof(path), "%s/%s", policy_dir, ARTIFACT_REVOKED_FILE);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? 0 : -errno;
	while (!ret && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (!line[0] || line[0] == '#')
			continue;
		ret = parse_line(line, &r) ?: fn(&r, arg);
	}
	if (!ret && ferror(f))
		ret = -EIO;
	fclose(f);
	return ret;
}

struct find {
	const char *tenant, *sha256;
	struct artifact_revocation *out;
};

static int match(const struct artifact_revocation *r, void *arg)
{
	struct find *f = arg;

	if (strcmp(r->tenant, f->tenant) || strcmp(r->sha256, f->sha256))
		return 0;
	if (f->out)
		*f->out = *r;
	return 1;
}

int artifact_revoked_find(const char *policy_dir, const char *tenant, const char *sha256,
			  struct artifact_revocation *r)
{
	struct find f = { .tenant = tenant, .sha256 = sha256, .out = r };

	return artifact_revoked_each(policy_dir, match, &f);
}

/* The rewrite: every line but (tenant, sha256), plus `add` when set. */
struct rewrite {
	FILE *out;
	const char *tenant, *sha256;
	int found;
};

static int write_line(FILE *out, const struct artifact_revocation *r)
{
	return fprintf(out, "%s %s %lld %s\n", r->sha256, r->tenant, r->at, r->reason) < 0 ? -EIO
											   : 0;
}

static int keep_other(const struct artifact_revocation *r, void *arg)
{
	struct rewrite *w = arg;

	if (!strcmp(r->tenant, w->tenant) && !strcmp(r->sha256, w->sha256)) {
		w->found = 1;
		return 0;
	}
	return write_line(w->out, r);
}

static int rewrite(const char *dir, const char *tenant, const char *sha256,
		   const struct artifact_revocation *add, char *detail, size_t len)
{
	char tmp[PATH_MAX], path[PATH_MAX];
	struct rewrite w = { .tenant = tenant, .sha256 = sha256 };
	int dfd, fd, ret;

	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || flock(dfd, LOCK_EX)) {
		ret = -errno;
		snprintf(detail, len, "cannot lock the policy directory %s: %s", dir,
			 strerror(-ret));
		if (dfd >= 0)
			close(dfd);
		return ret;
	}
	snprintf(path, sizeof(path), "%s/%s", dir, ARTIFACT_REVOKED_FILE);
	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, ARTIFACT_REVOKED_FILE);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	w.out = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!w.out) {
		ret = -errno;
		snprintf(detail, len, "cannot write %s: %s", tmp, strerror(-ret));
		if (fd >= 0)
			close(fd);
		close(dfd);
		return ret;
	}
	fprintf(w.out, "# sandguard artifact revoke|unrevoke: <sha256> <tenant> <unix time> "
		       "<reason>\n");
	ret = artifact_revoked_each(dir, keep_other, &w);
	if (ret)
		snprintf(detail, len, "cannot read %s: %s", path,
			 ret == -EBADMSG ? "a malformed line" : strerror(-ret));
	if (!ret && add && w.found) {
		ret = -EEXIST;
		snprintf(detail, len, "sha256:%s is revoked for tenant %s already", sha256, tenant);
	}
	if (!ret && !add && !w.found) {
		ret = -ENOENT;
		snprintf(detail, len, "sha256:%s is not revoked for tenant %s", sha256, tenant);
	}
	if (!ret && add)
		ret = write_line(w.out, add);
	if (fflush(w.out) || fsync(fileno(w.out)))
		ret = ret ?: -errno;
	fclose(w.out);
	if (!ret && rename(tmp, path)) {
		ret = -errno;
		snprintf(detail, len, "cannot rename %s to %s: %s", tmp, path, strerror(-ret));
	}
	if (ret)
		unlink(tmp);
	else
		fsync(dfd);
	close(dfd); /* drops the flock */
	return ret;
}

int artifact_revoke(const char *policy_dir, const struct artifact_revocation *r, char *detail,
		    size_t len)
{
	return rewrite(policy_dir, r->tenant, r->sha256, r, detail, len);
}

int artifact_unrevoke(const char *policy_dir, const char *tenant, const char *sha256, char *detail,
		      size_t len)
{
	return rewrite(policy_dir, tenant, sha256, NULL, detail, len);
}

/* Pinned reward artifacts (see src/exec/artifact.h for the design), and
 * batch mode's use of them. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "artifact.h"
#include "artifact/artifact_revoked.h"
#include "artifact_scan.h"
#include "artifact/artifact_sign.h"
#include "artifact_store.h"
#include "exec_internal.h"
#include "lib/clock.h"
#include "lib/log.h"

/* Files of the system image: the interpreter and its libraries, trusted
 * as the node's image is (docs/policy.md "artifacts"). */
static bool system_path(const char *path)
{
	return !strncmp(path, "/usr/", 5) || !strncmp(path, "/bin/", 5) ||
	       !strncmp(path, "/lib", 4) || !strncmp(path, "/sbin/", 6);
}

static const struct sg_artifact_pin *pin_of(const struct sg_policy *p, const char *path)
{
	for (int i = 0; i < p->artifacts.n_pins; i++)
		if (!strcmp(p->artifacts.pins[i].path, path))
			return &p->artifacts.pins[i];
	return NULL;
}

/* artifacts.require: the command names a pinned file, and no file outside
 * the system image that is not pinned. */
static int check_required(const struct sg_policy *p, char *const *argv, char *detail, size_t len)
{
	bool pinned = false;
	struct stat st;

	for (size_t i = 0; argv[i]; i++) {
		if (pin_of(p, argv[i])) {
			pinned = true;
			continue;
		}
		if (argv[i][0] != '/' || system_path(argv[i]) || stat(argv[i], &st))
			continue;
		snprintf(detail, len,
			 "the command names %s, which the policy does not pin (artifacts.require "
			 "is set): add it to artifacts.pins with its sha256",
			 argv[i]);
		return -EPERM;
	}
	if (pinned)
		return 0;
	snprintf(detail, len,
		 "the command names no pinned file (artifacts.require is set): run a program "
		 "listed in artifacts.pins");
	return -EPERM;
}

static int revoked(const char *dir, const struct sg_policy *p, const char *path, const char *hex,
		   char *detail, size_t len)
{
	struct artifact_revocation r;
	char when[32] = "?";
	time_t at;
	int ret = artifact_revoked_find(dir, p->tenant, hex, &r);

	if (ret < 0) {
		snprintf(detail, len, "platform error: cannot read %s/%s: %s", dir,
			 ARTIFACT_REVOKED_FILE,
			 ret == -EBADMSG ? "a malformed line" : strerror(-ret));
		return ret;
	}
	if (!ret)
		return 0;
	at = (time_t)r.at;
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&at));
	snprintf(detail, len,
		 "artifact %s (sha256:%s) is revoked for tenant %s since %s: %s; "
		 "'sandguard artifact unrevoke %s --tenant %s' re-admits it",
		 path, hex, p->tenant, when, r.reason[0] ? r.reason : "(no reason given)", hex,
		 p->tenant);
	return -EPERM;
}

/* argv[0] is the pinned program itself: the scratch cannot execute it, so
 * its #! line's interpreter runs the copy. */
static int shebang(const char *data, size_t n, char **interp, char **arg, char *detail, size_t len)
{
	size_t end = 0;
	char *line, *sp;

	while (end < n && end < 256 && data[end] != '\n')
		end++;
	if (n < 3 || data[0] != '#' || data[1] != '!' || end == 256) {
		snprintf(detail, len,
			 "a pinned program named as the command itself must start with a #! line; "
			 "or name its interpreter first");
		return -EPERM;
	}
	line = strndup(data + 2, end - 2);
	if (!line)
		return -ENOMEM;
	line[strcspn(line, "\r")] = '\0';
	*interp = line + strspn(line, " \t");
	sp = strpbrk(*interp, " \t");
	*arg = NULL;
	if (sp) {
		*sp++ = '\0';
		sp += strspn(sp, " \t");
		*arg = *sp ? sp : NULL;
	}
	if (**interp != '/') {
		snprintf(detail, len, "the #! line of a pinned program must name an absolute path");
		free(line);
		return -EPERM;
	}
	return 0; /* *interp is line: the caller frees it */
}

/* The command with pinned file `k` (argv index i) replaced by its copy in
 * the scratch. */
static int replace(struct artifact_run *a, char *const *argv, size_t i, size_t k, char *detail,
		   size_t len)
{
	size_t n = 0, at = 0;
	char *interp = NULL, *arg = NULL;
	int ret;

	while (argv[n])
		n++;
	if (!a->argv) {
		if (!(a->argv = calloc(n + 3, sizeof(*a->argv))))
			return -ENOMEM;
		memcpy(a->argv, argv, n * sizeof(*argv));
	}
	if (i > 0) {
		a->argv[i + a->shift] = a->names[k];
		return 0;
	}
	ret = shebang(a->data[k], a->lens[k], &interp, &arg, detail, len);
	if (ret)
		return ret;
	a->shebang = interp;
	a->shift = 1 + !!arg;
	memmove(a->argv + a->shift, a->argv, (n + 1) * sizeof(*a->argv));
	a->argv[at++] = interp;
	if (arg)
		a->argv[at++] = arg;
	a->argv[at] = a->names[k];
	return 0;
}

static int mismatch(const char *path, const char *want, const char *got, char *detail, size_t len)
{
	snprintf(detail, len,
		 "artifact %s: sha256 expected %s, found %s; not run (a changed artifact runs "
		 "only once the policy pins its new digest)",
		 path, want, got);
	return -EPERM;
}

/* Where the policy names keys: the signature next to the artifact, over
 * the bytes checked (a directory's: over its manifest text). */
static int check_signature(const struct sg_policy *p, const char *path, const char hex[SHA256_HEX],
			   const char *data, size_t n, char *detail, size_t len)
{
	char sig[SG_POLICY_PATHLEN + 16], key[SHA256_HEX], *text = NULL;
	size_t text_len = 0;
	int ret;

	if (!p->artifacts.n_public_keys)
		return 0;
	snprintf(sig, sizeof(sig), "%s.minisig", path);
	ret = artifact_signature_read(path, sig, &text, &text_len, detail, len);
	if (ret)
		return ret;
	/* The bytes are the pin's (checked above): a verdict on this
	 * signature of them, under these keys, holds until one changes. */
	artifact_verdict_key(hex, text, text_len, p->artifacts.public_keys,
			     p->artifacts.n_public_keys, key);
	if (!artifact_verdict_known(key)) {
		ret = artifact_signature_verify(p, path, text, data, n, detail, len);
		if (!ret)
			artifact_verdict_note(key);
	}
	free(text);
	return ret;
}

/* The pin's digest, and the bytes it is of when `keep` or signatures are
 * required (a directory: its manifest text). */
static int digest_pin(const struct sg_policy *p, const char *path, bool dir, bool keep,
		      char hex[SHA256_HEX], char **data, size_t *n, char *detail, size_t len)
{
	bool bytes = keep || p->artifacts.n_public_keys || (p->artifacts.n_scanner && !dir);

	*data = NULL;
	*n = 0;
	if (dir)
		return artifact_dir(path, true, hex, bytes ? data : NULL, n, detail, len);
	return artifact_file(path, true, hex, bytes ? data : NULL, n, detail, len);
}

/* A pinned Python module the command does not name: handed to the
 * sandbox under its own name, next to the pinned script's copy, so that
 * the script's import finds the checked bytes (its directory, sys.path's
 * first entry, is the scratch), never the file by path. */
static bool module_pin(const char *path)
{
	size_t n = strlen(path);

	return n > 3 && !strcmp(path + n - 3, ".py");
}

/* The name a kept file gets in the scratch: a module its own name (two
 * with the same one are refused: which one an import finds would depend
 * on the order), the command's file a prefixed one. */
static int kept_name(struct artifact_run *a, size_t k, const char *path, bool named, char *detail,
		     size_t len)
{
	const char *base = strrchr(path, '/') + 1;
	int n = named ? asprintf(&a->names[k], "sg-pinned-%zu-%s", k, base)
		      : asprintf(&a->names[k], "%s", base);

	if (n < 0) {
		a->names[k] = NULL;
		return -ENOMEM;
	}
	for (size_t i = 0; i < a->n_files && !named; i++)
		if (!strcmp(a->files[i].path, a->names[k])) {
			snprintf(detail, len,
				 "two pinned modules are named %s: an import would find either; "
				 "pin one of them",
				 base);
			return -EPERM;
		}
	return 0;
}

/* One pin: its digest checked, its signature where keys are named, its
 * revocation, and its bytes kept when the command names the file or it
 * is a Python module (module_pin()). */
static int check_pin(const char *dir, const struct sg_policy *p, const struct sg_artifact_pin *pin,
		     char *const *argv, struct artifact_run *a, char *detail, size_t len)
{
	size_t k = a->n_digests, i = 0;
	char hex[SHA256_HEX];
	struct stat st;
	bool named, keep;
	int ret;

	while (argv[i] && strcmp(argv[i], pin->path))
		i++;
	if (stat(pin->path, &st)) {
		snprintf(detail, len, "artifact %s: %s; not run", pin->path, strerror(errno));
		return -EPERM;
	}
	named = argv[i] && !S_ISDIR(st.st_mode);
	keep = named || (!S_ISDIR(st.st_mode) && module_pin(pin->path));
	ret = digest_pin(p, pin->path, S_ISDIR(st.st_mode), keep, hex, &a->data[k], &a->lens[k],
			 detail, len);
	if (ret)
		return ret == -EINVAL || ret == -EFBIG || ret == -ENOENT ? -EPERM : ret;
	snprintf(a->digests[k], SHA256_HEX, "%s", hex);
	snprintf(a->paths[k], SG_POLICY_PATHLEN, "%s", pin->path);
	a->n_digests++;
	if (strcmp(hex, pin->sha256))
		return mismatch(pin->path, pin->sha256, hex, detail, len);
	ret = check_signature(p, pin->path, hex, a->data[k], a->lens[k], detail, len);
	ret = ret ?: revoked(dir, p, pin->path, hex, detail, len);
	ret = ret
		      ?: artifact_scan(p, pin->path, hex, S_ISDIR(st.st_mode) ? NULL : a->data[k],
				       a->lens[k], detail, len);
	if (ret || !keep) { /* read only to be checked: not kept */
		free(a->data[k]);
		a->data[k] = NULL;
		return ret;
	}
	ret = kept_name(a, k, pin->path, named, detail, len);
	if (ret)
		return ret;
	a->files[a->n_files] = (struct sandbox_file){
		.path = a->names[k], .data = a->data[k], .len = a->lens[k], .mode = 0444
	};
	a->n_files++;
	return named ? replace(a, argv, i, k, detail, len) : 0;
}

int artifact_prepare(const struct sg_policy *p, char *const *argv, struct artifact_run *a,
		     char *detail, size_t len)
{
	char dir[PATH_MAX];
	int ret = 0;

	memset(a, 0, sizeof(*a));
	if (!p->artifacts.n_pins && !p->artifacts.require)
		return 0;
	if (p->artifacts.require && (ret = check_required(p, argv, detail, len)))
		return ret;
	artifact_policy_dir(p, dir, sizeof(dir));
	for (int i = 0; i < p->artifacts.n_pins && !ret; i++)
		ret = check_pin(dir, p, &p->artifacts.pins[i], argv, a, detail, len);
	return ret;
}

int artifact_recheck(const struct sg_policy *p, const struct artifact_run *a, char *detail,
		     size_t len)
{
	char dir[PATH_MAX];
	int ret = 0;

	if (!a->n_digests)
		return 0;
	artifact_policy_dir(p, dir, sizeof(dir));
	for (size_t k = 0; k < a->n_digests && !ret; k++)
		ret = revoked(dir, p, a->paths[k], a->digests[k], detail, len);
	return ret;
}

void artifact_run_free(struct artifact_run *a)
{
	for (size_t k = 0; k < SG_ARTIFACT_PINS; k++) {
		free(a->names[k]);
		free(a->data[k]);
	}
	free(a->shebang);
	free(a->argv);
	memset(a, 0, sizeof(*a));
}

int artifact_manifest(const char *path, char **text, size_t *n, char *detail, size_t len)
{
	char hex[SHA256_HEX];

	return artifact_dir(path, true, hex, text, n, detail, len);
}

int artifact_digest_path(const char *path, bool use_cache, char hex[SHA256_HEX], char *detail,
			 size_t len)
{
	struct stat st;

	if (stat(path, &st)) {
		snprintf(detail, len, "cannot stat %s: %s", path, strerror(errno));
		return -errno;
	}
	if (S_ISDIR(st.st_mode))
		return artifact_dir(path, use_cache, hex, NULL, NULL, detail, len);
	return artifact_file(path, use_cache, hex, NULL, NULL, detail, len);
}

/* ---- batch mode (exec_batch.c) --------------------------------------- */

bool exec_artifacts_refused(const struct exec_ctx *ctx, const char *batch_id,
			    struct artifact_run *a, struct tenant_slot *slot, uint64_t start_ms,
			    struct exec_result *res)
{
	char why[EXEC_DETAIL_MAX];
	enum sg_cause cause;
	int err = artifact_prepare(ctx->policy, ctx->argv, a, why, sizeof(why));

	if (!err)
		return false;
	artifact_run_free(a);
	tenant_slot_release(slot);
	/* The tenant's to fix (a changed or revoked artifact): never retried,
	 * and no run is started to find out. */
	cause = err == -EPERM ? SG_CAUSE_TENANT_POLICY_VIOLATION : SG_CAUSE_PLATFORM_ERROR;
	if (cause == SG_CAUSE_PLATFORM_ERROR && strncmp(why, "platform error", 14))
		snprintf(res->detail, sizeof(res->detail),
			 "platform error: checking the pinned artifacts: %s", why);
	else
		snprintf(res->detail, sizeof(res->detail), "%s", why);
	sg_info("exec: %s/%s refused before it ran: %s", ctx->tenant, batch_id, res->detail);
	res->wall_ms = clock_ms(CLOCK_MONOTONIC) - start_ms;
	/* Marked, the agent's fold makes it an artifact_refused event. */
	int booked =
		exec_book(ctx, &(struct exec_booking){
				       .mode = "batch",
				       .batch_id = batch_id,
				       .final = true,
				       .cause = cause,
				       .rule = -1,
				       .wall_ms = res->wall_ms,
				       .detail = res->detail,
				       .artifact_refused = err == -EPERM ? res->detail : NULL });

	if (booked)
		res->cause = exec_book_failed(booked, cause, res->detail, sizeof(res->detail));
	else
		res->cause = cause;
	return true;
}

void exec_artifacts_apply(const struct artifact_run *a, struct sandbox_spec *spec)
{
	/* A warm parent imports its preloads and runs its script by path,
	 * after the check and for calls after it: a tenant that pins runs
	 * cold, each run on the bytes its own check kept. */
	if (spec->policy->artifacts.n_pins || spec->policy->artifacts.require)
		spec->cold = true;
	if (a->argv)
		spec->argv = a->argv;
	if (a->n_files) {
		spec->files = a->files;
		spec->n_files = a->n_files;
	}
}

int exec_artifacts_revoked(const struct exec_ctx *ctx, const struct artifact_run *a, char *detail,
			   size_t len)
{
	char why[EXEC_DETAIL_MAX];
	int err = artifact_recheck(ctx->policy, a, why, sizeof(why));
	size_t n;

	if (!err)
		return 0;
	n = strlen(detail);
	snprintf(detail + n, len - n, "%sthe retry is refused: %s", n ? "; " : "", why);
	return err;
}

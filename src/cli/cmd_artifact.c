/* sandguard artifact: revocation of reward artifacts, and their digests
 * (src/exec/artifact.h, src/artifact/artifact_revoked.h).
 *   artifact revoke SHA256 --tenant T --reason TEXT [--policy-dir D]
 *   artifact unrevoke SHA256 --tenant T [--policy-dir D]
 *   artifact ls [--tenant T] [--json] [--policy-dir D]
 *   artifact digest PATH [--no-cache]   what artifacts.pins takes
 *   artifact manifest DIR               what a directory's signature is over */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "commands.h"
#include "exec/artifact.h"
#include "artifact/artifact_revoked.h"
#include "policy/policy.h"

struct opts {
	const char *digest, *tenant, *reason, *policy_dir, *path;
	bool json, no_cache;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sandguard artifact revoke SHA256 --tenant T --reason TEXT [--policy-dir D]\n"
		"       sandguard artifact unrevoke SHA256 --tenant T [--policy-dir D]\n"
		"       sandguard artifact ls [--tenant T] [--json] [--policy-dir D]\n"
		"       sandguard artifact digest PATH [--no-cache]\n"
		"       sandguard artifact manifest DIR\n"
		"\n"
		"A revoked digest is refused for its tenant by every executor that reads the\n"
		"policy directory (the list is %s there, distributed with the policies), also\n"
		"for the retries of batches already running. 'digest' prints what artifacts.pins\n"
		"takes: a file's SHA-256, or a directory's manifest digest (docs/policy.md);\n"
		"'manifest' the text that digest is of, which a directory's DIR.minisig signs.\n"
		"--policy-dir defaults to $SANDGUARD_POLICY_DIR, else \"%s\".\n",
		ARTIFACT_REVOKED_FILE, SG_POLICY_DIR_DEFAULT);
}

static int usage_error(const char *msg, const char *arg)
{
	fprintf(stderr, "sandguard artifact: %s%s%s\n(see 'sandguard artifact --help')\n", msg,
		arg ? ": " : "", arg ? arg : "");
	return SG_EXIT_USAGE;
}

static bool digest_valid(const char *hex)
{
	return strlen(hex) == SHA256_HEX - 1 && strspn(hex, "0123456789abcdef") == SHA256_HEX - 1;
}

/* Options after the subcommand; `positional` receives the one argument. */
static int parse(int argc, char **argv, struct opts *o, const char **positional)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char **to = !strcmp(a, "--tenant")       ? &o->tenant
				  : !strcmp(a, "--reason")     ? &o->reason
				  : !strcmp(a, "--policy-dir") ? &o->policy_dir
							       : NULL;

		if (to) {
			if (i + 1 >= argc)
				return usage_error("missing value", a);
			*to = argv[++i];
		} else if (!strcmp(a, "--json")) {
			o->json = true;
		} else if (!strcmp(a, "--no-cache")) {
			o->no_cache = true;
		} else if (a[0] == '-' || !positional || *positional) {
			return usage_error("unexpected argument", a);
		} else {
			*positional = a;
		}
	}
	if (o->tenant && !tenant_name_valid(o->tenant))
		return usage_error("not a tenant name ([a-z0-9][a-z0-9_-]{0,62})", o->tenant);
	if (!o->policy_dir)
		o->policy_dir = policy_dir_default();
	return 0;
}

static int revoke(int argc, char **argv, bool add)
{
	struct artifact_revocation r = { 0 };
	struct opts o = { 0 };
	char detail[PATH_MAX + 256];
	int ret = parse(argc, argv, &o, &o.digest);

	if (ret)
		return ret;
	if (!o.digest || !digest_valid(o.digest))
		return usage_error("expected a SHA-256 digest (64 lowercase hex digits)", o.digest);
	if (!o.tenant)
		return usage_error("--tenant is required", NULL);
	if (add && (!o.reason || !*o.reason || strchr(o.reason, '\n')))
		return usage_error("--reason TEXT is required (one line)", NULL);
	if (!add && o.reason)
		return usage_error("unrevoke takes no --reason", NULL);
	if (add) {
		snprintf(r.sha256, sizeof(r.sha256), "%s", o.digest);
		snprintf(r.tenant, sizeof(r.tenant), "%s", o.tenant);
		snprintf(r.reason, sizeof(r.reason), "%s", o.reason);
		r.at = (long long)time(NULL);
		ret = artifact_revoke(o.policy_dir, &r, detail, sizeof(detail));
	} else {
		ret = artifact_unrevoke(o.policy_dir, o.tenant, o.digest, detail, sizeof(detail));
	}
	if (ret == -EEXIST || (ret == -ENOENT && !add)) { /* already as asked */
		printf("%s\n", detail);
		return SG_EXIT_OK;
	}
	if (ret) {
		fprintf(stderr, "sandguard artifact: %s\n", detail);
		return SG_EXIT_PLATFORM;
	}
	printf("sha256:%s %s for tenant %s (%s/%s)\n", o.digest, add ? "revoked" : "re-admitted",
	       o.tenant, o.policy_dir, ARTIFACT_REVOKED_FILE);
	return SG_EXIT_OK;
}

struct listing {
	const char *tenant;
	json_t *all; /* --json */
};

static int print_one(const struct artifact_revocation *r, void *arg)
{
	struct listing *l = arg;
	time_t at = (time_t)r->at;
	char when[32] = "?";

	if (l->tenant && strcmp(l->tenant, r->tenant))
		return 0;
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&at));
	if (l->all)
		return json_array_append_new(l->all,
					     json_pack("{s:s, s:s, s:s, s:s}", "sha256", r->sha256,
						       "tenant", r->tenant, "revoked_at", when,
						       "reason", r->reason))
			       ? -ENOMEM
			       : 0;
	printf("%s %-16s %s %s\n", r->sha256, r->tenant, when, r->reason);
	return 0;
}

static int list(int argc, char **argv)
{
	struct opts o = { 0 };
	struct listing l = { 0 };
	int ret = parse(argc, argv, &o, NULL);

	if (ret)
		return ret;
	l.tenant = o.tenant;
	if (o.json && !(l.all = json_array()))
		return SG_EXIT_PLATFORM;
	ret = artifact_revoked_each(o.policy_dir, print_one, &l);
	if (ret) {
		fprintf(stderr, "sandguard artifact: cannot read %s/%s: %s\n", o.policy_dir,
			ARTIFACT_REVOKED_FILE,
			ret == -EBADMSG ? "a malformed line" : strerror(-ret));
		json_decref(l.all);
		return SG_EXIT_PLATFORM;
	}
	if (l.all) {
		json_dumpf(l.all, stdout, JSON_INDENT(2));
		putchar('\n');
		json_decref(l.all);
	}
	return SG_EXIT_OK;
}

static int digest(int argc, char **argv)
{
	struct opts o = { 0 };
	char hex[SHA256_HEX], detail[PATH_MAX + 256];
	int ret = parse(argc, argv, &o, &o.path);

	if (ret)
		return ret;
	if (!o.path)
		return usage_error("digest takes a PATH", NULL);
	ret = artifact_digest_path(o.path, !o.no_cache, hex, detail, sizeof(detail));
	if (ret) {
		fprintf(stderr, "sandguard artifact: %s\n", detail);
		return ret == -ENOENT || ret == -EINVAL ? SG_EXIT_TENANT : SG_EXIT_PLATFORM;
	}
	printf("%s  %s\n", hex, o.path);
	return SG_EXIT_OK;
}

static int manifest(int argc, char **argv)
{
	struct opts o = { 0 };
	char detail[PATH_MAX + 256], *text = NULL;
	size_t n = 0;
	int ret = parse(argc, argv, &o, &o.path);

	if (ret)
		return ret;
	if (!o.path)
		return usage_error("manifest takes a DIR", NULL);
	ret = artifact_manifest(o.path, &text, &n, detail, sizeof(detail));
	if (ret) {
		fprintf(stderr, "sandguard artifact: %s\n", detail);
		return ret == -ENOENT || ret == -EINVAL || ret == -ENOTDIR ? SG_EXIT_TENANT
									   : SG_EXIT_PLATFORM;
	}
	fwrite(text, 1, n, stdout);
	free(text);
	return SG_EXIT_OK;
}

int cmd_artifact(int argc, char **argv)
{
	const char *sub = argc > 1 ? argv[1] : NULL;

	if (!sub || !strcmp(sub, "--help") || !strcmp(sub, "-h")) {
		usage(sub ? stdout : stderr);
		return sub ? SG_EXIT_OK : SG_EXIT_USAGE;
	}
	if (!strcmp(sub, "revoke"))
		return revoke(argc - 1, argv + 1, true);
	if (!strcmp(sub, "unrevoke"))
		return revoke(argc - 1, argv + 1, false);
	if (!strcmp(sub, "ls"))
		return list(argc - 1, argv + 1);
	if (!strcmp(sub, "digest"))
		return digest(argc - 1, argv + 1);
	if (!strcmp(sub, "manifest"))
		return manifest(argc - 1, argv + 1);
	return usage_error("unknown subcommand", sub);
}

/* sandguard tenant: the paused-tenant state (see tenant_state.h).
 *   tenant list [--json]           paused tenants, with when and why
 *   tenant pause T [--reason TEXT]
 *   tenant resume T                (a tenant that is not paused: says so, exit 0) */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include "commands.h"
#include "policy/policy.h"
#include "node/tenant_state.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sandguard tenant list [--json]\n"
		"       sandguard tenant pause T [--reason TEXT]\n"
		"       sandguard tenant resume T\n"
		"\n"
		"A paused tenant's batches are refused with cause tenant_paused until it is resumed.\n"
		"State: $SANDGUARD_STATE_DIR/paused (default %s/paused).\n",
		SG_STATE_DIR_DEFAULT);
}

static int usage_error(const char *msg, const char *arg)
{
	fprintf(stderr, "sandguard tenant: %s%s%s\n(see 'sandguard tenant --help')\n", msg,
		arg ? ": " : "", arg ? arg : "");
	return SG_EXIT_USAGE;
}

static int print_text(const char *tenant, const char *info, void *arg)
{
	json_t *j = json_loads(info, 0, NULL);
	const char *at = json_string_value(json_object_get(j, "paused_at"));
	const char *why = json_string_value(json_object_get(j, "reason"));

	printf("%-24s paused since %s%s%s\n", tenant, at ? at : "?", why && *why ? ": " : "",
	       why ? why : "");
	json_decref(j);
	return 0;
}

static int collect_json(const char *tenant, const char *info, void *arg)
{
	json_t *j = json_loads(info, 0, NULL);

	if (!j) /* an unreadable record still lists the tenant */
		j = json_pack("{s:s}", "tenant", tenant);
	return json_array_append_new(arg, j) ? -ENOMEM : 0;
}

static int list(int argc, char **argv)
{
	bool as_json = argc == 2 && !strcmp(argv[1], "--json");
	json_t *all = NULL;
	int ret;

	if (argc > 2 || (argc == 2 && !as_json))
		return usage_error("tenant list takes only --json", argc > 1 ? argv[1] : NULL);
	if (as_json) {
		all = json_array();
		ret = all ? tenant_list_paused(collect_json, all) : -ENOMEM;
		if (!ret) {
			json_dumpf(all, stdout, JSON_COMPACT);
			putchar('\n');
		}
		json_decref(all);
	} else {
		ret = tenant_list_paused(print_text, NULL);
	}
	if (ret) {
		fprintf(stderr, "sandguard tenant: cannot list paused tenants: %s\n",
			strerror(-ret));
		return SG_EXIT_PLATFORM;
	}
	return SG_EXIT_OK;
}

static int pause_cmd(int argc, char **argv)
{
	const char *reason = "paused by an operator";
	int ret;

	if (argc != 2 && !(argc == 4 && !strcmp(argv[2], "--reason")))
		return usage_error("usage: tenant pause T [--reason TEXT]", NULL);
	if (!tenant_name_valid(argv[1]))
		return usage_error("invalid tenant name (expected [a-z0-9][a-z0-9_-]{0,62})",
				   argv[1]);
	if (argc == 4)
		reason = argv[3];
	ret = tenant_pause(argv[1], reason);
	if (ret) {
		fprintf(stderr, "sandguard tenant: cannot pause %s: %s\n", argv[1], strerror(-ret));
		return SG_EXIT_PLATFORM;
	}
	printf("tenant %s paused\n", argv[1]);
	return SG_EXIT_OK;
}

static int resume_cmd(int argc, char **argv)
{
	int ret;

	if (argc != 2)
		return usage_error("usage: tenant resume T", NULL);
	if (!tenant_name_valid(argv[1]))
		return usage_error("invalid tenant name (expected [a-z0-9][a-z0-9_-]{0,62})",
				   argv[1]);
	ret = tenant_resume(argv[1]);
	if (ret == -ENOENT) {
		printf("tenant %s was not paused\n", argv[1]);
		return SG_EXIT_OK;
	}
	if (ret) {
		fprintf(stderr, "sandguard tenant: cannot resume %s: %s\n", argv[1],
			strerror(-ret));
		return SG_EXIT_PLATFORM;
	}
	printf("tenant %s resumed\n", argv[1]);
	return SG_EXIT_OK;
}

int cmd_tenant(int argc, char **argv)
{
	if (argc < 2)
		return usage_error("missing subcommand (list, pause, resume)", NULL);
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return SG_EXIT_OK;
	}
	if (!strcmp(argv[1], "list"))
		return list(argc - 1, argv + 1);
	if (!strcmp(argv[1], "pause"))
		return pause_cmd(argc - 1, argv + 1);
	if (!strcmp(argv[1], "resume"))
		return resume_cmd(argc - 1, argv + 1);
	return usage_error("unknown subcommand", argv[1]);
}

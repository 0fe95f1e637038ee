/* sandguard status: agent health, feature modes, drops, policy generation,
 * the ledger (its journal fold, checkpoint and rebuilds) and the journal's
 * disk. --check: exit 0 only if the agent answers, its programs are
 * attached, enforcement is not degraded and the journal's disk is above its
 * reserve (what a liveness/readiness probe runs). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <jansson.h>
#include "control/agent_client.h"
#include "commands.h"
#include "control/pinned.h"

static long long num(json_t *st, const char *key)
{
	return json_integer_value(json_object_get(st, key));
}

static double mib(json_t *o, const char *key)
{
	return (double)num(o, key) / (1 << 20);
}

/* The ledger (a fold of the journal) and the journal's disk. */
static void print_ledger(json_t *st)
{
	json_t *l = json_object_get(st, "ledger"), *j = json_object_get(st, "journal");
	json_t *last = json_object_get(l, "last_rebuild"),
	       *rebuilds = json_object_get(l, "rebuilds");
	json_t *saved = json_object_get(l, "checkpoint_saved"), *v;
	const char *key, *err = json_string_value(json_object_get(l, "checkpoint_error"));
	char when[64] = "not yet";
	time_t t;

	if (!l || !j)
		return;
	if (json_is_integer(saved)) {
		t = json_integer_value(saved);
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
	}
	printf("ledger       %lld outcomes folded from the journal (%lld duplicate ids ignored, "
	       "%lld bad records, %lld segments missing)%s\n",
	       num(l, "folded"), num(l, "duplicates"), num(l, "bad_records"),
	       num(l, "gap_segments"),
	       json_is_true(json_object_get(l, "catching_up")) ? ", catching up" : "");
	printf("checkpoint   %s, saved %s\n", json_string_value(json_object_get(l, "checkpoint")),
	       when);
	if (err)
		printf("CHECKPOINT   %s\n", err);
	if (json_is_object(last)) {
		t = num(last, "at");
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
		printf("REBUILT      %s:", when);
		json_object_foreach(rebuilds, key, v)
			printf(" %s x%lld", key, (long long)json_integer_value(v));
		printf("\n             %s\n", json_string_value(json_object_get(last, "why")));
	}
	printf("journal      %s: %.1f MiB free (reserve %.1f MiB)\n",
	       json_string_value(json_object_get(j, "dir")), mib(j, "free_bytes"),
	       mib(j, "reserve_bytes"));
	if (!json_is_true(json_object_get(j, "disk_ok")))
		printf("DISK FULL    %s\n", json_string_value(json_object_get(j, "disk_error")));
}

static void print_human(json_t *st)
{
	json_t *modes = json_object_get(st, "modes"), *features = json_object_get(st, "features");
	json_t *tenants = json_object_get(st, "tenants"), *v;
	time_t started = num(st, "started");
	const char *key;
	size_t i;
	char when[64];

	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&started));
	printf("agent        running (pid %lld, version %s, node %s, up since %s)\n",
	       num(st, "pid"), json_string_value(json_object_get(st, "version")),
	       json_string_value(json_object_get(st, "node")), when);
	printf("programs     generation %lld, %lld attached\n", num(st, "generation"),
	       num(st, "links"));
	printf("files        %-9s %s\n", json_string_value(json_object_get(modes, "files")),
	       json_string_value(json_object_get(modes, "files_why")));
	printf("execs        %-9s %s\n", json_string_value(json_object_get(modes, "execs")),
	       json_string_value(json_object_get(modes, "execs_why")));
	printf("events       %lld seen, %lld ring-buffer drops, %lld lost in userspace\n",
	       num(st, "events_seen"), num(st, "ringbuf_drops"), num(st, "events_lost"));
	printf("kills        %lld (mean violation-to-empty %.2f ms)\n", num(st, "kills"),
	       json_real_value(json_object_get(st, "kill_latency_avg_ms")));
	printf("policies     generation %lld (%lld reloads ok, %lld failed)\n",
	       num(st, "policy_generation"), num(st, "policy_reloads_ok"),
	       num(st, "policy_reloads_failed"));
	printf("sandboxes    %lld enforced\n", num(st, "sandboxes"));
	print_ledger(st);
	if (json_is_string(json_object_get(st, "degraded")))
		printf("DEGRADED     %s\n", json_string_value(json_object_get(st, "degraded")));
	printf("\nfeatures:\n");
	json_object_foreach(features, key, v)
		printf("  %-22s %-4s %s\n", key,
		       json_is_true(json_object_get(v, "ok")) ? "yes" : "no",
		       json_string_value(json_object_get(v, "detail")));
	printf("\n%-24s %8s  %s\n", "TENANT", "ACTIVE", "POLICY");
	json_array_foreach(tenants, i, v)
		printf("%-24s %8lld  %s%s\n", json_string_value(json_object_get(v, "tenant")),
		       (long long)json_integer_value(json_object_get(v, "active_sandboxes")),
		       json_string_value(json_object_get(v, "policy")),
		       json_is_true(json_object_get(v, "policy_ok"))
			       ? ""
			       : " (REJECTED: denied everything)");
}

int cmd_status(int argc, char **argv)
{
	static const struct option opts[] = { { "socket", required_argument, NULL, 's' },
					      { "json", no_argument, NULL, 'j' },
					      { "check", no_argument, NULL, 'c' },
					      { "help", no_argument, NULL, 'h' },
					      { 0 } };
	const char *sock = NULL;
	bool as_json = false, check = false;
	struct agent_conn *c;
	char *text = NULL;
	const char *degraded, *disk_error;
	json_t *st, *disk;
	int opt, links, rc;
	bool red;

	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 's':
			sock = optarg;
			break;
		case 'j':
			as_json = true;
			break;
		case 'c':
			check = true;
			break;
		case 'h':
			printf("usage: sandguard status [--json] [--check] [--socket PATH]\n");
			return SG_EXIT_OK;
		default:
			return SG_EXIT_USAGE;
		}
	}
	c = agent_connect(sock);
	if (!c || agent_status(c, &text)) {
		agent_close(c);
		links = sg_pinned_links();
		fprintf(stderr, "sandguard status: no agent answers on %s; %s\n",
			sock ? sock : (getenv("SANDGUARD_AGENT_SOCK") ?: SG_AGENT_SOCK),
			links > 0
				? "its pinned programs still enforce, but nothing reads events or kills sandboxes"
				: "no sandguard programs are attached");
		return SG_EXIT_TENANT;
	}
	agent_close(c);
	st = json_loads(text, 0, NULL);
	if (!st) {
		fprintf(stderr, "sandguard status: the agent's answer is not JSON\n");
		free(text);
		return SG_EXIT_PLATFORM;
	}
	links = json_integer_value(json_object_get(st, "links"));
	degraded = json_string_value(json_object_get(st, "degraded"));
	disk = json_object_get(json_object_get(st, "journal"), "disk_ok");
	disk_error =
		json_string_value(json_object_get(json_object_get(st, "journal"), "disk_error"));
	red = links <= 0 || degraded || json_is_false(disk);
	if (check) {
		if (links <= 0)
			fprintf(stderr,
				"sandguard status: the agent answers but has no programs attached\n");
		else if (degraded)
			fprintf(stderr, "sandguard status: enforcement degraded: %s\n", degraded);
		else if (json_is_false(disk))
			fprintf(stderr, "sandguard status: %s\n",
				disk_error ?: "journal disk full");
		else
			printf("ok: %d programs attached\n", links);
	} else if (as_json) {
		printf("%s\n", text);
	} else {
		print_human(st);
	}
	rc = check && red ? SG_EXIT_TENANT : SG_EXIT_OK;
	free(text);
	json_decref(st);
	return rc;
}

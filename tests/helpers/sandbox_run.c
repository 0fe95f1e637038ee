/* Test helper: run a command in one sandbox under a policy file and print
 * the sandbox_result as one JSON object on stdout.
 *
 *   sandbox_run --policy FILE [--tenant T] [--timeout-ms N] [--stdin FILE]
 *               [--file NAME=LOCALPATH]... [--fetch NAME]... [--exec-in-scratch]
 *               [--agent] -- CMD [ARGS...]
 *
 * Besides the result it reports "scratch" (the path the sandbox had) and
 * "maxrss_kb" (this process's peak RSS, VmHWM: the executor-side memory bound).
 * Exit status: 0 when the tenant code ran, 2 on a platform error, 64 usage. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include "control/agent_client.h"
#include "control/enforcer.h"
#include "policy/policy.h"
#include "sandbox/sandbox.h"
#include "lib/rule_names.h"

#define MAX_ITEMS 16

static const char *end_name(enum sandbox_end e)
{
	switch (e) {
	case SB_EXITED:
		return "exited";
	case SB_SIGNALED:
		return "signaled";
	case SB_TIMEOUT:
		return "timeout";
	case SB_OOM:
		return "oom";
	case SB_KILLED_BY_AGENT:
		return "killed_by_agent";
	case SB_FORK_LIMIT:
		return "fork_limit";
	case SB_OUTPUT_OVERSIZE:
		return "output_oversize";
	case SB_POLICY_REFUSED:
		return "policy_refused";
	case SB_RULE_TRIPPED:
		return "rule_tripped";
	}
	return "none";
}

static int read_file(const char *path, char **data, size_t *len)
{
	FILE *f = fopen(path, "rb");
	size_t cap = 4096, n = 0, got;
	char *buf;

	if (!f)
		return -errno;
	buf = malloc(cap);
	while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
		n += got;
		if (n == cap) {
			char *p = realloc(buf, cap *= 2);
			if (!p) {
				free(buf);
				buf = NULL;
			}
			buf = p;
		}
	}
	fclose(f);
	if (!buf)
		return -ENOMEM;
	*data = buf;
	*len = n;
	return 0;
}

/* JSON strings must be UTF-8; tenant output may not be. */
static json_t *text(const char *s, size_t n)
{
	json_t *j;
	char *copy;

	if (!s)
		return json_null();
	j = json_stringn(s, n);
	if (j)
		return j;
	copy = malloc(n + 1);
	for (size_t i = 0; copy && i < n; i++)
		copy[i] = (s[i] & 0x80) || s[i] == 0 ? '?' : s[i];
	j = copy ? json_stringn(copy, n) : json_null();
	free(copy);
	return j;
}

/* Peak RSS of this process image in kB: VmHWM, since getrusage's
 * ru_maxrss also remembers the image before execve (the test runner that
 * forked us). */
static long peak_rss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	long kb = -1;
	struct rusage ru;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	if (kb < 0 && getrusage(RUSAGE_SELF, &ru) == 0)
		kb = ru.ru_maxrss;
	return kb;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: sandbox_run --policy FILE [--tenant T] [--timeout-ms N] [--stdin FILE]\n"
		"                   [--file NAME=LOCALPATH]... [--fetch NAME]... [--exec-in-scratch]\n"
		"                   [--agent] -- CMD [ARGS...]\n");
	exit(64);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "policy", required_argument, NULL, 'p' },
		{ "tenant", required_argument, NULL, 't' },
		{ "timeout-ms", required_argument, NULL, 'T' },
		{ "stdin", required_argument, NULL, 'i' },
		{ "file", required_argument, NULL, 'f' },
		{ "fetch", required_argument, NULL, 'F' },
		{ "exec-in-scratch", no_argument, NULL, 'x' },
		{ "agent", no_argument, NULL, 'a' },
		{ 0 },
	};
	struct sandbox_file files[MAX_ITEMS];
	const char *fetch[MAX_ITEMS], *policy_path = NULL, *tenant = NULL;
	struct sandbox_spec spec = { 0 };
	struct agent_conn *agent = NULL;
	struct sandbox_result res;
	struct sg_policy_error perr;
	struct sg_policy policy;
	json_t *o, *fetched;
	char *in = NULL;
	size_t in_len = 0, n_files = 0, n_fetch = 0;
	int c, rc;

	while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			policy_path = optarg;
			break;
		case 't':
			tenant = optarg;
			break;
		case 'T':
			spec.timeout_ms = strtoull(optarg, NULL, 10);
			break;
		case 'i':
			if (read_file(optarg, &in, &in_len)) {
				fprintf(stderr, "sandbox_run: cannot read %s\n", optarg);
				return 64;
			}
			break;
		case 'f': {
			char *eq = strchr(optarg, '=');
			char *data;
			size_t len;

			if (!eq || n_files == MAX_ITEMS)
				usage();
			*eq = '\0';
			if (read_file(eq + 1, &data, &len)) {
				fprintf(stderr, "sandbox_run: cannot read %s\n", eq + 1);
				return 64;
			}
			files[n_files++] = (struct sandbox_file){ optarg, data, len, 0644 };
			break;
		}
		case 'F':
			if (n_fetch == MAX_ITEMS)
				usage();
			fetch[n_fetch++] = optarg;
			break;
		case 'x':
			spec.allow_exec_in_scratch = true;
			break;
		case 'a':
			agent = agent_connect(NULL);
			break;
		default:
			usage();
		}
	}
	/* The node's pinned maps enforce with or without an agent connected. */
	spec.enforcer = sg_kernel_enforcer(agent);
	if (!policy_path || optind >= argc)
		usage();
	if (policy_load_file(policy_path, &policy, &perr)) {
		char msg[512];
		policy_error_format(&perr, msg, sizeof(msg));
		fprintf(stderr, "sandbox_run: %s\n", msg);
		return 64;
	}
	spec.policy = &policy;
	spec.tenant = tenant ? tenant : policy.tenant;
	spec.argv = argv + optind;
	spec.stdin_data = in;
	spec.stdin_len = in_len;
	spec.files = files;
	spec.n_files = n_files;
	spec.fetch = fetch;
	spec.n_fetch = n_fetch;

	rc = sandbox_run(&spec, &res);

	o = json_object();
	json_object_set_new(o, "rc", json_integer(rc));
	json_object_set_new(o, "detail", text(res.detail, strlen(res.detail)));
	json_object_set_new(o, "sandbox_id", json_string(res.sandbox_id));
	json_object_set_new(o, "scratch",
			    json_sprintf("%s/%s/%s", policy.scratch_root, spec.tenant,
					 res.sandbox_id));
	json_object_set_new(o, "maxrss_kb", json_integer(peak_rss_kb()));
	if (rc == 0) {
		json_object_set_new(o, "end", json_string(end_name(res.end)));
		json_object_set_new(o, "exit_code", json_integer(res.exit_code));
		json_object_set_new(o, "signal", json_integer(res.signal));
		json_object_set_new(o, "rule",
				    res.rule >= 0 ? json_string(rule_name(res.rule)) : json_null());
		json_object_set_new(o, "out", text(res.out, res.out_len));
		json_object_set_new(o, "out_len", json_integer((json_int_t)res.out_len));
		json_object_set_new(o, "out_truncated", json_boolean(res.out_truncated));
		json_object_set_new(o, "err", text(res.err, res.err_len));
		json_object_set_new(o, "err_len", json_integer((json_int_t)res.err_len));
		json_object_set_new(o, "err_truncated", json_boolean(res.err_truncated));
		json_object_set_new(o, "wall_ms", json_integer((json_int_t)res.wall_ms));
		json_object_set_new(o, "cgroup_id", json_integer((json_int_t)res.cgroup_id));
		json_object_set_new(o, "agent_enforced", json_boolean(res.agent_enforced));
		fetched = json_array();
		for (size_t i = 0; i < res.n_fetched; i++) {
			struct sandbox_fetched *f = &res.fetched[i];
			json_array_append_new(
				fetched, json_pack("{s:s, s:o, s:I, s:b}", "path", f->path, "data",
						   text(f->data, f->len), "len", (json_int_t)f->len,
						   "truncated", f->truncated));
		}
		json_object_set_new(o, "fetched", fetched);
	}
	json_dumpf(o, stdout, JSON_COMPACT);
	putchar('\n');
	json_decref(o);
	sandbox_result_free(&res);
	free(in);
	for (size_t i = 0; i < n_files; i++)
		free((void *)files[i].data);
	if (agent)
		agent_close(agent);
	return rc == 0 ? 0 : 2;
}

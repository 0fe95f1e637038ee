/* sandguard session: environments' sessions from a shell, as an HTTP
 * client of `sandguard serve` (its /v1/sessions API, docs/environments.md).
 * One request per command, on a connection of its own. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "cli_opts.h"
#include "commands.h"
#include "lib/base64.h"
#include "lib/fs_util.h"

#define REPLY_MAX (64u << 20)

struct session_opts {
	const char *url, *token, *tenant, *run, *kernel, *setup, *stdin_file, *out;
	uint64_t timeout_ms;
	bool code, json;
	json_t *files; /* path -> base64 */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sandguard session create [--kernel none|bash|python] [--file PATH=LOCAL]...\n"
		"                                [--setup CMD]\n"
		"       sandguard session exec ID [--code] [--stdin FILE] [--timeout-ms N] CMD\n"
		"       sandguard session put ID PATH=LOCAL...\n"
		"       sandguard session get ID PATH [-o LOCAL]\n"
		"       sandguard session fork ID [N]\n"
		"       sandguard session ls\n"
		"       sandguard session rm ID\n"
		"options of every command:\n"
		"  --url URL      the server ($SANDGUARD_SERVE_URL, else http://127.0.0.1:8080)\n"
		"  --token T      a tenant token ($SANDGUARD_TOKEN)\n"
		"  --tenant T     the tenant (a server without tokens)\n"
		"  --run R        the run that owns the session (X-Sandguard-Run-Id)\n"
		"  --json         print the server's JSON\n"
		"exec runs CMD with sh -c, or, with --code, hands it to the session's kernel;\n"
		"it prints the step's stdout and stderr and exits with its status.\n");
}

static const struct cli_command session_cmd = { "session", usage, true };

/* "http://host:port": host and port. 0, or -EINVAL. */
static int parse_url(const char *url, char *host, size_t hlen, char *port, size_t plen)
{
	const char *h, *colon;

	if (strncmp(url, "http://", 7))
		return -EINVAL;
	h = url + 7;
	colon = strrchr(h, ':');
	if (!colon || colon == h || (size_t)(colon - h) >= hlen)
		return -EINVAL;
	snprintf(host, hlen, "%.*s", (int)(colon - h), h);
	snprintf(port, plen, "%.*s", (int)strcspn(colon + 1, "/"), colon + 1);
	if (host[0] == '[') { /* [::1] */
		memmove(host, host + 1, strlen(host));
		host[strcspn(host, "]")] = '\0';
	}
	return port[0] ? 0 : -EINVAL;
}

static int connect_to(const char *host, const char *port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai, *a;
	int fd = -1;

	if (getaddrinfo(host, port, &hints, &ai))
		return -1;
	for (a = ai; a && fd < 0; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0);
		if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen)) {
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(ai);
	return fd;
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* POST path with body; *status and *reply (the parsed JSON). 0, or -1
 * with a message printed. */
static int post(const struct session_opts *o, const char *path, json_t *body, int *status,
		json_t **reply)
{
	char host[256], port[16], head[2048], *text = json_dumps(body, JSON_COMPACT), *buf;
	size_t got = 0;
	int fd, n;
	json_error_t jerr;
	char *start;

	if (!text || parse_url(o->url, host, sizeof(host), port, sizeof(port))) {
		fprintf(stderr, "sandguard session: --url %s: expected http://HOST:PORT\n", o->url);
		free(text);
		return -1;
	}
	fd = connect_to(host, port);
	if (fd < 0) {
		fprintf(stderr, "sandguard session: cannot connect to %s: %s\n", o->url,
			strerror(errno));
		free(text);
		return -1;
	}
	n = snprintf(
		head, sizeof(head),
		"POST %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n"
		"Content-Type: application/json\r\nContent-Length: %zu\r\n%s%s%s%s%s%s%s%s%s\r\n",
		path, host, strlen(text), o->token ? "Authorization: Bearer " : "",
		o->token ? o->token : "", o->token ? "\r\n" : "",
		o->tenant ? "X-Sandguard-Tenant: " : "", o->tenant ? o->tenant : "",
		o->tenant ? "\r\n" : "", o->run ? "X-Sandguard-Run-Id: " : "", o->run ? o->run : "",
		o->run ? "\r\n" : "");
	buf = malloc(REPLY_MAX + 1);
	if (!buf || n >= (int)sizeof(head) || send_all(fd, head, (size_t)n) ||
	    send_all(fd, text, strlen(text))) {
		fprintf(stderr, "sandguard session: cannot send the request to %s\n", o->url);
		goto fail;
	}
	for (;;) {
		ssize_t r = recv(fd, buf + got, REPLY_MAX - got, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || (got += (size_t)r) == REPLY_MAX)
			break;
	}
	buf[got] = '\0';
	start = strstr(buf, "\r\n\r\n");
	if (sscanf(buf, "HTTP/1.%*d %d", status) != 1 || !start) {
		fprintf(stderr, "sandguard session: no HTTP reply from %s\n", o->url);
		goto fail;
	}
	*reply = json_loads(start + 4, 0, &jerr);
	if (!*reply) {
		fprintf(stderr, "sandguard session: the reply is not JSON: %s\n", jerr.text);
		goto fail;
	}
	close(fd);
	free(buf);
	free(text);
	return 0;
fail:
	close(fd);
	free(buf);
	free(text);
	return -1;
}

/* "PATH=LOCAL": the local file read into files[PATH] (base64). */
static int add_file(json_t *files, const char *spec)
{
	const char *eq = strchr(spec, '=');
	char path[4096], *data = NULL, *b64;
	size_t len = 0;

	if (!eq || eq == spec || (size_t)(eq - spec) >= sizeof(path))
		return cli_usage_error(&session_cmd, "'%s': expected PATH=LOCAL_FILE", spec);
	snprintf(path, sizeof(path), "%.*s", (int)(eq - spec), spec);
	int err = fs_read_all(eq + 1, 64u << 20, &data, &len);

	if (err) {
		fprintf(stderr, "sandguard session: cannot read %s: %s\n", eq + 1, strerror(-err));
		return SG_EXIT_USAGE;
	}
	b64 = base64_encode(data, len, NULL);
	free(data);
	if (!b64)
		return SG_EXIT_PLATFORM;
	json_object_set_new(files, path, json_string(b64));
	free(b64);
	return 0;
}

/* The step's outputs on ours; its status as our exit code (128+signal,
 * 124 a timeout, 137 a session ended by a kill). */
static int print_step(json_t *r)
{
	const char *out = json_string_value(json_object_get(r, "stdout"));
	const char *err = json_string_value(json_object_get(r, "stderr"));
	const char *status = json_string_value(json_object_get(r, "status"));
	json_t *code = json_object_get(r, "exit_code");

	fputs(out ? out : "", stdout);
	fputs(err ? err : "", stderr);
	if (json_is_true(json_object_get(r, "session_ended")))
		fprintf(stderr, "sandguard session: the session ended: %s%s%s\n",
			json_string_value(json_object_get(r, "cause")),
			json_is_string(json_object_get(r, "rule")) ? ", rule " : "",
			json_is_string(json_object_get(r, "rule"))
				? json_string_value(json_object_get(r, "rule"))
				: "");
	if (status && !strcmp(status, "timeout"))
		return 124;
	if (json_is_integer(code))
		return (int)json_integer_value(code) & 0xff;
	return json_is_integer(json_object_get(r, "signal"))
		       ? 128 + (int)json_integer_value(json_object_get(r, "signal"))
		       : 137;
}

static int print_reply(const struct session_opts *o, const char *verb, int status, json_t *r)
{
	const char *error = json_string_value(json_object_get(r, "error"));
	json_t *v;
	size_t i;

	if (status >= 400) {
		fprintf(stderr, "sandguard session %s: HTTP %d: %s\n", verb, status,
			error ? error : "(no reason)");
		return status == 429 || status == 409 || status >= 500 ? SG_EXIT_PLATFORM
								       : SG_EXIT_TENANT;
	}
	if (o->json) {
		json_dumpf(r, stdout, JSON_INDENT(1));
		putchar('\n');
		return SG_EXIT_OK;
	}
	if (!strcmp(verb, "exec"))
		return print_step(r);
	if (!strcmp(verb, "create")) {
		printf("%s\n", json_string_value(json_object_get(r, "session")));
		return json_object_get(r, "setup") ? print_step(json_object_get(r, "setup")) : 0;
	}
	if (!strcmp(verb, "fork")) {
		json_array_foreach(json_object_get(r, "forks"), i, v)
			printf("%s\n", json_string_value(v));
	}
	if (!strcmp(verb, "ls")) {
		printf("%-22s %-16s %-7s %6s %8s %10s %s\n", "SESSION", "SANDBOX", "KERNEL",
		       "STEPS", "CPU_S", "IDLE_MS", "BUSY");
		json_array_foreach(json_object_get(r, "sessions"), i, v)
			printf("%-22s %-16s %-7s %6lld %8.3f %10lld %s\n",
			       json_string_value(json_object_get(v, "session")),
			       json_string_value(json_object_get(v, "sandbox")),
			       json_string_value(json_object_get(v, "kernel")),
			       (long long)json_integer_value(json_object_get(v, "steps")),
			       json_real_value(json_object_get(v, "cpu_s")),
			       (long long)json_integer_value(json_object_get(v, "idle_ms")),
			       json_is_true(json_object_get(v, "busy")) ? "yes" : "no");
	}
	return SG_EXIT_OK;
}

/* get: the file's bytes to stdout or -o. */
static int write_got(const struct session_opts *o, const char *path, json_t *r)
{
	const char *b64 = json_string_value(json_object_get(json_object_get(r, "files"), path));
	unsigned char *data;
	size_t len;
	char why[128];
	FILE *f;

	if (!b64) {
		fprintf(stderr, "sandguard session get: %s: no such file in the session\n", path);
		return SG_EXIT_TENANT;
	}
	if (base64_decode(b64, strlen(b64), &data, &len, why, sizeof(why))) {
		fprintf(stderr, "sandguard session get: %s\n", why);
		return SG_EXIT_PLATFORM;
	}
	f = o->out ? fopen(o->out, "wb") : stdout;
	if (!f || fwrite(data, 1, len, f) != len || (o->out && fclose(f))) {
		fprintf(stderr, "sandguard session get: cannot write %s\n",
			o->out ? o->out : "stdout");
		free(data);
		return SG_EXIT_PLATFORM;
	}
	free(data);
	return SG_EXIT_OK;
}

static int parse_opts(int argc, char **argv, struct session_opts *o)
{
	enum {
		O_URL = 1,
		O_TOKEN,
		O_TENANT,
		O_RUN,
		O_KERNEL,
		O_FILE,
		O_SETUP,
		O_STDIN,
		O_TIMEOUT,
		O_CODE,
		O_JSON
	};
	static const struct option longopts[] = {
		{ "url", required_argument, NULL, O_URL },
		{ "token", required_argument, NULL, O_TOKEN },
		{ "tenant", required_argument, NULL, O_TENANT },
		{ "run", required_argument, NULL, O_RUN },
		{ "kernel", required_argument, NULL, O_KERNEL },
		{ "file", required_argument, NULL, O_FILE },
		{ "setup", required_argument, NULL, O_SETUP },
		{ "stdin", required_argument, NULL, O_STDIN },
		{ "timeout-ms", required_argument, NULL, O_TIMEOUT },
		{ "code", no_argument, NULL, O_CODE },
		{ "json", no_argument, NULL, O_JSON },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, err;

	o->url = getenv("SANDGUARD_SERVE_URL") ? getenv("SANDGUARD_SERVE_URL")
					       : "http://127.0.0.1:8080";
	o->token = getenv("SANDGUARD_TOKEN");
	cli_options_begin();
	while ((c = getopt_long(argc, argv, ":ho:", longopts, NULL)) != -1) {
		switch (c) {
		case O_URL:
			o->url = optarg;
			break;
		case O_TOKEN:
			o->token = optarg;
			break;
		case O_TENANT:
			o->tenant = optarg;
			break;
		case O_RUN:
			o->run = optarg;
			break;
		case O_KERNEL:
			o->kernel = optarg;
			break;
		case O_SETUP:
			o->setup = optarg;
			break;
		case O_STDIN:
			o->stdin_file = optarg;
			break;
		case O_CODE:
			o->code = true;
			break;
		case O_JSON:
			o->json = true;
			break;
		case 'o':
			o->out = optarg;
			break;
		case O_TIMEOUT:
			o->timeout_ms = strtoull(optarg, NULL, 10);
			if (!o->timeout_ms)
				return cli_usage_error(&session_cmd,
						       "--timeout-ms '%s': a positive integer",
						       optarg);
			break;
		case O_FILE:
			if ((err = add_file(o->files, optarg)))
				return err;
			break;
		default:
			return cli_option_common(&session_cmd, c, argv);
		}
	}
	return 0;
}

/* The request of `verb` on the positional arguments args[0..n). */
static int request(struct session_opts *o, const char *verb, char **args, int n, char *path,
		   size_t plen, json_t *body)
{
	const char *id = n > 0 ? args[0] : NULL;

	if (!strcmp(verb, "create") || !strcmp(verb, "ls")) {
		if (n)
			return cli_usage_error(&session_cmd, "'%s': unexpected argument", args[0]);
		snprintf(path, plen, "/v1/sessions%s", *verb == 'l' ? "/list" : "");
		if (o->kernel)
			json_object_set_new(body, "kernel", json_string(o->kernel));
		if (o->setup)
			json_object_set_new(body, "setup", json_string(o->setup));
		if (json_object_size(o->files)) {
			json_object_set(body, "files", o->files);
			json_object_set_new(body, "encoding", json_string("base64"));
		}
		return 0;
	}
	if (!id)
		return cli_usage_error(&session_cmd, "%s: which session? give its id", verb);
	if (!strcmp(verb, "exec")) {
		if (n != 2)
			return cli_usage_error(&session_cmd, "%s",
					       "exec ID CMD: give the command as one argument");
		json_object_set_new(body, o->code ? "code" : "command", json_string(args[1]));
		if (o->timeout_ms)
			json_object_set_new(body, "timeout_ms",
					    json_integer((json_int_t)o->timeout_ms));
		if (o->stdin_file) {
			char *data;
			size_t len;
			int err = fs_read_all(o->stdin_file, 64u << 20, &data, &len);

			if (err)
				return cli_usage_error(&session_cmd, "--stdin %s: cannot read it",
						       o->stdin_file);
			json_object_set_new(body, "stdin", json_stringn(data, len));
			free(data);
		}
	} else if (!strcmp(verb, "put")) {
		for (int i = 1; i < n; i++) {
			int err = add_file(o->files, args[i]);

			if (err)
				return err;
		}
		if (n < 2)
			return cli_usage_error(&session_cmd, "%s",
					       "put ID PATH=LOCAL...: which files?");
		json_object_set(body, "files", o->files);
		json_object_set_new(body, "encoding", json_string("base64"));
	} else if (!strcmp(verb, "get")) {
		if (n != 2)
			return cli_usage_error(&session_cmd, "%s", "get ID PATH: which file?");
		json_object_set_new(body, "paths", json_pack("[s]", args[1]));
	} else if (!strcmp(verb, "fork")) {
		if (n > 2)
			return cli_usage_error(&session_cmd, "'%s': unexpected argument", args[2]);
		json_object_set_new(body, "n", json_integer(n == 2 ? atoi(args[1]) : 1));
	} else if (strcmp(verb, "rm")) {
		return cli_usage_error(&session_cmd, "unknown command '%s'", verb);
	}
	snprintf(path, plen, "/v1/sessions/%s/%s", id,
		 !strcmp(verb, "rm")     ? "close"
		 : !strcmp(verb, "exec") ? "exec"
					 : verb);
	return 0;
}

int cmd_session(int argc, char **argv)
{
	struct session_opts o = { .files = json_object() };
	json_t *body = json_object(), *reply = NULL;
	char path[512];
	const char *verb;
	int status = 0, ret;

	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		ret = argc < 2 ? SG_EXIT_USAGE : SG_EXIT_OK;
		goto out;
	}
	verb = argv[1];
	ret = parse_opts(argc - 1, argv + 1, &o);
	if (ret) {
		ret = ret < 0 ? SG_EXIT_OK : ret;
		goto out;
	}
	ret = request(&o, verb, argv + 1 + optind, argc - 1 - optind, path, sizeof(path), body);
	if (ret)
		goto out;
	if (post(&o, path, body, &status, &reply)) {
		ret = SG_EXIT_PLATFORM;
		goto out;
	}
	ret = !strcmp(verb, "get") && status < 400 && !o.json
		      ? write_got(&o,
				  json_string_value(
					  json_array_get(json_object_get(body, "paths"), 0)),
				  reply)
		      : print_reply(&o, verb, status, reply);
out:
	json_decref(reply);
	json_decref(body);
	json_decref(o.files);
	return ret;
}

/* Tenant tokens (serve_auth.c) and what the server does with them
 * (serve_route.c), without sockets: which directories load and the exact
 * error for each that does not (never quoting a token); lookups; a rotated
 * directory applies and a broken one leaves the previous tokens in force;
 * and requests: no token or an unknown one is 401 with a Bearer
 * challenge, a token of another tenant than the one named is 403, the
 * token's tenant otherwise; a refused request never runs, is never booked
 * and leaves no tenant behind in the admission gate. */
#include <errno.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include "lib/log.h"
#include "serve/serve_auth.h"
#include "serve/serve_internal.h"
#include "serve_fixture.h"

#define TOK_ACME  "acme-0123456789abcdefghijklmnopqrstuv"
#define TOK_ACME2 "acme-second-token-0123456789abcdefghij"
#define TOK_BOB   "bob_0123456789ABCDEFGHIJKLMNOPQRSTUVW"

static char tmp[64], tokdir[128];
static struct serve srv;
static int runs;

static int fake_run(const struct sandbox_spec *spec, struct sandbox_result *r)
{
	runs++;
	memset(r, 0, sizeof(*r));
	r->end = SB_EXITED;
	r->rule = -1;
	r->out = strdup("1\n");
	r->out_len = 2;
	r->err = strdup("");
	return 0;
}

/* A fresh token directory: `files` is name, text, name, text, ..., NULL. */
static const char *token_dir(const char *name, ...)
{
	static char dir[160];
	char cmd[256];
	va_list ap;
	const char *f;

	snprintf(dir, sizeof(dir), "%s/%s", tmp, name);
	snprintf(cmd, sizeof(cmd), "rm -rf %s && mkdir -p %s", dir, dir);
	assert_int_equal(system(cmd), 0);
	va_start(ap, name);
	while ((f = va_arg(ap, const char *)))
		fixture_write(dir, f, va_arg(ap, const char *), 0600);
	va_end(ap);
	return dir;
}

static void expect_load_error(const char *dir, int want, const char *want_in_err)
{
	struct serve_tokens *t = NULL;
	char err[512] = "";

	assert_int_equal(serve_tokens_open(dir, &t, err, sizeof(err)), want);
	assert_null(t);
	if (!strstr(err, want_in_err))
		fail_msg("error \"%s\" does not say \"%s\"", err, want_in_err);
	/* No error message ever quotes a token. */
	assert_null(strstr(err, "0123456789"));
}

static int setup(void **state)
{
	char dir[128], err[512];

	snprintf(tmp, sizeof(tmp), "/tmp/sg-test-auth-XXXXXX");
	serve_fixture_dirs(tmp, dir, sizeof(dir));
	snprintf(tokdir, sizeof(tokdir), "%s",
		 token_dir("tokens", "acme",
			   "# rotated on Monday\n" TOK_ACME "\n\n  " TOK_ACME2 " \n", "bob",
			   TOK_BOB, NULL));

	serve_fixture_server(&srv, dir, fake_run);
	assert_int_equal(serve_tokens_open(tokdir, &srv.tokens, err, sizeof(err)), 0);
	sg_log_set_level(SG_LOG_ERROR);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	serve_tokens_free(srv.tokens);
	gate_free(srv.gate);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static void test_loading(void **state)
{
	struct serve_tokens *t;
	char tenant[SG_TENANT_MAX], err[512];

	assert_int_equal(serve_tokens_count(srv.tokens), 3);
	assert_true(serve_tokens_lookup(srv.tokens, TOK_ACME, strlen(TOK_ACME), tenant));
	assert_string_equal(tenant, "acme");
	assert_true(serve_tokens_lookup(srv.tokens, TOK_ACME2, strlen(TOK_ACME2), tenant));
	assert_string_equal(tenant, "acme");
	assert_true(serve_tokens_lookup(srv.tokens, TOK_BOB, strlen(TOK_BOB), tenant));
	assert_string_equal(tenant, "bob");
	/* Near misses: a prefix, one more character, one character off. */
	assert_false(serve_tokens_lookup(srv.tokens, TOK_ACME, strlen(TOK_ACME) - 1, tenant));
	assert_false(serve_tokens_lookup(srv.tokens, TOK_ACME "x", strlen(TOK_ACME) + 1, tenant));
	assert_false(serve_tokens_lookup(srv.tokens, "bcme-0123456789abcdefghijklmnopqrstuv",
					 strlen(TOK_ACME), tenant));
	assert_false(serve_tokens_lookup(srv.tokens, "", 0, tenant));
	assert_false(serve_tokens_lookup(srv.tokens, "acme", 4, tenant));

	/* A Kubernetes Secret volume: ..data and ..<timestamp> are skipped. */
	t = NULL;
	assert_int_equal(
		serve_tokens_open(token_dir("k8s", "..data", "junk", "acme", TOK_ACME, NULL), &t,
				  err, sizeof(err)),
		0);
	assert_int_equal(serve_tokens_count(t), 1);
	serve_tokens_free(t);

	expect_load_error(token_dir("empty", NULL), -ENOENT, "holds no token");
	expect_load_error(token_dir("comments", "acme", "# nothing yet\n", NULL), -ENOENT,
			  "holds no token");
	expect_load_error(token_dir("badname", "Acme", TOK_ACME, NULL), -EINVAL,
			  "Acme: not a tenant name");
	expect_load_error(token_dir("short", "acme", "tooshort\n", NULL), -EINVAL,
			  "acme:1: not a token: expected 32 to 128 characters");
	expect_load_error(token_dir("space", "acme",
				    "# c\nacme-0123456789 abcdefghijklmnopqrstuv\n", NULL),
			  -EINVAL, "acme:2: not a token");
	expect_load_error(token_dir("twice", "acme", TOK_ACME, "bob", TOK_ACME, NULL), -EINVAL,
			  "listed twice");
	expect_load_error(tmp, -EINVAL,
			  "a directory, expected a token file"); /* its subdirectories */
	{
		const char *dir = token_dir("open", "acme", TOK_ACME, NULL);
		char path[256];

		snprintf(path, sizeof(path), "%s/acme", dir);
		assert_int_equal(chmod(path, 0644), 0);
		expect_load_error(dir, -EPERM, "readable or writable by every user");
	}
	expect_load_error("/nonexistent-sg-tokens", -ENOENT, "/nonexistent-sg-tokens");
}

static void test_rotation(void **state)
{
	struct serve_tokens *t = NULL;
	char tenant[SG_TENANT_MAX], err[512], path[256];
	const char *dir = token_dir("rot", "acme", TOK_ACME, NULL);

	assert_int_equal(serve_tokens_open(dir, &t, err, sizeof(err)), 0);
	/* The Secret changes: acme's token is replaced. It applies at the
	 * next reload, once TOKENS_RELOAD_MS have passed. */
	fixture_write(dir, "acme", TOK_ACME2, 0600);
	usleep((TOKENS_RELOAD_MS + 100) * 1000);
	assert_false(serve_tokens_lookup(t, TOK_ACME, strlen(TOK_ACME), tenant));
	assert_true(serve_tokens_lookup(t, TOK_ACME2, strlen(TOK_ACME2), tenant));
	/* A broken content: the previous tokens stay in force. */
	snprintf(path, sizeof(path), "%s/Bad Name", dir);
	fixture_write(dir, "Bad Name", TOK_BOB, 0600);
	usleep((TOKENS_RELOAD_MS + 100) * 1000);
	assert_true(serve_tokens_lookup(t, TOK_ACME2, strlen(TOK_ACME2), tenant));
	assert_false(serve_tokens_lookup(t, TOK_BOB, strlen(TOK_BOB), tenant));
	serve_tokens_free(t);
}

#define BODY                                                                                       \
	"{\"compile_timeout\": 10, \"run_timeout\": 10, \"code\": \"print(1)\", \"stdin\": \"\", " \
	"\"memory_limit_MB\": 1024, \"language\": \"python\", \"files\": {}, \"fetch_files\": []}"

/* One POST; returns the reply (caller frees). */
static struct serve_reply post(const char *url, const char *token, const char *tenant_header,
			       const char *body)
{
	struct serve_request rq = { .method = "POST",
				    .url = url,
				    .token = token,
				    .token_len = token ? strlen(token) : 0,
				    .tenant_header = tenant_header,
				    .body = body,
				    .body_len = strlen(body) };
	struct serve_reply rp;

	serve_handle(&srv, &rq, &rp);
	return rp;
}

static void expect(const char *url, const char *token, const char *tenant_header, const char *body,
		   unsigned status, const char *in_error)
{
	struct serve_reply rp = post(url, token, tenant_header, body);

	if (rp.status != status)
		fail_msg("%s: status %u, want %u: %s", url, rp.status, status,
			 json_dumps(rp.body, JSON_COMPACT));
	if (in_error) {
		const char *e = json_string_value(json_object_get(rp.body, "error"));
		if (!e || !strstr(e, in_error))
			fail_msg("%s: error \"%s\" does not say \"%s\"", url, e ? e : "", in_error);
		/* The token is never echoed. */
		assert_null(strstr(e, "0123456789"));
	}
	assert_true(rp.challenge == (status == 401));
	serve_reply_free(&rp);
}

static void test_requests(void **state)
{
	size_t before = bookings();
	unsigned long refused = atomic_load(&srv.n_unauthorized);
	struct serve_reply rp;
	uint32_t running, waiting;

	runs = 0;
	expect("/run_code", NULL, NULL, BODY, 401, "a tenant token is required");
	expect("/run_code", NULL, "acme", BODY, 401, "a tenant token is required");
	expect("/tenants/acme/run_code", NULL, NULL, BODY, 401, "a tenant token is required");
	expect("/v1/score", NULL, NULL, "{\"tenant\": \"acme\"}", 401, NULL);
	expect("/run_code", "nope-0123456789abcdefghijklmnopqrstuv", NULL, BODY, 401,
	       "unknown token");
	expect("/run_code", "../../etc/passwd", NULL, BODY, 401, "unknown token");
	expect("/run_code", TOK_ACME, "bob", BODY, 403, "the token is not tenant \"bob\"'s");
	expect("/tenants/bob/run_code", TOK_ACME, NULL, BODY, 403, "not tenant \"bob\"'s");
	/* The body's tenant is checked against the token too. */
	expect("/v1/score", TOK_BOB, NULL, "{\"tenant\": \"acme\"}", 403,
	       "the token names tenant \"bob\" but the body's \"tenant\" names \"acme\"");
	assert_int_equal(runs, 0);
	assert_int_equal(bookings(), before);
	assert_int_equal(atomic_load(&srv.n_unauthorized), refused + 9);
	/* Nothing is left of them in the admission gate. */
	gate_counts(srv.gate, &running, &waiting);
	assert_int_equal(running + waiting, 0);

	/* The token's tenant, with the tenant named again or not. */
	rp = post("/run_code", TOK_ACME, NULL, BODY);
	assert_int_equal(rp.status, 200);
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(rp.body, "sandguard"), "tenant")),
		"acme");
	serve_reply_free(&rp);
	rp = post("/tenants/acme/run_code", TOK_ACME2, "acme", BODY);
	assert_int_equal(rp.status, 200);
	serve_reply_free(&rp);
	assert_int_equal(runs, 2);
	/* Probes need no token. */
	rp = post("/healthz", NULL, NULL, "");
	assert_int_equal(rp.status, 405);
	serve_reply_free(&rp);
}

static void test_open_server_takes_no_token(void **state)
{
	struct serve_tokens *tokens = srv.tokens;

	srv.tokens = NULL;
	expect("/run_code", TOK_ACME, NULL, BODY, 401, "this server takes no tokens");
	srv.tokens = tokens;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_loading),
		cmocka_unit_test(test_rotation),
		cmocka_unit_test(test_requests),
		cmocka_unit_test(test_open_server_takes_no_token),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

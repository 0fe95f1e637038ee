/* /run_code's request and response, without sockets: verl's exact request
 * shape parses; every malformed field gets its exact 400; the request's
 * limits only tighten the policy; the client's budget (compile_timeout +
 * run_timeout + 10 s) gives when a request stops being worth starting;
 * each language's steps (argv, the files it owns, what the JVM and Go are
 * told of the sandbox's memory and cores); and each way a run can end maps
 * to the SandboxFusion statuses verl reads. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "serve/serve_internal.h"

static struct serve_langs langs;
static struct sg_policy policy;

static int setup(void **state)
{
	char err[256];

	assert_int_equal(serve_langs_init(&langs, "python", err, sizeof(err)), 0);
	policy_defaults(&policy);
	snprintf(policy.tenant, sizeof(policy.tenant), "acme");
	snprintf(policy.source, sizeof(policy.source), "acme.json");
	policy.limits.timeout_ms = 5000;
	return 0;
}

static json_t *load(const char *text)
{
	json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, NULL);

	assert_non_null(j);
	return j;
}

static void expect_400(const char *text, const char *want)
{
	struct runcode_plan plan;
	struct serve_reply rp = { 0 };
	json_t *body = load(text);

	assert_int_equal(runcode_parse(&langs, &policy, "acme", body, &plan, &rp), -1);
	assert_int_equal(rp.status, 400);
	assert_string_equal(json_string_value(json_object_get(rp.body, "error")), want);
	runcode_plan_free(&plan);
	serve_reply_free(&rp);
	json_decref(body);
}

/* What verl's sandbox_fusion client sends, field for field. */
static void test_verl_request(void **state)
{
	struct runcode_plan plan;
	struct serve_reply rp = { 0 };
	json_t *body =
		load("{\"compile_timeout\": 10, \"run_timeout\": 3, \"code\": \"print(input())\", "
		     "\"stdin\": \"7\\n\", \"memory_limit_MB\": 1024, \"language\": \"python\", "
		     "\"files\": {}, \"fetch_files\": []}");

	assert_int_equal(runcode_parse(&langs, &policy, "acme", body, &plan, &rp), 0);
	assert_int_equal(plan.lang, LANG_PYTHON);
	assert_int_equal(plan.run_timeout_ms, 3000);
	assert_int_equal(plan.compile_timeout_ms, 5000); /* 10 s lowered to the policy's 5 s */
	assert_int_equal(plan.memory_mb, 1024);          /* exec_run lowers it to the policy's */
	assert_int_equal(plan.stdin_len, 2);
	assert_memory_equal(plan.stdin_data, "7\n", 2);
	assert_int_equal(plan.n_files, 1); /* just the code */
	assert_string_equal(plan.files[0].path, "main.py");
	assert_int_equal(plan.files[0].len, strlen("print(input())"));
	assert_int_equal(plan.n_fetch, 0);
	runcode_plan_free(&plan);
	json_decref(body);

	/* Older verl: stdin null, no memory_limit_MB; SandboxFusion's -1. */
	body = load(
		"{\"code\": \"1\", \"stdin\": null, \"language\": \"python\", \"run_timeout\": 0.25, "
		"\"memory_limit_MB\": -1}");
	assert_int_equal(runcode_parse(&langs, &policy, "acme", body, &plan, &rp), 0);
	assert_null(plan.stdin_data);
	assert_int_equal(plan.run_timeout_ms, 250);
	assert_int_equal(plan.memory_mb, 0);
	runcode_plan_free(&plan);
	json_decref(body);
}

static void test_files(void **state)
{
	struct runcode_plan plan;
	struct serve_reply rp = { 0 };
	json_t *body = load("{\"code\": \"x\", \"language\": \"python\", "
			    "\"files\": {\"data/in.txt\": \"aGVsbG8=\", \"empty\": \"\"}, "
			    "\"fetch_files\": [\"out.txt\", \"data/in.txt\", \"/mnt/b\", "
			    "\"/tmp/d/x\", \"/dev/shm/y\"]}");

	assert_int_equal(runcode_parse(&langs, &policy, "acme", body, &plan, &rp), 0);
	assert_int_equal(plan.n_files, 3);
	assert_string_equal(plan.files[1].path, "data/in.txt");
	assert_int_equal(plan.files[1].len, 5);
	assert_memory_equal(plan.files[1].data, "hello", 5);
	assert_int_equal(plan.files[2].len, 0);
	assert_int_equal(plan.n_fetch, 5);
	assert_string_equal(plan.fetch[1], "data/in.txt");
	/* Absolute paths, as SandboxFusion's clients send them: read from the
	 * scratch directory that is that directory in the sandbox, answered
	 * under the name the request gave. */
	assert_string_equal(plan.fetch[2], ".mnt/b");
	assert_string_equal(plan.fetch_names[2], "/mnt/b");
	assert_string_equal(plan.fetch[3], ".tmp/d/x");
	assert_string_equal(plan.fetch[4], ".shm/y");
	assert_string_equal(plan.fetch_names[1], "data/in.txt");
	runcode_plan_free(&plan);
	json_decref(body);
}

static void test_bad_requests(void **state)
{
	expect_400("{\"language\": \"python\"}", "\"code\" is required: a string");
	expect_400("{\"code\": 1, \"language\": \"python\"}", "\"code\" is required: a string");
	expect_400("{\"code\": \"x\"}",
		   "\"language\" is required: a string (this server runs python)");
	expect_400("{\"code\": \"x\", \"language\": \"perl\"}",
		   "unknown language \"perl\": this server runs python");
	expect_400(
		"{\"code\": \"x\", \"language\": \"js\"}",
		"language js is not enabled on this server (it runs python; see sandguard serve --languages)");
	expect_400(
		"{\"code\": \"x\", \"language\": \"cpp\"}",
		"language cpp is not enabled on this server (it runs python; see sandguard serve --languages)");
	expect_400("{\"code\": \"x\", \"language\": \"python\", \"stdin\": 5}",
		   "\"stdin\" must be a string or null");
	expect_400("{\"code\": \"x\", \"language\": \"python\", \"run_timeout\": 0}",
		   "\"run_timeout\" must be a positive number of seconds, at most 86400");
	expect_400("{\"code\": \"x\", \"language\": \"python\", \"compile_timeout\": \"10\"}",
		   "\"compile_timeout\" must be a positive number of seconds, at most 86400");
	expect_400("{\"code\": \"x\", \"language\": \"python\", \"memory_limit_MB\": 1.5}",
		   "\"memory_limit_MB\" must be an integer (megabytes; -1: the policy's)");
	expect_400(
		"{\"code\": \"x\", \"language\": \"python\", \"args\": [\"-k\"]}",
		"\"args\" is not supported (SandboxFusion passes it to pytest): send [] or leave it out");
	expect_400(
		"{\"code\": \"x\", \"language\": \"python\", \"timeout\": 3, \"lang\": 1}",
		"unknown keys \"timeout\", \"lang\" (expected: code, language, stdin, compile_timeout, "
		"run_timeout, memory_limit_MB, files, fetch_files, args, fn_name, grader)");
	expect_400("{\"code\": \"x\", \"language\": \"python\", \"files\": []}",
		   "\"files\" must be an object {path: base64 content}");
	expect_400("{\"code\": \"x\", \"language\": \"python\", \"files\": {\"a\": \"aGVsbG8\"}}",
		   "files[\"a\"]: invalid base64: length 7 is not a multiple of 4");
	expect_400("{\"code\": \"x\", \"language\": \"python\", \"files\": {\"a\": \"aGV*bG8=\"}}",
		   "files[\"a\"]: invalid base64: invalid character '*' at offset 3");
	/* Paths that cannot all be files in one scratch: the caller's error,
	 * never a platform error booked and retried. */
	expect_400(
		"{\"code\": \"x\", \"language\": \"python\", \"files\": {\"x\": \"YQ==\", \"x/y\": \"Yg==\"}}",
		"files: \"x/y\" and \"x\" cannot both be files (one would be the other's directory)");
	expect_400(
		"{\"code\": \"x\", \"language\": \"python\", \"files\": {\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\": \"YQ==\"}}",
		"files: \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\" has a component over 255 bytes"); /* quoted, cut at 200 */
	expect_400("{\"code\": \"x\", \"language\": \"python\", \"files\": {\"a\": null}}",
		   "files[\"a\"] must be a base64 string");
	expect_400("{\"code\": \"x\", \"language\": \"python\", \"files\": {\"../etc/x\": \"\"}}",
		   "files: \"../etc/x\" is not a relative path inside the scratch (no leading '/', "
		   "no '.' or '..' or empty components)");
	expect_400("{\"code\": \"x\", \"language\": \"python\", \"files\": {\"/abs\": \"\"}}",
		   "files: \"/abs\" is not a relative path inside the scratch (no leading '/', "
		   "no '.' or '..' or empty components)");
	expect_400("{\"code\": \"x\", \"language\": \"python\", \"files\": {\"main.py\": \"\"}}",
		   "files: \"main.py\" clashes with \"main.py\", which python writes in the "
		   "scratch");
	expect_400("{\"code\": \"x\", \"language\": \"python\", \"fetch_files\": \"out\"}",
		   "\"fetch_files\" must be an array of paths");
	expect_400(
		"{\"code\": \"x\", \"language\": \"python\", \"fetch_files\": [\"ok\", \"a/../b\"]}",
		"fetch_files[1]: \"a/../b\" is not a path inside the working directory (no '.', "
		"'..' or empty components)");
	/* Traversal out of a writable directory, and places a program cannot
	 * write (the host's files are never read back). */
	static const char *const outside[] = { "/mnt/../etc/passwd",
					       "/etc/passwd",
					       "/mnt/",
					       "/mnt",
					       "/tmp//x",
					       "/tmp/./x",
					       "/",
					       "/usr/bin/python3",
					       "/proc/self/environ" };
	for (size_t i = 0; i < sizeof(outside) / sizeof(outside[0]); i++) {
		char text[256], want[512];

		snprintf(text, sizeof(text),
			 "{\"code\": \"x\", \"language\": \"python\", \"fetch_files\": [\"%s\"]}",
			 outside[i]);
		snprintf(
			want, sizeof(want),
			"fetch_files[0]: \"%s\" is outside what a program can write: its working "
			"directory (relative paths), /tmp, /dev/shm and /mnt (no '.', '..' or empty "
			"components)",
			outside[i]);
		expect_400(text, want);
	}
}

static void test_policy_exec_allow(void **state)
{
	struct sg_policy strict = policy;

	/* The tenant's exec.allow decides whether python may run at all. */
	strict.n_exec_allow = 1;
	snprintf(strict.exec_allow[0], sizeof(strict.exec_allow[0]), "/usr/bin/perl");
	assert_false(serve_exec_allowed(&strict, "/usr/bin/python3"));
	assert_string_equal(serve_lang_denied(&langs, LANG_PYTHON, &strict), langs.python);
	snprintf(strict.exec_allow[0], sizeof(strict.exec_allow[0]), "/usr/bin/python3.*");
	/* Allowed through the file the path resolves to (python3 -> python3.11). */
	assert_true(serve_exec_allowed(&strict, "/usr/bin/python3"));
	assert_null(serve_lang_denied(&langs, LANG_PYTHON, &strict));
}

static struct exec_run_result ran(enum sg_cause cause)
{
	return (struct exec_run_result){
		.cause = cause, .rule = -1, .out = "out\n", .out_len = 4, .err = "", .wall_ms = 1500
	};
}

static void expect_run(const struct exec_run_result *r, const char *status, json_t *want_rc)
{
	json_t *j = runcode_result_json(r);

	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "status")), status);
	assert_true(json_equal(json_object_get(j, "return_code"), want_rc));
	assert_true(json_real_value(json_object_get(j, "execution_time")) == 1.5);
	assert_string_equal(json_string_value(json_object_get(j, "stdout")), "out\n");
	json_decref(want_rc);
	json_decref(j);
}

static void test_result_mapping(void **state)
{
	struct exec_run_result r;

	r = ran(SG_CAUSE_OK);
	r.has_return_code = true;
	expect_run(&r, "Finished", json_integer(0));
	assert_string_equal(runcode_status(r.cause), "Success");

	r = ran(SG_CAUSE_TENANT_CRASH); /* a wrong exit */
	r.has_return_code = true;
	r.return_code = 3;
	expect_run(&r, "Finished", json_integer(3));
	assert_string_equal(runcode_status(r.cause), "Failed");

	r = ran(SG_CAUSE_TENANT_CRASH); /* SIGSEGV, as Python's subprocess says it */
	r.signal = 11;
	expect_run(&r, "Finished", json_integer(-11));

	r = ran(SG_CAUSE_TENANT_TIMEOUT);
	r.timed_out = true;
	expect_run(&r, "TimeLimitExceeded", json_null());
	assert_string_equal(runcode_status(r.cause), "Failed");

	r = ran(SG_CAUSE_TENANT_OOM); /* stopped by a limit: no return code */
	expect_run(&r, "Error", json_null());
	assert_string_equal(runcode_status(r.cause), "Failed");

	r = ran(SG_CAUSE_TENANT_POLICY_VIOLATION);
	r.rule = SG_RULE_EGRESS;
	expect_run(&r, "Error", json_null());

	assert_string_equal(runcode_status(SG_CAUSE_PLATFORM_ERROR), "SandboxError");
	assert_string_equal(runcode_status(SG_CAUSE_TENANT_BAD_OUTPUT), "Failed");
}

static void test_output_whole_and_flagged(void **state)
{
	struct exec_run_result r = ran(SG_CAUSE_TENANT_BAD_OUTPUT);
	char big[3000], bad[] = "ok\xff\xfe";
	json_t *j;

	memset(big, 'a', sizeof(big));
	r.out = big;
	r.out_len = sizeof(big);
	r.out_truncated = true;
	r.err = bad;
	r.err_len = 4;
	j = runcode_result_json(&r);
	assert_int_equal(json_string_length(json_object_get(j, "stdout")),
			 sizeof(big)); /* whole, no excerpt */
	assert_true(json_is_true(json_object_get(j, "stdout_truncated")));
	assert_true(json_is_false(json_object_get(j, "stderr_truncated")));
	/* Bytes that are not UTF-8 become U+FFFD rather than losing the reply. */
	assert_string_equal(json_string_value(json_object_get(j, "stderr")),
			    "ok\xef\xbf\xbd\xef\xbf\xbd");
	json_decref(j);
}

static void test_client_budget(void **state)
{
	struct runcode_plan plan;
	struct serve_reply rp = { 0 };
	struct serve_budget b;
	json_t *body = load("{\"compile_timeout\": 10, \"run_timeout\": 3, \"code\": \"1\", "
			    "\"language\": \"python\"}");

	assert_int_equal(runcode_parse(&langs, &policy, "acme", body, &plan, &rp), 0);
	runcode_budget(&plan, 100000, &b);
	/* The client waits 10 + 3 + 10 s; python only runs (3 s), so it may
	 * start as late as 23 - 3 s, less the finishing margin. */
	assert_int_equal(b.client_ms, 23000);
	assert_int_equal(b.worst_ms, 3000);
	assert_int_equal(b.latest_start_ms, 100000 + 23000 - 3000 - SERVE_FINISH_MARGIN_MS);
	assert_int_equal(b.run_latest_ms, b.latest_start_ms);
	assert_int_equal(b.client_end_ms, 100000 + 23000 - SERVE_FINISH_MARGIN_MS);
	/* A compiled language runs its compile step too (10 s, lowered to
	 * the policy's 5 s): it must start earlier, its run a little later. */
	plan.lang = LANG_CPP;
	runcode_budget(&plan, 100000, &b);
	assert_int_equal(b.worst_ms, 5000 + 3000);
	assert_int_equal(b.latest_start_ms, 100000 + 23000 - 8000 - SERVE_FINISH_MARGIN_MS);
	assert_int_equal(b.run_latest_ms, 100000 + 23000 - 3000 - SERVE_FINISH_MARGIN_MS);
	runcode_plan_free(&plan);
	json_decref(body);
}

static int argv_len(char *const *argv)
{
	int n = 0;

	while (argv[n])
		n++;
	return n;
}

static bool has_arg(char *const *argv, const char *want)
{
	for (int i = 0; argv[i]; i++)
		if (!strcmp(argv[i], want))
			return true;
	return false;
}

/* Each language's steps, with made-up paths (no toolchain needed). */
static void test_language_plans(void **state)
{
	struct serve_langs l = { 0 };
	struct lang_plan p;

	snprintf(l.python, sizeof(l.python), "/py");
	snprintf(l.bash, sizeof(l.bash), "/bash");
	snprintf(l.node, sizeof(l.node), "/node");
	snprintf(l.java, sizeof(l.java), "/java");
	snprintf(l.cxx, sizeof(l.cxx), "/g++");
	snprintf(l.rustc, sizeof(l.rustc), "/rustc");
	snprintf(l.go, sizeof(l.go), "/go");
	snprintf(l.env, sizeof(l.env), "/env");
	snprintf(l.loader, sizeof(l.loader), "/ld.so");
	snprintf(l.cc, sizeof(l.cc), "/gcc-12");

	serve_lang_plan(&l, LANG_PYTHON, NULL, 512, 1, &p);
	assert_null(p.compile[0]);
	assert_string_equal(p.run[0], "/py");
	assert_string_equal(p.run[1], "main.py");
	assert_int_equal(argv_len(p.run), 2);

	serve_lang_plan(&l, LANG_BASH, NULL, 512, 1, &p);
	assert_null(p.compile[0]);
	assert_string_equal(p.run[1], "main.sh");

	serve_lang_plan(&l, LANG_NODEJS, NULL, 512, 1, &p);
	assert_true(has_arg(p.run, "--max-old-space-size=384")); /* 3/4 of the memory */
	assert_string_equal(p.source, "main.js");

	serve_lang_plan(&l, LANG_CPP, NULL, 512, 1, &p);
	assert_string_equal(p.compile[0], "/g++");
	assert_true(has_arg(p.compile, "-save-temps")); /* no temporary files in /tmp */
	assert_string_equal(p.run[0], "/ld.so");
	assert_string_equal(p.artifact, "main");
	assert_int_equal(p.artifact_mode, 0755);

	serve_lang_plan(&l, LANG_RUST, NULL, 512, 1, &p);
	assert_string_equal(p.compile[0], "/env");
	assert_string_equal(p.compile[1], "TMPDIR=."); /* rustc and collect2 write temporaries */
	assert_string_equal(p.compile[2], "/rustc");
	assert_true(has_arg(p.compile, "linker=/gcc-12")); /* not /usr/bin/cc's alternatives link */
	assert_string_equal(p.run[0], "/ld.so");

	serve_lang_plan(&l, LANG_GO, NULL, 1000, 3, &p);
	assert_string_equal(p.compile[0], "/env");
	assert_string_equal(p.compile[1], "GOMAXPROCS=3");
	assert_string_equal(p.compile[2], "TMPDIR=.");
	assert_string_equal(p.compile[3], "/go");
	assert_true(has_arg(p.compile, "-p"));
	assert_true(has_arg(p.run, "GOMEMLIMIT=900MiB"));
	assert_true(has_arg(p.run, "/ld.so"));
	assert_int_equal(p.n_setup, 2);
	assert_string_equal(p.setup[0].path, ".config/go/env");
	assert_string_equal(p.setup[1].path, "sandguard_dynamic.go"); /* see serve_lang.c */
	assert_string_equal(p.compile[argv_len(p.compile) - 1], "sandguard_dynamic.go");

	serve_lang_plan(&l, LANG_JAVA, NULL, 256, 2, &p);
	assert_string_equal(p.compile[0], "/java");
	assert_true(has_arg(p.compile, "-Xmx192m"));
	assert_true(has_arg(p.compile, "-XX:ActiveProcessorCount=2"));
	assert_string_equal(p.compile[argv_len(p.compile) - 1], "SandguardJavac.java");
	assert_true(has_arg(p.run, "-ea"));
	assert_true(has_arg(p.run, "main.jar"));
	assert_string_equal(p.run[argv_len(p.run) - 1], "Main");
	assert_string_equal(p.artifact, "main.jar");
	assert_int_equal(p.n_setup, 1);
	assert_non_null(strstr(p.setup[0].data, "ToolProvider.findFirst(\"javac\")"));
}

/* python's runtime libraries (requests): through env's PYTHONPATH when
 * the node has them, for a tenant whose exec.allow allows env; a tenant
 * with python3 alone still runs python, without them. */
static void test_python_runtime_libraries(void **state)
{
	struct serve_langs l = { 0 };
	struct sg_policy with_env = policy, python_only = policy;
	struct lang_plan p;
	char *argv[4] = { 0 };

	snprintf(l.python, sizeof(l.python), "/py");
	snprintf(l.env, sizeof(l.env), "/usr/bin/env");
	snprintf(l.python_path, sizeof(l.python_path), "PYTHONPATH=/rt");
	with_env.n_exec_allow = 2;
	snprintf(with_env.exec_allow[0], sizeof(with_env.exec_allow[0]), "/py");
	snprintf(with_env.exec_allow[1], sizeof(with_env.exec_allow[1]), "/usr/bin/env");
	python_only.n_exec_allow = 1;
	snprintf(python_only.exec_allow[0], sizeof(python_only.exec_allow[0]), "/py");

	serve_lang_plan(&l, LANG_PYTHON, &with_env, 512, 1, &p);
	assert_int_equal(argv_len(p.run), 4);
	assert_string_equal(p.run[0], "/usr/bin/env");
	assert_string_equal(p.run[1], "PYTHONPATH=/rt");
	assert_string_equal(p.run[2], "/py");
	assert_string_equal(p.run[3], "main.py");
	/* env is not one of python's programs: python3 alone runs it. */
	assert_null(serve_lang_denied(&l, LANG_PYTHON, &python_only));
	serve_lang_plan(&l, LANG_PYTHON, &python_only, 512, 1, &p);
	assert_int_equal(argv_len(p.run), 2);
	assert_string_equal(p.run[0], "/py");
	assert_int_equal(serve_lang_python(&l, &python_only, argv), 1);
	assert_int_equal(serve_lang_python(&l, &with_env, argv), 3);
	/* A node without the directory: python3 alone, whatever the tenant. */
	l.python_path[0] = '\0';
	assert_int_equal(serve_lang_python(&l, &with_env, argv), 1);
	assert_string_equal(argv[0], "/py");
	(void)state;
}

static void test_language_owned_paths(void **state)
{
	struct serve_langs all = langs;
	struct runcode_plan plan;
	struct serve_reply rp = { 0 };
	json_t *body;

	/* Pretend every language is on (their programs are not looked up). */
	for (int i = 0; i < LANG__COUNT; i++)
		all.enabled[i] = true;
	body = load(
		"{\"code\": \"x\", \"language\": \"java\", \"files\": {\"classes/A.class\": \"\"}}");
	assert_int_equal(runcode_parse(&all, &policy, "acme", body, &plan, &rp), -1);
	assert_string_equal(json_string_value(json_object_get(rp.body, "error")),
			    "files: \"classes/A.class\" clashes with \"classes\", which java "
			    "writes in the scratch");
	serve_reply_free(&rp);
	runcode_plan_free(&plan);
	json_decref(body);
	/* Go programs do not fit the default 1 MiB output cap. */
	body = load("{\"code\": \"x\", \"language\": \"go\"}");
	assert_int_equal(runcode_parse(&all, &policy, "acme", body, &plan, &rp), -1);
	assert_non_null(strstr(json_string_value(json_object_get(rp.body, "error")),
			       "need an output cap of at least 2097152 bytes"));
	serve_reply_free(&rp);
	runcode_plan_free(&plan);
	json_decref(body);
	policy.limits.output_bytes = 4 << 20;
	body = load("{\"code\": \"x\", \"language\": \"go\", \"files\": {\".config/go\": \"\"}}");
	assert_int_equal(runcode_parse(&all, &policy, "acme", body, &plan, &rp), -1);
	assert_non_null(strstr(json_string_value(json_object_get(rp.body, "error")),
			       "clashes with \".config/go/env\""));
	serve_reply_free(&rp);
	runcode_plan_free(&plan);
	json_decref(body);
	policy.limits.output_bytes = 1 << 20;
	body = load("{\"code\": \"x\", \"language\": \"java\", \"files\": {\"lib.jar\": \"\"}}");
	assert_int_equal(runcode_parse(&all, &policy, "acme", body, &plan, &rp), 0);
	assert_string_equal(plan.files[0].path, "Main.java");
	runcode_plan_free(&plan);
	json_decref(body);
}

/* --languages all: every language, or the error naming the first one
 * this node lacks and its package; never an unknown name. */
static void test_languages_all(void **state)
{
	struct serve_langs *all = calloc(1, sizeof(*all));
	char err[512] = "";
	int ret;

	assert_non_null(all);
	ret = serve_langs_init(all, "all", err, sizeof(err));
	if (ret == 0) {
		for (int i = 0; i < LANG__COUNT; i++)
			assert_true(all->enabled[i]);
	} else {
		assert_int_equal(ret, -ENOENT);
		assert_non_null(strstr(err, "apt-get install"));
	}
	assert_int_equal(serve_langs_init(all, "all,python", err, sizeof(err)), -EINVAL);
	free(all);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_verl_request),
		cmocka_unit_test(test_files),
		cmocka_unit_test(test_bad_requests),
		cmocka_unit_test(test_policy_exec_allow),
		cmocka_unit_test(test_result_mapping),
		cmocka_unit_test(test_output_whole_and_flagged),
		cmocka_unit_test(test_client_budget),
		cmocka_unit_test(test_language_plans),
		cmocka_unit_test(test_python_runtime_libraries),
		cmocka_unit_test(test_language_owned_paths),
		cmocka_unit_test(test_languages_all),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}

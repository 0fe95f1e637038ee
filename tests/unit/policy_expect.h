/* Shared by the policy unit tests: parse a document and assert either the
 * exact error (file, line, column, message) or success. */
#ifndef SG_TEST_POLICY_EXPECT_H
#define SG_TEST_POLICY_EXPECT_H

/* Parses `text` as `name` and asserts the exact error; also that the
 * output policy holds none (nothing is half-applied): policy_parse()
 * parses straight into it and clears it on an error, whatever it held. */
static void expect_error(const char *name, const char *text, int line, int col, const char *msg)
{
	static const struct sg_policy none;
	struct sg_policy p;
	struct sg_policy_error err;
	int r;

	memset(&p, 0x5a, sizeof(p));
	r = policy_parse(text, strlen(text), name, &p, &err);
	if (r != -EINVAL || err.line != line || err.col != col || strcmp(err.msg, msg) ||
	    strcmp(err.file, name))
		fail_msg("document %s:\n%s\nwant: -EINVAL %s:%d:%d: %s\ngot:  %d %s:%d:%d: %s",
			 name, text, name, line, col, msg, r, err.file, err.line, err.col, err.msg);
	assert_memory_equal(&p, &none, sizeof(p));
}

static void expect_ok(const char *name, const char *text, struct sg_policy *p)
{
	struct sg_policy_error err;
	int r = policy_parse(text, strlen(text), name, p, &err);

	if (r)
		fail_msg("document %s:\n%s\nwant ok, got %d %d:%d: %s", name, text, r, err.line,
			 err.col, err.msg);
}

#endif

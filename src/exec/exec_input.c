/* The executor's inputs: a batch and a verifier test file (an array of
 * tests, or LiveCodeBench's input_output object). A malformed
 * input is the caller's error: the message says exactly what is wrong and
 * where, and nothing of it is ever booked to the tenant. */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "exec.h"
#include "verify_judge.h"

#define BATCH_ID_MAX 127 /* fits struct sg_outcome.batch_id untruncated */

static int input_error(char *err, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int input_error(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static const char *kind(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
	case JSON_REAL:
		return "a number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	default:
		return "null";
	}
}

static json_t *load(const char *text, size_t len, const char *name, char *err, size_t err_len)
{
	json_error_t je;
	json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);

	if (!doc)
		input_error(err, err_len, "%s:%d:%d: invalid JSON: %s", name, je.line, je.column,
			    je.text);
	return doc;
}

/* A required string member: NULL with `err` set when missing or not a string. */
static const char *member_string(const json_t *obj, const char *key, const char *where,
				 const char *name, char *err, size_t err_len)
{
	json_t *v = json_object_get(obj, key);

	if (!v) {
		input_error(err, err_len, "%s: %s has no \"%s\"", name, where, key);
		return NULL;
	}
	if (!json_is_string(v)) {
		input_error(err, err_len, "%s: %s.%s must be a string, got %s", name, where, key,
			    kind(v));
		return NULL;
	}
	return json_string_value(v);
}

int exec_batch_parse(const char *text, size_t len, const char *name, struct exec_batch *out,
		     char *err, size_t err_len)
{
	json_t *doc, *items, *id;
	char where[64];
	size_t i;
	int ret = -EINVAL;

	memset(out, 0, sizeof(*out));
	doc = load(text, len, name, err, err_len);
	if (!doc)
		return -EINVAL;
	if (!json_is_object(doc)) {
		input_error(
			err, err_len,
			"%s: expected a batch object {\"batch_id\": ..., \"items\": [...]}, got %s",
			name, kind(doc));
		goto out;
	}
	id = json_object_get(doc, "batch_id");
	if (!id) {
		input_error(err, err_len, "%s: missing \"batch_id\"", name);
		goto out;
	}
	if (!json_is_string(id)) {
		input_error(err, err_len, "%s: \"batch_id\" must be a string, got %s", name,
			    kind(id));
		goto out;
	}
	if (!json_string_length(id) || json_string_length(id) > BATCH_ID_MAX) {
		input_error(err, err_len, "%s: \"batch_id\" must be 1 to %d bytes long, got %zu",
			    name, BATCH_ID_MAX, json_string_length(id));
		goto out;
	}
	items = json_object_get(doc, "items");
	if (!items) {
		input_error(err, err_len, "%s: missing \"items\"", name);
		goto out;
	}
	if (!json_is_array(items)) {
		input_error(err, err_len, "%s: \"items\" must be an array, got %s", name,
			    kind(items));
		goto out;
	}
	if (!json_array_size(items)) {
		input_error(err, err_len, "%s: \"items\" is empty: a batch needs at least one item",
			    name);
		goto out;
	}
	for (i = 0; i < json_array_size(items); i++) {
		json_t *it = json_array_get(items, i);

		snprintf(where, sizeof(where), "items[%zu]", i);
		if (!json_is_object(it)) {
			input_error(err, err_len, "%s: %s must be an object, got %s", name, where,
				    kind(it));
			goto out;
		}
		if (!member_string(it, "prompt", where, name, err, err_len) ||
		    !member_string(it, "completion", where, name, err, err_len))
			goto out;
	}
	out->batch_id = strdup(json_string_value(id));
	if (!out->batch_id) {
		ret = -ENOMEM;
		goto out;
	}
	out->n_items = json_array_size(items);
	out->json = text;
	out->json_len = len;
	ret = 0;
out:
	json_decref(doc);
	return ret;
}

void exec_batch_free(struct exec_batch *b)
{
	free(b->batch_id);
	memset(b, 0, sizeof(*b));
}

static char *memdup(const char *s, size_t n)
{
	char *d = malloc(n + 1);

	if (d) {
		memcpy(d, s, n);
		d[n] = '\0';
	}
	return d;
}

/* Tests given in the shape LiveCodeBench stores them and verl's and
 * SandboxFusion's code graders read them (an "input_output" value):
 * {"inputs": [str], "outputs": [str], "fn_name": str | null}. *doc
 * becomes the equivalent array of tests, which verify_cases_parse() then
 * checks. 0, -EINVAL with `err`, or -ENOMEM. */
static int in_outs_strings(json_t *doc, const char *key, const char *name, char *err,
			   size_t err_len)
{
	json_t *v = json_object_get(doc, key);
	size_t i;
	json_t *s;

	if (!json_is_array(v)) {
		snprintf(err, err_len, "%s: \"%s\" must be an array of strings", name, key);
		return -EINVAL;
	}
	json_array_foreach(v, i, s)
	{
		if (!json_is_string(s)) {
			snprintf(err, err_len, "%s: %s[%zu] must be a string", name, key, i);
			return -EINVAL;
		}
	}
	return 0;
}

static int in_outs_to_tests(json_t **doc, const char *name, char *err, size_t err_len)
{
	json_t *in_outs = *doc, *tests, *fn = json_object_get(in_outs, "fn_name");
	json_t *inputs = json_object_get(in_outs, "inputs");
	json_t *outputs = json_object_get(in_outs, "outputs");
	const char *key;
	json_t *v;

	json_object_foreach(in_outs, key, v)
	{
		if (strcmp(key, "inputs") && strcmp(key, "outputs") && strcmp(key, "fn_name")) {
			snprintf(
				err, err_len,
				"%s: unknown key \"%s\" (tests are an array [{\"input\", \"output\"}] "
				"or an object {\"inputs\", \"outputs\", \"fn_name\"})",
				name, key);
			return -EINVAL;
		}
	}
	if (in_outs_strings(in_outs, "inputs", name, err, err_len) ||
	    in_outs_strings(in_outs, "outputs", name, err, err_len))
		return -EINVAL;
	if (json_array_size(inputs) != json_array_size(outputs)) {
		snprintf(err, err_len, "%s: %zu inputs but %zu outputs", name,
			 json_array_size(inputs), json_array_size(outputs));
		return -EINVAL;
	}
	tests = json_array();
	if (!tests)
		return -ENOMEM;
	for (size_t i = 0; i < json_array_size(inputs); i++) {
		json_t *t = json_pack("{sOsO}", "input", json_array_get(inputs, i), "output",
				      json_array_get(outputs, i));

		if (!t || (fn && json_object_set(t, "fn_name", fn)) ||
		    json_array_append_new(tests, t)) {
			json_decref(tests);
			return -ENOMEM;
		}
	}
	json_decref(in_outs);
	*doc = tests;
	return 0;
}

int verify_cases_parse(const char *text, size_t len, const char *name, struct verify_cases *out,
		       char *err, size_t err_len)
{
	json_t *doc;
	char where[64];
	int ret = -EINVAL;

	memset(out, 0, sizeof(*out));
	doc = load(text, len, name, err, err_len);
	if (!doc)
		return -EINVAL;
	if (json_is_object(doc) && (ret = in_outs_to_tests(&doc, name, err, err_len)))
		goto out;
	ret = -EINVAL;
	if (!json_is_array(doc)) {
		input_error(
			err, err_len,
			"%s: expected an array of tests [{\"input\": ..., \"output\": ...}], got %s",
			name, kind(doc));
		goto out;
	}
	if (!json_array_size(doc)) {
		input_error(err, err_len, "%s: no tests: the array is empty", name);
		goto out;
	}
	out->v = calloc(json_array_size(doc), sizeof(*out->v));
	if (!out->v) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < json_array_size(doc); i++) {
		json_t *t = json_array_get(doc, i);
		struct verify_case *c = &out->v[i];

		snprintf(where, sizeof(where), "tests[%zu]", i);
		if (!json_is_object(t)) {
			input_error(err, err_len, "%s: %s must be an object, got %s", name, where,
				    kind(t));
			goto out;
		}
		if (!member_string(t, "input", where, name, err, err_len) ||
		    !member_string(t, "output", where, name, err, err_len))
			goto out;
		c->input_len = json_string_length(json_object_get(t, "input"));
		c->output_len = json_string_length(json_object_get(t, "output"));
		c->input = memdup(json_string_value(json_object_get(t, "input")), c->input_len);
		c->output = memdup(json_string_value(json_object_get(t, "output")), c->output_len);
		out->n = i + 1;
		if (!c->input || !c->output) {
			ret = -ENOMEM;
			goto out;
		}
		int call = verify_case_call_parse(t, c, where, name, err, err_len);
		if (call) {
			ret = call;
			goto out;
		}
	}
	ret = 0;
out:
	json_decref(doc);
	if (ret)
		verify_cases_free(out);
	return ret;
}

void verify_cases_free(struct verify_cases *c)
{
	for (size_t i = 0; i < c->n; i++) {
		free(c->v[i].input);
		free(c->v[i].output);
		free(c->v[i].fn_name);
	}
	free(c->v);
	memset(c, 0, sizeof(*c));
}

/* Verifier tests in the shape LiveCodeBench stores them and verl's and
 * SandboxFusion's code graders read them (an "input_output" value):
 * {"inputs": [...], "outputs": [...], "fn_name": "..." | null}. Turned
 * into sandguard's own list of tests, which the caller then checks. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "verify_judge.h"

static int strings(json_t *doc, const char *key, const char *name, char *err, size_t err_len)
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

int verify_in_outs_to_tests(json_t **doc, const char *name, char *err, size_t err_len)
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
	if (strings(in_outs, "inputs", name, err, err_len) ||
	    strings(in_outs, "outputs", name, err, err_len))
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

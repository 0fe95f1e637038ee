/* Verifier requests in any /run_code language: /v1/verify with "code" in
 * a language other than python, and `sandguard exec --tests --language L
 * --code FILE`. The source goes into the scratch as /run_code's does
 * (serve_lang.c); a compiled language is built once
 * (src/exec/verify_compile.h) and every test runs the built program with
 * /run_code's run step's command, loader and limits; an interpreted one
 * runs its source, handed to each test's scratch read-only. /v1/verify
 * keeps `python3 -c <code>` for python (serve_native.c): its warm
 * interpreters need it. The language is checked as /run_code checks it
 * (enabled, allowed by the tenant's exec.allow, fits its output cap). The
 * compile's deadline is the policy's timeout_ms; the request's timeout is
 * each test's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "serve_internal.h"

/* `lang`'s steps for `code` under policy p, into vl. */
static void plan_of(const struct serve_langs *langs, enum serve_lang_id lang,
		    const struct sg_policy *p, const char *code, size_t len, struct verify_lang *vl)
{
	double cores = p->limits.cpu > 0 ? p->limits.cpu : 1.0;
	unsigned cpus = cores < 1.0 ? 1 : (unsigned)(cores + 0.999);
	struct lang_plan *lp = &vl->lp;
	bool compiled = serve_lang_compiled(lang);

	serve_lang_plan(langs, lang, p, p->limits.memory_mb, cpus, lp);
	vl->files[0] =
		(struct sandbox_file){ .path = lp->source, .data = code, .len = len, .mode = 0444 };
	memcpy(vl->files + 1, lp->setup, lp->n_setup * sizeof(*lp->setup));
	vl->build = (struct exec_build){
		.compile = compiled ? lp->compile : NULL,
		.files = vl->files,
		.n_files = 1 + lp->n_setup,
		.artifact = compiled ? lp->artifact : lp->source,
		/* the tests may map the program, not change it */
		.artifact_mode = compiled && lp->artifact_mode == 0755 ? 0555 : 0444,
		.timeout_ms = p->limits.timeout_ms,
	};
}

int verify_lang_plan(struct serve_call *c, json_t *body, struct verify_lang **out,
		     struct serve_reply *rp)
{
	json_t *code = json_object_get(body, "code");
	struct runcode_plan rc = { 0 };
	struct verify_lang *vl;

	if (runcode_parse_language(&c->srv->langs, c->policy, c->tenant, body, &rc, rp))
		return -1;
	if (!json_is_string(code)) {
		serve_error(rp, 400, "\"code\" must be a string");
		return -1;
	}
	vl = calloc(1, sizeof(*vl));
	if (!vl) {
		serve_error(rp, 500, "out of memory");
		return -1;
	}
	plan_of(&c->srv->langs, rc.lang, c->policy, json_string_value(code),
		json_string_length(code), vl);
	*out = vl;
	return 0;
}

/* ---- sandguard exec --language (src/exec/exec_command.h) -------------- */

struct exec_language {
	struct serve_langs langs; /* the one language, found on this node */
	struct verify_lang vl;
};

static int exec_language_plan(const char *language, const char *code, size_t len,
			      const struct sg_policy *p, const char *tenant, struct exec_ctx *ctx,
			      void **hold, char *err, size_t err_len)
{
	struct exec_language *el = calloc(1, sizeof(*el));
	json_t *body = json_pack("{s:s}", "language", language);
	struct runcode_plan rc = { 0 };
	struct serve_reply rp = { 0 };
	int ret = -ENOMEM;

	if (!el || !body) {
		snprintf(err, err_len, "out of memory");
		goto fail;
	}
	ret = serve_lang_lookup(language) < 0
		      ? -EINVAL
		      : serve_langs_init(&el->langs, language, err, err_len);
	if (ret == -EINVAL && serve_lang_lookup(language) < 0)
		snprintf(err, err_len, "unknown language \"%s\"", language);
	if (ret)
		goto fail;
	if (runcode_parse_language(&el->langs, p, tenant, body, &rc, &rp)) {
		snprintf(err, err_len, "%s",
			 json_string_value(json_object_get(rp.body, "error")) ?: "refused");
		serve_reply_free(&rp);
		ret = -EPERM;
		goto fail;
	}
	plan_of(&el->langs, rc.lang, p, code, len, &el->vl);
	ctx->argv = el->vl.lp.run;
	ctx->build = &el->vl.build;
	*hold = el;
	json_decref(body);
	return 0;
fail:
	json_decref(body);
	free(el);
	return ret;
}

const struct exec_languages serve_exec_languages = {
	.plan = exec_language_plan,
	.release = free,
};

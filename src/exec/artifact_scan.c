/* The scanning hook (see src/exec/artifact_scan.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "artifact_scan.h"
#include "artifact_store.h"
#include "control/enforcer.h"
#include "lib/fs_util.h"
#include "sandbox/sandbox.h"

#define VERDICT_MAX 512
#define SCAN_FILE   "sg-scan-artifact"

/* The kept verdict: 1 (text in `verdict`), 0 none, -errno. */
static int verdict_get(const char *path, char *verdict, size_t len)
{
	char *text = NULL;
	size_t n = 0;
	int ret = fs_read_all(path, VERDICT_MAX, &text, &n);

	if (ret == -ENOENT)
		return 0;
	if (ret)
		return ret;
	snprintf(verdict, len, "%s", text);
	free(text);
	return 1;
}

/* The scanner's own words: its stderr's first line. */
static void first_line(const struct sandbox_result *r, char *buf, size_t len)
{
	size_t n = r->err ? strcspn(r->err, "\n") : 0;

	snprintf(buf, len, "%.*s", (int)(n < 200 ? n : 200), n ? r->err : "no reason given");
}

static int scan_now(const struct sg_policy *p, const char *path, const char hex[SHA256_HEX],
		    const char *data, size_t len, char *verdict, size_t vlen, char *detail,
		    size_t dlen)
{
	char *argv[SG_ARTIFACT_SCANNER_ARGS + 2], batch_id[32], why[256];
	struct sandbox_file file = { .path = SCAN_FILE, .data = data, .len = len, .mode = 0444 };
	struct sandbox_spec spec = { 0 };
	struct sandbox_result r = { 0 };
	int n = 0, ret;

	for (; n < p->artifacts.n_scanner; n++)
		argv[n] = (char *)p->artifacts.scanner[n];
	argv[n++] = data ? SCAN_FILE : (char *)path;
	argv[n] = NULL;
	snprintf(batch_id, sizeof(batch_id), "scan-%.12s", hex);
	spec.policy = p;
	spec.tenant = p->tenant;
	spec.mode = "run";
	spec.batch_id = batch_id;
	spec.attempt = 1;
	spec.argv = argv;
	spec.cold = true;
	spec.enforcer = sg_kernel_enforcer(NULL); /* the node's pinned maps, as any run's */
	spec.one_run = true;
	if (data) {
		spec.files = &file;
		spec.n_files = 1;
	}
	ret = sandbox_run(&spec, &r);
	if (ret) {
		snprintf(detail, dlen, "platform error: the scanner of %s could not run: %s", path,
			 r.detail);
	} else if (r.end != SB_EXITED) {
		ret = -EIO;
		snprintf(detail, dlen,
			 "platform error: the scanner of %s did not finish (%s); no verdict, the "
			 "next batch scans again",
			 path, r.detail[0] ? r.detail : "killed");
	} else {
		first_line(&r, why, sizeof(why));
		if (r.exit_code)
			snprintf(verdict, vlen, "rejected: exit %d: %s", r.exit_code, why);
		else
			snprintf(verdict, vlen, "clean");
	}
	sandbox_result_free(&r);
	return ret;
}

int artifact_scan(const struct sg_policy *p, const char *path, const char hex[SHA256_HEX],
		  const char *data, size_t len, char *detail, size_t dlen)
{
	char kept[PATH_MAX], verdict[VERDICT_MAX];
	int ret;

	if (!p->artifacts.n_scanner)
		return 0;
	ret = artifact_store_path("scanned", hex, kept, sizeof(kept));
	ret = ret ?: verdict_get(kept, verdict, sizeof(verdict));
	if (ret < 0) {
		snprintf(detail, dlen, "platform error: cannot read the scan verdict %s: %s", kept,
			 strerror(-ret));
		return ret;
	}
	if (!ret) {
		if ((ret = scan_now(p, path, hex, data, len, verdict, sizeof(verdict), detail,
				    dlen)))
			return ret;
		fs_write_atomic(kept, verdict, strlen(verdict), 0600); /* else scanned again */
	}
	if (!strncmp(verdict, "clean", 5))
		return 0;
	snprintf(detail, dlen, "artifact %s (sha256:%s): the policy's scanner %s; not run", path,
		 hex, verdict);
	return -EPERM;
}

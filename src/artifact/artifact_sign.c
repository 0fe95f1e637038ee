/* minisign signatures over Ed25519 (see src/artifact/artifact_sign.h). The
 * format, from minisign's documentation: a public key is base64 of "Ed",
 * an 8-byte key id and the 32-byte key; a .minisig file is four lines:
 * "untrusted comment: ...", base64 of the algorithm ("Ed": over the
 * bytes, "ED": over their BLAKE2b-512), the key id and the 64-byte
 * signature, "trusted comment: <text>", and base64 of the global
 * signature over the signature followed by <text>. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "artifact_sign.h"
#include "lib/base64.h"
#include "crypto_lazy.h"
#include "lib/fs_util.h"

#define SIG_FILE_MAX 4096
#define KEYID_LEN    8
#define ED_SIG_LEN   CRYPTO_ED25519_SIG_LEN
#define ED_KEY_LEN   CRYPTO_ED25519_KEY_LEN
#define TRUSTED      "trusted comment: "

/* The base64 line `line` decoded, exactly `want` bytes. */
static bool decode(const char *line, size_t want, unsigned char **out)
{
	size_t n = 0;
	char why[96];

	*out = NULL;
	if (base64_decode(line, strlen(line), out, &n, why, sizeof(why)) || n != want) {
		free(*out);
		*out = NULL;
		return false;
	}
	return true;
}

/* The policy key whose id is `id`, decoded (42 bytes), or NULL. */
static unsigned char *key_for(const struct sg_policy *p, const unsigned char *id)
{
	for (int i = 0; i < p->artifacts.n_public_keys; i++) {
		unsigned char *k;

		if (!decode(p->artifacts.public_keys[i], 2 + KEYID_LEN + ED_KEY_LEN, &k))
			continue;
		if (!memcmp(k + 2, id, KEYID_LEN))
			return k;
		free(k);
	}
	return NULL;
}

static int refuse(char *detail, size_t dlen, const char *what, const char *why)
{
	snprintf(detail, dlen, "artifact %s: %s; not run (artifacts.public_keys is set)", what,
		 why);
	return -EPERM;
}

/* Splits the file into its four lines (in place). */
static bool four_lines(char *text, char *line[4])
{
	char *at = text;

	for (int i = 0; i < 4; i++) {
		line[i] = at;
		at = strchr(at, '\n');
		if (!at)
			return i == 3;
		*at++ = '\0';
		line[i][strcspn(line[i], "\r")] = '\0';
	}
	return true;
}

int artifact_signature_read(const char *what, const char *sig_path, char **text, size_t *n,
			    char *detail, size_t dlen)
{
	int ret = fs_read_all(sig_path, SIG_FILE_MAX, text, n);

	if (ret == -ENOENT)
		return refuse(detail, dlen, what,
			      "no signature (expected a minisign signature in it"
			      "s .minisig file)");
	if (ret) {
		snprintf(detail, dlen, "cannot read the signature %s: %s", sig_path,
			 strerror(-ret));
		return ret == -EFBIG ? refuse(detail, dlen, what, "the signature file is too large")
				     : ret;
	}
	return 0;
}

int artifact_signature_check(const struct sg_policy *p, const char *what, const char *sig_path,
			     const void *data, size_t len, char *detail, size_t dlen)
{
	char *text = NULL;
	size_t n = 0;
	int ret = artifact_signature_read(what, sig_path, &text, &n, detail, dlen);

	if (!ret)
		ret = artifact_signature_verify(p, what, text, data, len, detail, dlen);
	free(text);
	return ret;
}

int artifact_signature_verify(const struct sg_policy *p, const char *what, const char *sig_text,
			      const void *data, size_t len, char *detail, size_t dlen)
{
	unsigned char *sig = NULL, *global = NULL, *key = NULL, *msg = NULL,
		      prehash[CRYPTO_BLAKE2B512_LEN];
	char *text = strdup(sig_text), *line[4], why[256];
	size_t comment_len;
	int ret, ok;

	if (!text) {
		snprintf(detail, dlen, "out of memory checking %s's signature", what);
		return -ENOMEM;
	}
	if ((ret = crypto_lazy_load(why, sizeof(why)))) { /* the node's, not the tenant's */
		snprintf(detail, dlen, "cannot check %s's signature: %s", what, why);
		goto out;
	}
	if (!four_lines(text, line) || strncmp(line[2], TRUSTED, strlen(TRUSTED)) ||
	    !decode(line[1], 2 + KEYID_LEN + ED_SIG_LEN, &sig) ||
	    !decode(line[3], ED_SIG_LEN, &global) || sig[0] != 'E' ||
	    (sig[1] != 'd' && sig[1] != 'D')) {
		ret = refuse(detail, dlen, what, "its .minisig file is not a minisign signature");
		goto out;
	}
	if (!(key = key_for(p, sig + 2))) {
		ret = refuse(detail, dlen, what, "signed by a key the policy does not name");
		goto out;
	}
	if (sig[1] == 'D' && crypto_blake2b512(data, len, prehash)) {
		ret = -ENOMEM;
		snprintf(detail, dlen, "out of memory checking %s's signature", what);
		goto out;
	}
	ok = sig[1] == 'D'
		     ? crypto_ed25519_verify(key + 2 + KEYID_LEN, sig + 2 + KEYID_LEN, prehash,
					     sizeof(prehash))
		     : crypto_ed25519_verify(key + 2 + KEYID_LEN, sig + 2 + KEYID_LEN, data, len);
	if (ok == 1) { /* and the trusted comment, as minisign -V checks it */
		comment_len = strlen(line[2] + strlen(TRUSTED));
		msg = malloc(ED_SIG_LEN + comment_len);
		ok = !msg ? -ENOMEM : 0;
		if (msg) {
			memcpy(msg, sig + 2 + KEYID_LEN, ED_SIG_LEN);
			memcpy(msg + ED_SIG_LEN, line[2] + strlen(TRUSTED), comment_len);
			ok = crypto_ed25519_verify(key + 2 + KEYID_LEN, global, msg,
						   ED_SIG_LEN + comment_len);
		}
	}
	if (ok < 0) {
		ret = ok;
		snprintf(detail, dlen, "out of memory checking %s's signature", what);
	} else {
		ret = ok ? 0
			 : refuse(detail, dlen, what,
				  "its signature does not verify with the policy's key");
	}
out:
	free(text);
	free(sig);
	free(global);
	free(key);
	free(msg);
	return ret;
}

/* A shared library loaded on first use, and the functions a caller binds
 * from it: libmicrohttpd (src/lib/mhd_lazy.c) and libcrypto
 * (src/artifact/crypto_lazy.c), which a `sandguard` process would
 * otherwise load, or relocate, at every start, each `sandguard exec`
 * client's included. */
#ifndef SG_DL_LAZY_H
#define SG_DL_LAZY_H
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

struct dl_lazy_sym {
	const char *name;
	void *slot; /* the address of the function pointer to set */
};

/* dlopen(soname) and bind each of syms[0..n) into its slot. 0, or
 * -ELIBACC (no library) / -ELIBBAD (a function missing) with `detail`.
 * The library stays loaded for the process's life. */
static inline int dl_lazy_open(const char *soname, const struct dl_lazy_sym *syms, size_t n,
			       char *detail, size_t len)
{
	void *lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);

	if (!lib) {
		const char *why = dlerror();

		snprintf(detail, len, "cannot load %s: %s", soname, why ? why : "unknown error");
		return -ELIBACC;
	}
	for (size_t i = 0; i < n; i++) {
		void *fn = dlsym(lib, syms[i].name);

		if (!fn) {
			snprintf(detail, len, "%s has no %s", soname, syms[i].name);
			return -ELIBBAD;
		}
		memcpy(syms[i].slot, &fn, sizeof(fn)); /* a function pointer from void * */
	}
	return 0;
}

#endif

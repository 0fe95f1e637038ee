/* The policy schema as data (src/policy/policy_schema.c): one field per
 * key of a policy document, with its type, bounds and the member of
 * struct sg_policy it fills. Private to src/policy: policy_parse.c walks
 * a document against these tables, so adding a key is one table row and
 * no new parsing code. */
#ifndef SG_POLICY_SCHEMA_H
#define SG_POLICY_SCHEMA_H
#include <stdbool.h>
#include <stddef.h>
#include "policy.h"

enum kind {
	K_OBJECT, /* nested fields, same base */
	K_BOOL,
	K_INT,    /* unsigned integer of `size` bytes in min..max */
	K_REAL,   /* double in dmin..dmax; integers are accepted too */
	K_CHOICE, /* string from `choices`, stored as an integer of `size` bytes */
	K_TENANT,
	K_DIR,         /* an absolute normalized path, not "/" */
	K_DIR_LIST,    /* array of K_DIR (read_only) */
	K_GLOB_LIST,   /* array of exec globs */
	K_EGRESS_LIST, /* array of {cidr, port, proto} */
	K_CIDR,
	K_MODULE_LIST, /* array of dotted Python module names (warm.preload) */
	K_PIN_LIST,    /* array of {path, sha256} (artifacts.pins) */
	K_SHA256,      /* 64 lowercase hex digits */
	K_PUBKEY_LIST, /* array of minisign Ed25519 public keys (artifacts.public_keys) */
};

struct choice {
	const char *name;
	int value;
};

struct field {
	const char *key;
	enum kind kind;
	size_t off, size; /* the member in the struct being filled */
	size_t count_off; /* lists: the int holding the count */
	long long min, max;
	double dmin, dmax;
	const struct choice *choices; /* NULL-name terminated */
	const struct field *fields;   /* K_OBJECT: NULL-key terminated */
	bool required;
};

/* The top level of a policy document, NULL-key terminated. */
extern const struct field policy_top_fields[];
/* One entry of egress.allow ({cidr, port, proto}): walked per array item. */
extern const struct field policy_egress_entry_fields[];
/* One entry of artifacts.pins ({path, sha256}). */
extern const struct field policy_pin_entry_fields[];

#endif

/* The parts of src/policy/match.c that policy validation needs beyond the
 * policy.h API: why a CIDR or a path was refused, for its error message. */
#ifndef SG_MATCH_H
#define SG_MATCH_H
#include <stdbool.h>
#include "policy.h"

/* cidr_parse(), with *why set to a reason when it returns -EINVAL. */
int cidr_parse_why(const char *text, struct sg_egress_allow *out, const char **why);

/* An absolute path shorter than SG_POLICY_PATHLEN with no empty, "." or
 * ".." component and no trailing '/' (except "/" itself). */
bool path_normalized(const char *path, const char **why);

#endif

/* The one table of rule names (enum sg_rule of include/abi/events.h), as
 * policies, events, results, the ledger and metrics spell them. */
#ifndef SG_LIB_RULE_NAMES_H
#define SG_LIB_RULE_NAMES_H

/* "egress", "file", "fork", "exec", "memory"; NULL when out of range. */
const char *rule_name(int rule);

/* enum sg_rule of a name, -1 when unknown. */
int rule_from_name(const char *name);

#endif

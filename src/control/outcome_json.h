/* struct sg_outcome <-> JSON, the wire form of a "report" on the control
 * socket. */
#ifndef SG_OUTCOME_JSON_H
#define SG_OUTCOME_JSON_H
#include <stddef.h>
#include <jansson.h>
#include "telemetry/outcome.h"

json_t *outcome_to_json(const struct sg_outcome *o);
int outcome_from_json(json_t *j, struct sg_outcome *o, char *why, size_t whylen);

#endif

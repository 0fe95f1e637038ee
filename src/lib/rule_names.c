/* Rule names (see rule_names.h). */
#include <string.h>
#include "abi/events.h"
#include "rule_names.h"

static const char *const rule_names[SG_RULE__COUNT] = {
	[SG_RULE_EGRESS] = "egress", [SG_RULE_FILE] = "file",     [SG_RULE_FORK] = "fork",
	[SG_RULE_EXEC] = "exec",     [SG_RULE_MEMORY] = "memory",
};

const char *rule_name(int rule)
{
	return rule >= 0 && rule < SG_RULE__COUNT ? rule_names[rule] : NULL;
}

int rule_from_name(const char *name)
{
	for (int r = 0; name && r < SG_RULE__COUNT; r++)
		if (!strcmp(name, rule_names[r]))
			return r;
	return -1;
}

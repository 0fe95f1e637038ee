/* A tenant's cost in the ledger: booking and the checkpoint form (see
 * src/telemetry/ledger_cost.h). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include "ledger_cost.h"

void ledger_cost_book(struct ledger_cost cost[LEDGER_COST_CLASSES], const struct sg_outcome *o)
{
	enum sg_fault_class class = o->cause == SG_CAUSE_OK ? SG_CLASS_NONE
							    : outcome_class(o->mode, o->cause);
	struct ledger_cost *c;

	if (!o->cpu_known || (unsigned)class >= LEDGER_COST_CLASSES)
		return;
	c = &cost[class];
	c->runs++;
	c->cpu_us += o->cpu_us;
	c->wall_ms += o->wall_ms;
	if (o->mem_peak_known)
		c->mem_byte_seconds += (double)o->mem_peak_bytes * ((double)o->wall_ms / 1000.0);
}

json_t *ledger_cost_to_json(const struct ledger_cost cost[LEDGER_COST_CLASSES], bool *oom)
{
	json_t *o = NULL;

	*oom = false;
	for (int k = 0; k < LEDGER_COST_CLASSES; k++) {
		const struct ledger_cost *c = &cost[k];
		json_t *row;

		if (!c->runs)
			continue;
		row = json_pack("{s:I, s:I, s:I, s:f}", "runs", (json_int_t)c->runs, "cpu_us",
				(json_int_t)c->cpu_us, "wall_ms", (json_int_t)c->wall_ms,
				"mem_byte_seconds", c->mem_byte_seconds);
		if (!o)
			o = json_object();
		if (!row || !o || json_object_set_new(o, fault_class_name(k), row)) {
			json_decref(o);
			*oom = true;
			return NULL;
		}
	}
	return o;
}

static int class_of(const char *name)
{
	for (int k = 0; k < LEDGER_COST_CLASSES; k++)
		if (!strcmp(fault_class_name(k), name))
			return k;
	return -1;
}

static bool count_of(json_t *v, uint64_t *out)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return false;
	*out = (uint64_t)json_integer_value(v);
	return true;
}

int ledger_cost_from_json(json_t *obj, struct ledger_cost cost[LEDGER_COST_CLASSES], char *why,
			  size_t why_len)
{
	const char *name;
	json_t *row;

	if (!json_is_object(obj)) {
		snprintf(why, why_len, "cost: expected an object");
		return -1;
	}
	json_object_foreach(obj, name, row)
	{
		int k = class_of(name);
		json_t *mem = json_object_get(row, "mem_byte_seconds");
		struct ledger_cost *c;

		if (k < 0) {
			snprintf(why, why_len, "cost: unknown class '%s'", name);
			return -1;
		}
		c = &cost[k];
		if (!json_is_object(row) || json_object_size(row) != 4 ||
		    !count_of(json_object_get(row, "runs"), &c->runs) ||
		    !count_of(json_object_get(row, "cpu_us"), &c->cpu_us) ||
		    !count_of(json_object_get(row, "wall_ms"), &c->wall_ms) ||
		    !json_is_number(mem) || !(json_number_value(mem) >= 0) ||
		    !isfinite(json_number_value(mem))) {
			snprintf(why, why_len,
				 "cost.%s: expected {\"runs\": n, \"cpu_us\": n, \"wall_ms\": n, "
				 "\"mem_byte_seconds\": x >= 0}",
				 name);
			return -1;
		}
		c->mem_byte_seconds = json_number_value(mem);
	}
	return 0;
}

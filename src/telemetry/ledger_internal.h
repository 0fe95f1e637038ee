/* Between ledger.c and ledger_file.c only. */
#ifndef SG_LEDGER_ROWS_H
#define SG_LEDGER_ROWS_H
#include "ledger.h"

/* Replace the ledger's content with `rows` (malloc'd, taken over; at most
 * LEDGER_MAX_TENANTS named tenants plus one LEDGER_OVERFLOW row, checked by
 * the caller). */
void ledger_adopt(struct ledger *l, struct ledger_tenant **rows, size_t n, uint64_t overflowed);

#endif

/* Clock readings in the units the project keeps them in. */
#ifndef SG_CLOCK_H
#define SG_CLOCK_H
#include <stdint.h>
#include <time.h>

/* Milliseconds / nanoseconds on `clk` (CLOCK_MONOTONIC for deadlines,
 * CLOCK_BOOTTIME to compare with BPF timestamps, CLOCK_REALTIME for the
 * wall clock). */
uint64_t clock_ms(clockid_t clk);
uint64_t clock_ns(clockid_t clk);

#endif

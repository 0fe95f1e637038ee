#include "clock.h"

uint64_t clock_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t clock_ms(clockid_t clk)
{
	return clock_ns(clk) / 1000000ull;
}

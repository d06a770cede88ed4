/* The agent's clocks: monotonic for timers, boottime for ordering against kernel events. */
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"

static uint64_t read_clock(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

uint64_t clock_mono_ns(void)
{
	return read_clock(CLOCK_MONOTONIC);
}

uint64_t clock_boot_ns(void)
{
	return read_clock(CLOCK_BOOTTIME);
}

uint64_t clock_tick_ns(void)
{
	static uint64_t tick;
	long hz;

	if (!tick) {
		hz = sysconf(_SC_CLK_TCK);
		tick = 1000000000ull / (uint64_t)(hz > 0 ? hz : 100);
	}
	return tick;
}

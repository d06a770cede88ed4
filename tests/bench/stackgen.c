/*
 * stackgen: many distinct stacks, for perfmapctl profile's memory benchmark.
 * Four levels of 24 functions each call one another on a pseudo-random
 * path (24^4 = 331,776 distinct stacks), the leaf spinning a little; built
 * with frame pointers so that every level is in the stack.
 *
 *   stackgen SECONDS [cpu|wall] [PATHS]
 *
 * cpu: SECONDS of its own CPU time, not of the clock: a profile of it counts
 * as many samples however loaded the machine is. PATHS: only that many
 * distinct stacks (each called path a distinct one), so that a profile's
 * distinct stacks do not grow with its samples: bench-profile's push cost
 * at 1,000 stacks.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N 24

typedef void (*fn)(uint32_t path, int level);

static fn table[N];
static volatile uint64_t sink;

static void step(uint32_t path, int level)
{
	if (level == 4) {
		for (int i = 0; i < 2000; i++)
			sink += (uint64_t)i * path;
		return;
	}
	table[(path >> (level * 5)) % N](path, level + 1);
}

/* 24 functions, each a distinct frame: the same body under a name of its own. */
#define F(i) __attribute__((noinline)) static void f##i(uint32_t path, int level) \
	{ step(path, level); __asm__ volatile("" ::: "memory"); }
F(0) F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11)
F(12) F(13) F(14) F(15) F(16) F(17) F(18) F(19) F(20) F(21) F(22) F(23)

int main(int argc, char **argv)
{
	static const fn all[N] = { f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11,
				   f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22, f23 };
	clockid_t clock = argc > 2 && !strcmp(argv[2], "cpu") ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC;
	uint32_t paths = argc > 3 ? (uint32_t)strtoul(argv[3], NULL, 10) : 0;
	struct timespec ts;
	double end;
	uint32_t x = (uint32_t)time(NULL), k, path;

	/* A whole run of SECONDS: the monotonic clock, not time()'s next second. */
	clock_gettime(clock, &ts);
	end = (double)ts.tv_sec + ts.tv_nsec / 1e9 + (argc > 1 ? atof(argv[1]) : 10);
	for (int i = 0; i < N; i++)
		table[i] = all[i];
	while (clock_gettime(clock, &ts), (double)ts.tv_sec + ts.tv_nsec / 1e9 < end) {
		x = x * 1103515245u + 12345u;
		if (!paths) {
			table[(x >> 16) % N](x >> 8, 0);
			continue;
		}
		/* Path k's five calls are its digits in base N: the first here, the four others in step(). */
		k = (x >> 8) % paths;
		path = 0;
		for (uint32_t level = 0, rest = k / N; level < 4; level++, rest /= N)
			path |= rest % N << (level * 5);
		table[k % N](path, 0);
	}
	return 0;
}

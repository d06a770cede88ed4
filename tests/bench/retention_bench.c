/*
 * A microbenchmark of the retention list: the CPU one tick and one
 * wake-up cost with 100k exited maps waiting (issue 9, M3). Not a test: `make bench-parts`
 */
#include <stdio.h>
#include <stdint.h>
#include <time.h>

#include "policy/retention.h"

#define N 100000
#define SEC 1000000000ull

static enum retain_result due(void *ctx, const struct retained *e)
{
	(void)e;
	++*(int *)ctx;
	return RETAIN_DONE;
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * SEC + (uint64_t)ts.tv_nsec;
}

int main(void)
{
	struct retention *r = retention__new();
	struct retained e = { .kind = RETAIN_EXITED, .uid = 1000 };
	int dues = 0, i, ticks = 1000;
	struct retention_cb cb = { .due = due, .ctx = &dues };
	uint64_t t0, t1, t2, soonest = 0;

	for (i = 0; i < N; i++) {
		e.pid = i + 1;
		/* 600 s of retention, exits spread over the last 600 s. */
		e.deadline_ns = 600 * SEC + (uint64_t)i * 6000000ull;
		retention__add(r, &e);
	}
	/* A move waiting too, as after an exec whose old map was busy. */
	e.pid = N + 1;
	retention__add_move(r, &e, 100 * SEC);
	t0 = cpu_ns();
	for (i = 0; i < ticks; i++)
		soonest += retention__next_move(r);
	t1 = cpu_ns();
	/* Ticks at 100 ms before anything is due: the cost of waiting. */
	for (i = 0; i < ticks; i++)
		retention__expire(r, (uint64_t)i * 50000000ull, &cb);
	t2 = cpu_ns();
	printf("%d retained: %.2f us per tick (expire), %.2f us per wake-up (next_move), %d due\n",
	       N, (double)(t2 - t1) / ticks / 1000, (double)(t1 - t0) / ticks / 1000, dues);
	/* Then every entry due in one tick: the cost per entry due. */
	t0 = cpu_ns();
	retention__expire(r, 2000 * SEC, &cb);
	t1 = cpu_ns();
	printf("all due at once: %d handed over, %.3f us per entry\n", dues,
	       (double)(t1 - t0) / (dues ? dues : 1) / 1000);
	retention__free(r);
	return soonest == 0;
}

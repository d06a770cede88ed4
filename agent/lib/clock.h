/* The agent's clocks, and moments known only to lie within an interval. */
#ifndef PERFMAPD_CLOCK_H
#define PERFMAPD_CLOCK_H

#include <stdbool.h>
#include <stdint.h>

/* CLOCK_MONOTONIC, for timers and deadlines, in ns. */
uint64_t clock_mono_ns(void);
/*
 * CLOCK_BOOTTIME in ns: the clock of the BPF events' times and of the
 * processes' start times, fine-grained, so that the agent's own readings
 * order against them. File times are never compared with it.
 */
uint64_t clock_boot_ns(void);
/* Length of a /proc clock tick (USER_HZ: field 22 of /proc/<pid>/stat), in ns. */
uint64_t clock_tick_ns(void);

/*
 * A moment known to lie in [lo, hi] on CLOCK_BOOTTIME. An event from BPF is
 * one instant; a start time read from /proc is a whole tick; a change the
 * inotify queue reported lies between two reads of the queue.
 */
struct span {
	uint64_t lo, hi;
};

#define SPAN_UNKNOWN ((struct span){ 0, UINT64_MAX })

static inline struct span span_at(uint64_t t)
{
	return (struct span){ t, t };
}

/* Did @a surely happen before @b? */
static inline bool span_before(struct span a, struct span b)
{
	return a.hi < b.lo;
}

/* The start of a process as /proc gives it: whole ticks, rounded down. */
static inline struct span span_of_ticks(uint64_t ticks, uint64_t tick_ns)
{
	return (struct span){ ticks * tick_ns, (ticks + 1) * tick_ns - 1 };
}

#endif /* PERFMAPD_CLOCK_H */

/*
 * Holds: a profiler (perfmapctl profile, through holds.c's socket) asks that
 * the maps of the processes it sampled stay at their paths until its report
 * is written. A held process's exited map waits past its retention; a hold
 * names the process by (pid, start time), so a later holder of the pid is
 * never held by it. Bounded: HELD_MAX processes in all, root's alone to ask.
 */
#include <errno.h>
#include <stdlib.h>

#include "policy/policy_internal.h"

struct held {
	struct pidmap_node node;
	uint64_t start_ticks;
	uint32_t refs;     /* holders of it */
};

int policy__hold(struct policy *p, pid_t pid, uint64_t start_ticks)
{
	struct held *h = (struct held *)pidmap_find(&p->held, pid);

	if (pid <= 0 || !start_ticks)
		return -EINVAL;
	if (h && h->start_ticks != start_ticks) {
		/*
		 * One process a pid: the later one. An earlier holder of the pid is
		 * gone for good (its map was moved aside when the pid was taken); a
		 * hold of it, late, takes nothing from the later one's.
		 */
		if (start_ticks < h->start_ticks) {
			p->stats.holds_refused++;
			return -ESTALE;
		}
		h->start_ticks = start_ticks;
		h->refs = 0;
	}
	if (!h) {
		if (p->held.count >= HELD_MAX) {
			p->stats.holds_refused++;
			return -ENOSPC;
		}
		h = (struct held *)pidmap_get(&p->held, pid, sizeof(*h));
		if (!h)
			return -ENOMEM;
		h->start_ticks = start_ticks;
	}
	h->refs++;
	p->stats.holds++;
	return 0;
}

void policy__release(struct policy *p, pid_t pid, uint64_t start_ticks)
{
	struct held *h = (struct held *)pidmap_find(&p->held, pid);

	if (!h || h->start_ticks != start_ticks || --h->refs)
		return;
	free(pidmap_remove(&p->held, pid));
}

bool policy__is_held(const struct policy *p, pid_t pid, uint64_t start_ticks)
{
	const struct held *h = (const struct held *)pidmap_find(&p->held, pid);

	return h && (!start_ticks || h->start_ticks == start_ticks);
}

size_t policy__held(const struct policy *p)
{
	return p->held.count;
}

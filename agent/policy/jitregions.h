/*
 * Each process's executable anonymous mmaps as the kernel reported them,
 * bounded: what `perfmapctl doctor` holds against the map's entries, since
 * /proc/<pid>/maps shows adjacent mappings merged into one.
 */
#ifndef PERFMAPD_JITREGIONS_H
#define PERFMAPD_JITREGIONS_H

#include <stddef.h>
#include <stdint.h>

/*
 * A process maps its code in a few dozen regions (V8's code pages, CPython's
 * trampoline arenas): the first JITREGIONS_PER_PROC are kept, the rest
 * counted. Anyone can run processes that map by the thousand: past
 * JITREGIONS_MAX (4 MiB of them) for all processes together, none is kept.
 */
#define JITREGIONS_PER_PROC 64
#define JITREGIONS_MAX (256u << 10)

struct jit_region {
	uint64_t addr, len;
};

/* One process's: disjoint, in address order. */
struct jitregions {
	struct jit_region *v;
	uint32_t n, cap;
	uint64_t not_kept;    /* parts reported past a bound: counted, not kept */
};

/* What every process's keep together, under one bound. */
struct jitregions_pool {
	size_t kept;
	size_t max;           /* JITREGIONS_MAX (a test sets less) */
};

/*
 * The kernel reported [@addr, @addr + @len) executable and anonymous in @r's
 * process. It reports the mapping after the kernel merged it with its
 * neighbours (an mmap beside an earlier one is reported as both), and again
 * at each mprotect: the parts no region of @r covers are what this mmap
 * made, each kept as a region while @r has fewer than JITREGIONS_PER_PROC
 * and @pool fewer than its max. The number of parts not kept (0 when all
 * were, or nothing was new).
 */
unsigned int jitregions__add(struct jitregions *r, struct jitregions_pool *pool, uint64_t addr,
			     uint64_t len);
/* Forget @r's regions (its exec, its exit), given back to @pool. */
void jitregions__clear(struct jitregions *r, struct jitregions_pool *pool);

#endif /* PERFMAPD_JITREGIONS_H */

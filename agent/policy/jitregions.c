/*
 * Each process's executable anonymous mmaps, kept as the parts each report
 * added: the kernel reports a mapping after merging it with its neighbours,
 * so a report's new part is what no earlier region covers.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "policy/jitregions.h"

/* Room for one more region: grown by doubling up to the bound, so that most processes hold few. */
static bool room(struct jitregions *r, struct jitregions_pool *pool)
{
	struct jit_region *v;
	uint32_t cap;

	if (r->n == JITREGIONS_PER_PROC || pool->kept >= pool->max)
		return false;
	if (r->n < r->cap)
		return true;
	cap = r->cap ? r->cap * 2 : 4;
	if (cap > JITREGIONS_PER_PROC)
		cap = JITREGIONS_PER_PROC;
	v = realloc(r->v, cap * sizeof(*v));
	if (!v)
		return false;
	r->v = v;
	r->cap = cap;
	return true;
}

/* Insert [@addr, @addr + @len), which no region overlaps, at its place: false when past a bound. */
static bool keep(struct jitregions *r, struct jitregions_pool *pool, uint64_t addr, uint64_t len)
{
	uint32_t i;

	if (!room(r, pool))
		return false;
	for (i = r->n; i > 0 && r->v[i - 1].addr > addr; i--)
		;
	memmove(&r->v[i + 1], &r->v[i], (r->n - i) * sizeof(r->v[0]));
	r->v[i] = (struct jit_region){ addr, len };
	r->n++;
	pool->kept++;
	return true;
}

unsigned int jitregions__add(struct jitregions *r, struct jitregions_pool *pool, uint64_t addr,
			     uint64_t len)
{
	/* At most one part before each region, and one after the last. */
	struct jit_region parts[JITREGIONS_PER_PROC + 1];
	uint64_t cur = addr, end = addr + len, rend;
	unsigned int nparts = 0, lost = 0, i;
	uint32_t k;

	if (!len || end < addr)
		return 0;
	for (k = 0; k < r->n && cur < end; k++) {
		rend = r->v[k].addr + r->v[k].len;
		if (rend <= cur)
			continue;
		if (r->v[k].addr >= end)
			break;
		if (r->v[k].addr > cur)
			parts[nparts++] = (struct jit_region){ cur, r->v[k].addr - cur };
		cur = rend;
	}
	if (cur < end)
		parts[nparts++] = (struct jit_region){ cur, end - cur };
	/* Found first, kept after: keeping moves the regions the walk reads. */
	for (i = 0; i < nparts; i++)
		if (!keep(r, pool, parts[i].addr, parts[i].len))
			lost++;
	r->not_kept += lost;
	return lost;
}

void jitregions__clear(struct jitregions *r, struct jitregions_pool *pool)
{
	pool->kept -= r->n <= pool->kept ? r->n : pool->kept;
	free(r->v);
	*r = (struct jitregions){ 0 };
}

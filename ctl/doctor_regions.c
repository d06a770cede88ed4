/*
 * perfmapctl doctor: the mmaps the agent saw the process make, against its
 * mappings and its map now. /proc/<pid>/maps shows adjacent anonymous
 * mappings merged into one: a page no entry names beside named ones is not
 * an unnamed mapping there, only an unnamed mmap.
 */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "doctor.h"

/* A range an entry may touch: a region, or the mapping holding one. */
struct span {
	uint64_t lo, hi;
	bool hit;
};

/* Mark each of the @n spans [@lo, @hi) overlaps: at most 2 * DOC_AGENT_REGIONS, looked at in turn. */
static void mark(struct span *s, size_t n, uint64_t lo, uint64_t hi)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (s[i].lo < hi && lo < s[i].hi)
			s[i].hit = true;
}

/* The mapping @g lies in, whole, if it is still anonymous and executable; its index in @vmas. */
static size_t place(const struct perfmap_vmas *vs, const struct doc_region *g, struct span *vmas,
		    size_t *nvmas)
{
	const struct perfmap_vma *v = perfmap__vmas_find(vs, g->addr);
	size_t i;

	if (!v || v->kind != PERFMAP_VMA_ANON || !(v->prot & PROT_EXEC) || g->addr + g->len > v->hi)
		return SIZE_MAX;
	for (i = 0; i < *nvmas; i++)
		if (vmas[i].lo == v->lo)
			return i;
	vmas[*nvmas] = (struct span){ v->lo, v->hi, false };
	return (*nvmas)++;
}

void doc_regions_judge(const struct doc_opts *o, const struct doc_map *m,
		       const struct perfmap_vmas *vs, struct doc_agent *a)
{
	PERFMAP_OPTS(perfmap_reader_opts, ropts, .max_bytes = o->max_bytes);
	struct span regions[DOC_AGENT_REGIONS], vmas[DOC_AGENT_REGIONS];
	size_t in_vma[DOC_AGENT_REGIONS], nvmas = 0, i;
	struct perfmap_reader *r;
	struct perfmap_record rec;
	struct doc_region *g;
	int err;

	/* The agent never sees an munmap: a region is judged only while it is mapped as it was. */
	for (i = 0; i < a->nregions; i++) {
		g = &a->regions[i];
		in_vma[i] = place(vs, g, vmas, &nvmas);
		g->mapped = in_vma[i] != SIZE_MAX;
		regions[i] = (struct span){ g->addr, g->addr + g->len, false };
	}
	if (!nvmas || !m->checked || !m->used || m->used->fd < 0 ||
	    lseek(m->used->fd, 0, SEEK_SET) < 0)
		return;
	r = perfmap_reader__from_fd(m->used->fd, &ropts);
	if (!r)
		return;
	/* As the coverage counts it: an entry names the bytes it covers; an empty one none. */
	while ((err = perfmap_reader__next(r, &rec)) > 0) {
		if (!rec.size || rec.start + rec.size < rec.start)
			continue;
		mark(regions, a->nregions, rec.start, rec.start + rec.size);
		mark(vmas, nvmas, rec.start, rec.start + rec.size);
	}
	perfmap_reader__free(r);
	/* A map not read to its end tells nothing unnamed. */
	if (err)
		return;
	for (i = 0; i < a->nregions; i++) {
		g = &a->regions[i];
		g->named = regions[i].hit;
		g->mapping_named = g->mapped && vmas[in_vma[i]].hit;
	}
}

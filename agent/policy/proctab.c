/* The process table: every live process perfmapd knows, by tgid, with its start time. */
#include <stdlib.h>
#include <string.h>

#include "policy/proctab.h"

int proctab_init(struct proctab *t)
{
	t->jit_regions = (struct jitregions_pool){ .max = JITREGIONS_MAX };
	return pidmap_init(&t->map, 1024);
}

void proctab_fini(struct proctab *t)
{
	struct pidmap_node *n, *next;
	size_t i;

	pidmap_for_each(&t->map, i, n, next)
		jitregions__clear(&proc_of(n)->jit.kept, &t->jit_regions);
	pidmap_fini(&t->map);
}

struct proc *proctab_find(const struct proctab *t, pid_t tgid)
{
	return (struct proc *)pidmap_find(&t->map, tgid);
}

struct proc *proctab_get(struct proctab *t, pid_t tgid, uint64_t start_ticks, bool *fresh)
{
	struct proc *p = proctab_find(t, tgid);

	*fresh = !p || p->start_ticks != start_ticks;
	if (p) {
		if (*fresh) {
			struct pidmap_node node = p->node;

			jitregions__clear(&p->jit.kept, &t->jit_regions);
			memset(p, 0, sizeof(*p));
			p->node = node;
			p->tgid = tgid;
			p->start_ticks = start_ticks;
		}
		return p;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->node.pid = tgid;
	p->tgid = tgid;
	p->start_ticks = start_ticks;
	pidmap_insert(&t->map, &p->node);
	return p;
}

void proctab_remove(struct proctab *t, pid_t tgid)
{
	struct proc *p = (struct proc *)pidmap_remove(&t->map, tgid);

	if (p)
		jitregions__clear(&p->jit.kept, &t->jit_regions);
	free(p);
}

size_t proctab_count(const struct proctab *t)
{
	return t->map.count;
}

/* The process table: a chained hash on tgid that grows with the process count. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proctab.h"

static size_t bucket_of(const struct proctab *t, pid_t tgid)
{
	/* Fibonacci hashing: consecutive pids spread over the buckets. */
	return (size_t)(((uint64_t)(uint32_t)tgid * 0x9e3779b97f4a7c15ull) >> 32) &
	       (t->nbuckets - 1);
}

int proctab_init(struct proctab *t)
{
	t->nbuckets = 1024;
	t->count = 0;
	t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
	return t->buckets ? 0 : -ENOMEM;
}

void proctab_fini(struct proctab *t)
{
	struct proc *p, *next;
	size_t i;

	if (!t->buckets)
		return;
	for (i = 0; i < t->nbuckets; i++) {
		for (p = t->buckets[i]; p; p = next) {
			next = p->next;
			free(p);
		}
	}
	free(t->buckets);
	t->buckets = NULL;
	t->count = 0;
}

struct proc *proctab_find(struct proctab *t, pid_t tgid)
{
	struct proc *p;

	for (p = t->buckets[bucket_of(t, tgid)]; p; p = p->next)
		if (p->tgid == tgid)
			return p;
	return NULL;
}

static void grow(struct proctab *t)
{
	struct proctab n = { .nbuckets = t->nbuckets * 2, .count = t->count };
	struct proc *p, *next;
	size_t i, b;

	n.buckets = calloc(n.nbuckets, sizeof(*n.buckets));
	if (!n.buckets)
		return;  /* longer chains, still correct */
	for (i = 0; i < t->nbuckets; i++) {
		for (p = t->buckets[i]; p; p = next) {
			next = p->next;
			b = bucket_of(&n, p->tgid);
			p->next = n.buckets[b];
			n.buckets[b] = p;
		}
	}
	free(t->buckets);
	*t = n;
}

struct proc *proctab_get(struct proctab *t, pid_t tgid, uint64_t start_ticks, bool *fresh)
{
	struct proc *p = proctab_find(t, tgid);
	size_t b;

	*fresh = !p || p->start_ticks != start_ticks;
	if (p) {
		if (*fresh) {
			struct proc *next = p->next;

			memset(p, 0, sizeof(*p));
			p->next = next;
			p->tgid = tgid;
			p->start_ticks = start_ticks;
		}
		return p;
	}
	if (t->count >= t->nbuckets)
		grow(t);
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->tgid = tgid;
	p->start_ticks = start_ticks;
	b = bucket_of(t, tgid);
	p->next = t->buckets[b];
	t->buckets[b] = p;
	t->count++;
	return p;
}

void proctab_remove(struct proctab *t, pid_t tgid)
{
	struct proc **pp, *p;

	for (pp = &t->buckets[bucket_of(t, tgid)]; (p = *pp); pp = &p->next) {
		if (p->tgid == tgid) {
			*pp = p->next;
			free(p);
			t->count--;
			return;
		}
	}
}

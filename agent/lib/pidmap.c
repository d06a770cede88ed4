/* A chained hash keyed by pid, grown when its count reaches its buckets. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "lib/pidmap.h"

static size_t bucket_of(size_t nbuckets, pid_t pid)
{
	/* Fibonacci hashing: consecutive pids spread over the buckets. */
	return (size_t)(((uint64_t)(uint32_t)pid * 0x9e3779b97f4a7c15ull) >> 32) & (nbuckets - 1);
}

int pidmap_init(struct pidmap *m, size_t nbuckets)
{
	m->nbuckets = nbuckets;
	m->count = 0;
	m->buckets = calloc(nbuckets, sizeof(*m->buckets));
	return m->buckets ? 0 : -ENOMEM;
}

void pidmap_clear(struct pidmap *m)
{
	struct pidmap_node *n, *next;
	size_t i;

	if (!m->buckets)
		return;
	pidmap_for_each(m, i, n, next)
		free(n);
	for (i = 0; i < m->nbuckets; i++)
		m->buckets[i] = NULL;
	m->count = 0;
}

void pidmap_fini(struct pidmap *m)
{
	pidmap_clear(m);
	free(m->buckets);
	m->buckets = NULL;
}

struct pidmap_node *pidmap_find(const struct pidmap *m, pid_t pid)
{
	struct pidmap_node *n;

	for (n = m->buckets[bucket_of(m->nbuckets, pid)]; n; n = n->next)
		if (n->pid == pid)
			return n;
	return NULL;
}

static void grow(struct pidmap *m)
{
	size_t nb = m->nbuckets * 2, i, b;
	struct pidmap_node **v = calloc(nb, sizeof(*v)), *n, *next;

	if (!v)
		return;  /* longer chains, still correct */
	pidmap_for_each(m, i, n, next) {
		b = bucket_of(nb, n->pid);
		n->next = v[b];
		v[b] = n;
	}
	free(m->buckets);
	m->buckets = v;
	m->nbuckets = nb;
}

void pidmap_insert(struct pidmap *m, struct pidmap_node *n)
{
	size_t b;

	if (m->count >= m->nbuckets)
		grow(m);
	b = bucket_of(m->nbuckets, n->pid);
	n->next = m->buckets[b];
	m->buckets[b] = n;
	m->count++;
}

struct pidmap_node *pidmap_remove(struct pidmap *m, pid_t pid)
{
	struct pidmap_node **pp, *n;

	for (pp = &m->buckets[bucket_of(m->nbuckets, pid)]; (n = *pp); pp = &n->next) {
		if (n->pid == pid) {
			*pp = n->next;
			m->count--;
			return n;
		}
	}
	return NULL;
}

struct pidmap_node *pidmap_get(struct pidmap *m, pid_t pid, size_t size)
{
	struct pidmap_node *n = pidmap_find(m, pid);

	if (n)
		return n;
	n = calloc(1, size);
	if (!n)
		return NULL;
	n->pid = pid;
	pidmap_insert(m, n);
	return n;
}

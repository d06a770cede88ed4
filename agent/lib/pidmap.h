/*
 * A chained hash keyed by pid that grows with its count: the process table,
 * the retention list and the map index each keep their records in one.
 * Intrusive: a record begins with a struct pidmap_node.
 */
#ifndef PERFMAPD_PIDMAP_H
#define PERFMAPD_PIDMAP_H

#include <stddef.h>
#include <sys/types.h>

struct pidmap_node {
	struct pidmap_node *next;
	pid_t pid;
};

struct pidmap {
	struct pidmap_node **buckets;
	size_t nbuckets;
	size_t count;
};

int pidmap_init(struct pidmap *m, size_t nbuckets);
/* Frees every node with free(); the map can be initialized again. */
void pidmap_fini(struct pidmap *m);
/* Frees every node with free(), and keeps the buckets for more. */
void pidmap_clear(struct pidmap *m);
struct pidmap_node *pidmap_find(const struct pidmap *m, pid_t pid);
/* Add @n, whose pid no node has yet. */
void pidmap_insert(struct pidmap *m, struct pidmap_node *n);
/*
 * The node of @pid, or a new zeroed one of @size bytes (a record beginning
 * with its node) inserted for it; NULL when out of memory.
 */
struct pidmap_node *pidmap_get(struct pidmap *m, pid_t pid, size_t size);
/* Take the node of @pid out, for the caller to free; NULL if none. */
struct pidmap_node *pidmap_remove(struct pidmap *m, pid_t pid);

/*
 * Every node, as @n (a struct pidmap_node *). The body may remove and free
 * @n itself, and nothing else.
 */
#define pidmap_for_each(m, i, n, next)                                          \
	for ((i) = 0; (i) < (m)->nbuckets; (i)++)                               \
		for ((n) = (m)->buckets[i]; (n) && ((next) = (n)->next, 1); (n) = (next))

#endif /* PERFMAPD_PIDMAP_H */

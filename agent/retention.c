/* Maps waiting at their paths, by pid, with their deadlines and retry rules. */
#include <errno.h>
#include <stdlib.h>

#include "retention.h"

struct node {
	struct node *next;
	struct retained e;
};

struct retention {
	struct node **buckets;
	size_t nbuckets;
	size_t count[2];   /* by enum retain_kind */
};

static size_t bucket_of(const struct retention *r, pid_t pid)
{
	return (size_t)(((uint64_t)(uint32_t)pid * 0x9e3779b97f4a7c15ull) >> 32) &
	       (r->nbuckets - 1);
}

struct retention *retention__new(void)
{
	struct retention *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->nbuckets = 256;
	r->buckets = calloc(r->nbuckets, sizeof(*r->buckets));
	if (!r->buckets) {
		free(r);
		return NULL;
	}
	return r;
}

void retention__free(struct retention *r)
{
	struct node *n, *next;
	size_t i;

	if (!r)
		return;
	for (i = 0; i < r->nbuckets; i++) {
		for (n = r->buckets[i]; n; n = next) {
			next = n->next;
			free(n);
		}
	}
	free(r->buckets);
	free(r);
}

static struct node **slot_of(struct retention *r, pid_t pid)
{
	struct node **pp;

	for (pp = &r->buckets[bucket_of(r, pid)]; *pp; pp = &(*pp)->next)
		if ((*pp)->e.pid == pid)
			return pp;
	return pp;
}

static void grow(struct retention *r)
{
	size_t n = r->nbuckets * 2, i, b;
	struct node **nb = calloc(n, sizeof(*nb)), *p, *next;

	if (!nb)
		return;  /* longer chains, still correct */
	for (i = 0; i < r->nbuckets; i++) {
		for (p = r->buckets[i]; p; p = next) {
			next = p->next;
			b = (size_t)(((uint64_t)(uint32_t)p->e.pid * 0x9e3779b97f4a7c15ull) >> 32) & (n - 1);
			p->next = nb[b];
			nb[b] = p;
		}
	}
	free(r->buckets);
	r->buckets = nb;
	r->nbuckets = n;
}

int retention__add(struct retention *r, const struct retained *e)
{
	struct node **pp, *n;

	if (r->count[0] + r->count[1] >= r->nbuckets)
		grow(r);
	pp = slot_of(r, e->pid);
	n = *pp;
	if (n) {
		r->count[n->e.kind]--;
	} else {
		n = calloc(1, sizeof(*n));
		if (!n)
			return -ENOMEM;
		*pp = n;
	}
	n->e = *e;
	r->count[e->kind]++;
	return 0;
}

int retention__add_move(struct retention *r, const struct retained *e, uint64_t now_ns)
{
	struct retained m = *e;

	m.kind = RETAIN_MOVE;
	m.first_ns = now_ns;
	m.backoff_ns = RETRY_MOVE_FIRST_NS;
	m.deadline_ns = now_ns + m.backoff_ns;
	return retention__add(r, &m);
}

struct retained *retention__find(struct retention *r, pid_t pid)
{
	struct node *n = *slot_of(r, pid);

	return n ? &n->e : NULL;
}

void retention__forget(struct retention *r, pid_t pid)
{
	struct node **pp = slot_of(r, pid), *n = *pp;

	if (!n)
		return;
	*pp = n->next;
	r->count[n->e.kind]--;
	free(n);
}

size_t retention__count(const struct retention *r, enum retain_kind kind)
{
	return r->count[kind];
}

/* Busy again: true while the rules allow another try. */
static bool retry(struct retained *e, uint64_t now_ns)
{
	if (e->kind == RETAIN_EXITED) {
		e->deadline_ns = now_ns + RETRY_EXITED_NS;
		return true;
	}
	if (now_ns - e->first_ns >= MOVE_BUDGET_NS)
		return false;
	e->backoff_ns = e->backoff_ns * 2 < RETRY_MOVE_MAX_NS ? e->backoff_ns * 2 : RETRY_MOVE_MAX_NS;
	e->deadline_ns = now_ns + e->backoff_ns;
	return true;
}

void retention__expire(struct retention *r, uint64_t now_ns, const struct retention_cb *cb)
{
	struct node **pp, *n;
	size_t i;

	for (i = 0; i < r->nbuckets; i++) {
		pp = &r->buckets[i];
		while ((n = *pp)) {
			if (n->e.deadline_ns > now_ns) {
				pp = &n->next;
				continue;
			}
			if (cb->due(cb->ctx, &n->e) == RETAIN_BUSY) {
				if (retry(&n->e, now_ns)) {
					pp = &n->next;
					continue;
				}
				if (cb->gave_up)
					cb->gave_up(cb->ctx, &n->e);
			}
			*pp = n->next;
			r->count[n->e.kind]--;
			free(n);
		}
	}
}

uint64_t retention__next_move(const struct retention *r)
{
	uint64_t next = UINT64_MAX;
	struct node *n;
	size_t i;

	if (!r->count[RETAIN_MOVE])
		return next;
	for (i = 0; i < r->nbuckets; i++)
		for (n = r->buckets[i]; n; n = n->next)
			if (n->e.kind == RETAIN_MOVE && n->e.deadline_ns < next)
				next = n->e.deadline_ns;
	return next;
}

/*
 * Maps waiting at their paths, by pid, with their deadlines and retry rules.
 * The deadlines are in two min-heaps, one per kind: a tick costs O(log n)
 * per entry due and nothing per entry waiting, and the next move's deadline
 * is the top of its heap. A user who leaves 100k exited maps makes no tick
 * of the agent's walk them (issue 9, M3).
 */
#include <errno.h>
#include <stdlib.h>

#include "lib/pidmap.h"
#include "policy/retention.h"
#include "lib/subids.h"

struct node {
	struct pidmap_node node;
	size_t slot;       /* its index in the heap of its kind */
	struct retained e;
};

/* Entries by deadline, earliest at [0]. */
struct heap {
	struct node **v;
	size_t n, cap;
};

/* What one owner has waiting. Few owners have any: a short array, searched. */
struct owner {
	uid_t uid;
	size_t orphans;
	size_t exited;
	bool over_said;    /* its being over the cap was logged (until it has none) */
};

struct retention {
	struct pidmap map;
	struct heap heap[2];   /* by enum retain_kind */
	struct owner *owners;
	size_t nowners, owners_cap;
};

struct retention *retention__new(void)
{
	struct retention *r = calloc(1, sizeof(*r));

	if (r && pidmap_init(&r->map, 256)) {
		free(r);
		return NULL;
	}
	return r;
}

void retention__free(struct retention *r)
{
	if (!r)
		return;
	pidmap_fini(&r->map);
	free(r->heap[0].v);
	free(r->heap[1].v);
	free(r->owners);
	free(r);
}

/* ---- the heaps ---- */

static bool before(const struct node *a, const struct node *b)
{
	return a->e.deadline_ns < b->e.deadline_ns;
}

static void heap_put(struct heap *h, size_t i, struct node *n)
{
	h->v[i] = n;
	n->slot = i;
}

static void sift_up(struct heap *h, size_t i)
{
	struct node *n = h->v[i];

	while (i && before(n, h->v[(i - 1) / 2])) {
		heap_put(h, i, h->v[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
	heap_put(h, i, n);
}

static void sift_down(struct heap *h, size_t i)
{
	struct node *n = h->v[i];
	size_t c;

	while ((c = 2 * i + 1) < h->n) {
		if (c + 1 < h->n && before(h->v[c + 1], h->v[c]))
			c++;
		if (!before(h->v[c], n))
			break;
		heap_put(h, i, h->v[c]);
		i = c;
	}
	heap_put(h, i, n);
}

static int heap_reserve(struct heap *h)
{
	struct node **nv;
	size_t cap;

	if (h->n < h->cap)
		return 0;
	cap = h->cap ? h->cap * 2 : 64;
	nv = realloc(h->v, cap * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	h->v = nv;
	h->cap = cap;
	return 0;
}

/* heap_reserve() made room. */
static void heap_push(struct heap *h, struct node *n)
{
	heap_put(h, h->n++, n);
	sift_up(h, h->n - 1);
}

static void heap_del(struct heap *h, struct node *n)
{
	size_t i = n->slot;

	if (i == --h->n)
		return;
	heap_put(h, i, h->v[h->n]);
	sift_down(h, i);
	sift_up(h, h->v[i] == n ? i : h->v[i]->slot);
}

/* @n's deadline changed. */
static void heap_fix(struct heap *h, struct node *n)
{
	sift_down(h, n->slot);
	sift_up(h, n->slot);
}

/* ---- owners ---- */

static struct node *node_of(const struct retention *r, pid_t pid)
{
	return (struct node *)pidmap_find(&r->map, pid);
}

/* Counted per user: a user's subordinate uids (its rootless containers') count as the user. */
static struct owner *owner_of(const struct retention *r, uid_t uid)
{
	size_t i;

	uid = subids_owner(uid);
	for (i = 0; i < r->nowners; i++)
		if (r->owners[i].uid == uid)
			return &r->owners[i];
	return NULL;
}

/* Make room to count an entry of @uid: 0, or -ENOMEM (and nothing changed). */
static int owner_reserve(struct retention *r, uid_t uid)
{
	struct owner *no;
	size_t cap;

	if (owner_of(r, uid) || r->nowners < r->owners_cap)
		return 0;
	cap = r->owners_cap ? r->owners_cap * 2 : 8;
	no = realloc(r->owners, cap * sizeof(*no));
	if (!no)
		return -ENOMEM;
	r->owners = no;
	r->owners_cap = cap;
	return 0;
}

static bool counted(const struct retained *e)
{
	return e->orphan || e->kind == RETAIN_EXITED;
}

/* One entry more (@more) or fewer for @e's owner. */
static void count_owner(struct retention *r, const struct retained *e, bool more)
{
	struct owner *o;

	if (!counted(e))
		return;
	o = owner_of(r, e->uid);
	if (!o && !more)
		return;
	if (!o) {
		/* owner_reserve() made room */
		o = &r->owners[r->nowners++];
		*o = (struct owner){ .uid = subids_owner(e->uid) };
	}
	if (more) {
		o->orphans += e->orphan;
		o->exited += e->kind == RETAIN_EXITED;
		return;
	}
	o->orphans -= e->orphan;
	o->exited -= e->kind == RETAIN_EXITED;
	if (!o->orphans && !o->exited)
		*o = r->owners[--r->nowners];
}

size_t retention__orphans(const struct retention *r, uid_t uid)
{
	const struct owner *o = owner_of(r, uid);

	return o ? o->orphans : 0;
}

size_t retention__exited(const struct retention *r, uid_t uid)
{
	const struct owner *o = owner_of(r, uid);

	return o ? o->exited : 0;
}

bool retention__first_over(struct retention *r, uid_t uid)
{
	struct owner *o = owner_of(r, uid);

	if (!o || o->over_said)
		return false;
	o->over_said = true;
	return true;
}

/* ---- entries ---- */

int retention__add(struct retention *r, const struct retained *e)
{
	struct node *n = node_of(r, e->pid);

	if (counted(e) && owner_reserve(r, e->uid))
		return -ENOMEM;
	if (heap_reserve(&r->heap[e->kind]))
		return -ENOMEM;
	if (n) {
		heap_del(&r->heap[n->e.kind], n);
		/* If this frees its owner's slot, the slot is there for @e's owner. */
		count_owner(r, &n->e, false);
	} else {
		n = calloc(1, sizeof(*n));
		if (!n)
			return -ENOMEM;
		n->node.pid = e->pid;
		pidmap_insert(&r->map, &n->node);
	}
	n->e = *e;
	heap_push(&r->heap[e->kind], n);
	count_owner(r, e, true);
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
	struct node *n = node_of(r, pid);

	return n ? &n->e : NULL;
}

void retention__forget(struct retention *r, pid_t pid)
{
	struct node *n = (struct node *)pidmap_remove(&r->map, pid);

	if (!n)
		return;
	heap_del(&r->heap[n->e.kind], n);
	count_owner(r, &n->e, false);
	free(n);
}

size_t retention__count(const struct retention *r, enum retain_kind kind)
{
	return r->heap[kind].n;
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

/* The entries of one heap due at @now_ns; each retried one goes past @now_ns. */
static void expire_heap(struct retention *r, struct heap *h, uint64_t now_ns,
			const struct retention_cb *cb)
{
	struct node *n;

	while (h->n && (n = h->v[0])->e.deadline_ns <= now_ns) {
		enum retain_result res = cb->due(cb->ctx, &n->e);

		if (res == RETAIN_HELD) {
			n->e.held = true;
			n->e.deadline_ns = now_ns + RETRY_HELD_NS;
			heap_fix(h, n);
			continue;
		}
		if (res == RETAIN_BUSY) {
			if (retry(&n->e, now_ns)) {
				heap_fix(h, n);
				continue;
			}
			if (cb->gave_up)
				cb->gave_up(cb->ctx, &n->e);
		}
		retention__forget(r, n->e.pid);
	}
}

void retention__expire(struct retention *r, uint64_t now_ns, const struct retention_cb *cb)
{
	expire_heap(r, &r->heap[RETAIN_EXITED], now_ns, cb);
	expire_heap(r, &r->heap[RETAIN_MOVE], now_ns, cb);
}

uint64_t retention__next_move(const struct retention *r)
{
	const struct heap *h = &r->heap[RETAIN_MOVE];

	return h->n ? h->v[0]->e.deadline_ns : UINT64_MAX;
}

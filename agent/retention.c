/* Maps waiting at their paths, by pid, with their deadlines and retry rules. */
#include <errno.h>
#include <stdlib.h>

#include "pidmap.h"
#include "retention.h"

struct node {
	struct pidmap_node node;
	struct retained e;
};

/* Orphans of one owner. Few owners have any: a short array, searched. */
struct owner {
	uid_t uid;
	size_t orphans;
};

struct retention {
	struct pidmap map;
	size_t count[2];   /* by enum retain_kind */
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
	free(r->owners);
	free(r);
}

static struct node *node_of(const struct retention *r, pid_t pid)
{
	return (struct node *)pidmap_find(&r->map, pid);
}

static struct owner *owner_of(const struct retention *r, uid_t uid)
{
	size_t i;

	for (i = 0; i < r->nowners; i++)
		if (r->owners[i].uid == uid)
			return &r->owners[i];
	return NULL;
}

/* Make room to count an orphan of @uid: 0, or -ENOMEM (and nothing changed). */
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

/* One orphan more (@more) or fewer for @e's owner. */
static void count_orphan(struct retention *r, const struct retained *e, bool more)
{
	struct owner *o;

	if (!e->orphan)
		return;
	o = owner_of(r, e->uid);
	if (!o && !more)
		return;
	if (!o) {
		/* owner_reserve() made room */
		o = &r->owners[r->nowners++];
		*o = (struct owner){ .uid = e->uid };
	}
	if (more)
		o->orphans++;
	else if (!--o->orphans)
		*o = r->owners[--r->nowners];
}

size_t retention__orphans(const struct retention *r, uid_t uid)
{
	const struct owner *o = owner_of(r, uid);

	return o ? o->orphans : 0;
}

int retention__add(struct retention *r, const struct retained *e)
{
	struct node *n = node_of(r, e->pid);

	if (e->orphan && owner_reserve(r, e->uid))
		return -ENOMEM;
	if (n) {
		r->count[n->e.kind]--;
		count_orphan(r, &n->e, false);
	} else {
		n = calloc(1, sizeof(*n));
		if (!n)
			return -ENOMEM;
		n->node.pid = e->pid;
		pidmap_insert(&r->map, &n->node);
	}
	n->e = *e;
	r->count[e->kind]++;
	count_orphan(r, e, true);
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
	r->count[n->e.kind]--;
	count_orphan(r, &n->e, false);
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
	struct pidmap_node *pn, *next;
	struct node *n;
	size_t i;

	pidmap_for_each(&r->map, i, pn, next) {
		n = (struct node *)pn;
		if (n->e.deadline_ns > now_ns)
			continue;
		if (cb->due(cb->ctx, &n->e) == RETAIN_BUSY) {
			if (retry(&n->e, now_ns))
				continue;
			if (cb->gave_up)
				cb->gave_up(cb->ctx, &n->e);
		}
		retention__forget(r, n->e.pid);
	}
}

uint64_t retention__next_move(const struct retention *r)
{
	struct pidmap_node *pn, *next;
	uint64_t soonest = UINT64_MAX;
	const struct node *n;
	size_t i;

	if (!r->count[RETAIN_MOVE])
		return soonest;
	pidmap_for_each(&r->map, i, pn, next) {
		n = (const struct node *)pn;
		if (n->e.kind == RETAIN_MOVE && n->e.deadline_ns < soonest)
			soonest = n->e.deadline_ns;
	}
	return soonest;
}

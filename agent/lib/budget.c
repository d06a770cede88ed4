/*
 * Per-uid token buckets of bytes. A uid's bucket fills at the rate up to the
 * burst; a uid with a full bucket needs no record, so the table holds only
 * the uids that spent something lately and is pruned of the others as it
 * grows: its size is bounded by the uids active within burst/rate seconds.
 */
#include <stdlib.h>

#include "lib/budget.h"
#include "lib/pidmap.h"
#include "lib/subids.h"

#define PRUNE_AT 256   /* records before a prune of the full buckets */

struct bucket {
	struct pidmap_node node;   /* keyed by the uid */
	uint64_t level;            /* bytes left at @at_ns */
	uint64_t at_ns;
	uint64_t said_ns;          /* budget__quiet(): when something was last said; 0 never */
};

struct budget {
	uint64_t rate, burst;
	struct pidmap uids;
	size_t prune_at;
};

struct budget *budget__new(uint64_t rate, uint64_t burst)
{
	struct budget *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->rate = rate;
	b->burst = burst;
	b->prune_at = PRUNE_AT;
	if (pidmap_init(&b->uids, 64)) {
		free(b);
		return NULL;
	}
	return b;
}

void budget__free(struct budget *b)
{
	if (!b)
		return;
	pidmap_fini(&b->uids);
	free(b);
}

/* The level of @k at @now_ns: what it had, plus the rate since, up to the burst. */
static uint64_t level_at(const struct budget *b, const struct bucket *k, uint64_t now_ns)
{
	unsigned __int128 add;

	if (now_ns <= k->at_ns)
		return k->level;
	add = (unsigned __int128)(now_ns - k->at_ns) * b->rate / 1000000000u;
	return add >= b->burst - k->level ? b->burst : k->level + (uint64_t)add;
}

/* Drop the records of uids whose buckets are full again: they are as new. */
static void prune(struct budget *b, uint64_t now_ns)
{
	struct pidmap_node *n, *next;
	size_t i;

	pidmap_for_each(&b->uids, i, n, next)
		if (level_at(b, (struct bucket *)n, now_ns) == b->burst)
			free(pidmap_remove(&b->uids, n->pid));
	/* Many uids active at once: prune again only when the table doubled. */
	b->prune_at = b->uids.count * 2 > PRUNE_AT ? b->uids.count * 2 : PRUNE_AT;
}

/*
 * A user's subordinate uids (its rootless containers' ids) share its bucket:
 * 65,536 uids of one user are not 65,536 budgets.
 */
static pid_t key_of(uid_t uid)
{
	return (pid_t)subids_owner(uid);
}

static struct bucket *bucket_of(struct budget *b, uid_t uid, uint64_t now_ns)
{
	struct bucket *k = (struct bucket *)pidmap_find(&b->uids, key_of(uid));

	if (k)
		return k;
	if (b->uids.count >= b->prune_at)
		prune(b, now_ns);
	k = calloc(1, sizeof(*k));
	if (!k)
		return NULL;
	k->node.pid = key_of(uid);
	k->level = b->burst;
	k->at_ns = now_ns;
	pidmap_insert(&b->uids, &k->node);
	return k;
}

void budget__set(struct budget *b, uint64_t rate, uint64_t burst)
{
	struct pidmap_node *n, *next;
	struct bucket *k;
	size_t i;

	/* level_at() counts on no level above the burst. */
	pidmap_for_each(&b->uids, i, n, next) {
		k = (struct bucket *)n;
		if (k->level > burst)
			k->level = burst;
	}
	b->rate = rate;
	b->burst = burst;
}

bool budget__take(struct budget *b, uid_t uid, uint64_t bytes, uint64_t now_ns)
{
	struct bucket *k;

	if (!b->rate)
		return true;
	k = bucket_of(b, uid, now_ns);
	/* No memory for a record: refuse rather than let a uid spend without bound. */
	if (!k)
		return false;
	k->level = level_at(b, k, now_ns);
	k->at_ns = now_ns > k->at_ns ? now_ns : k->at_ns;
	if (bytes > k->level)
		return false;
	k->level -= bytes;
	return true;
}

void budget__settle(struct budget *b, uid_t uid, uint64_t taken, uint64_t used)
{
	struct bucket *k;

	if (!b->rate || taken == used)
		return;
	k = (struct bucket *)pidmap_find(&b->uids, key_of(uid));
	if (!k)
		return;  /* pruned: full, nothing to give back */
	if (used < taken)
		k->level = taken - used >= b->burst - k->level ? b->burst : k->level + (taken - used);
	else
		k->level = used - taken >= k->level ? 0 : k->level - (used - taken);
}

bool budget__quiet(struct budget *b, uid_t uid, uint64_t now_ns, uint64_t interval_ns)
{
	struct bucket *k = bucket_of(b, uid, now_ns);

	if (!k)
		return true;  /* no memory: say nothing rather than flood */
	if (k->said_ns && now_ns < k->said_ns + interval_ns)
		return true;
	k->said_ns = now_ns ? now_ns : 1;
	return false;
}

uint64_t budget__left(struct budget *b, uid_t uid, uint64_t now_ns)
{
	struct bucket *k;

	if (!b->rate)
		return UINT64_MAX;
	k = (struct bucket *)pidmap_find(&b->uids, (pid_t)uid);
	return k ? level_at(b, k, now_ns) : b->burst;
}

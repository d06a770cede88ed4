/*
 * The archive's quota: per-uid fair eviction by the agent's own archiving
 * time, over an index kept in memory. A user who fills the archive with
 * large maps, with many one-line maps, or with maps whose mtime says 2035,
 * loses their own oldest maps first: nothing a user controls orders the
 * eviction of another user's maps. Every operation costs O(uids) at most,
 * never O(files): the worker stores a map in the same time with 10 or 100k
 * archived. A jitdump stored beside a map is found as its uid's newest
 * entry, the map the worker stored just before it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive/archive_quota.h"
#include "lib/log.h"
#include "lib/subids.h"

/* One uid's files, oldest first: v[head .. head + n). */
struct share {
	uid_t uid;
	uint64_t bytes;
	struct archived_file *v;
	size_t head, n, cap;
};

struct archive_quota {
	struct share *s;
	size_t ns, cap;
	uint64_t files, bytes;   /* atomic: status reads them while the worker changes them */
};

static int ts_cmp(const struct timespec *a, const struct timespec *b)
{
	if (a->tv_sec != b->tv_sec)
		return a->tv_sec < b->tv_sec ? -1 : 1;
	if (a->tv_nsec != b->tv_nsec)
		return a->tv_nsec < b->tv_nsec ? -1 : 1;
	return 0;
}

/* Oldest first (the name breaks ties: the order is total). */
static int by_age(const void *x, const void *y)
{
	const struct archived_file *a = x, *b = y;
	int c = ts_cmp(&a->at, &b->at);

	return c ? c : strcmp(a->name, b->name);
}

uint64_t archive_quota__cost(const struct stat *st)
{
	uint64_t blocks = (uint64_t)st->st_blocks * 512;

	return blocks > (uint64_t)st->st_size ? blocks : (uint64_t)st->st_size;
}

struct archive_quota *archive_quota__new(void)
{
	return calloc(1, sizeof(struct archive_quota));
}

static void share_fini(struct share *sh)
{
	size_t i;

	for (i = sh->head; i < sh->head + sh->n; i++) {
		free(sh->v[i].name);
		free(sh->v[i].dump);
	}
	free(sh->v);
}

void archive_quota__free(struct archive_quota *q)
{
	size_t i;

	if (!q)
		return;
	for (i = 0; i < q->ns; i++)
		share_fini(&q->s[i]);
	free(q->s);
	free(q);
}

static void totals_add(struct archive_quota *q, int64_t files, int64_t bytes)
{
	__atomic_fetch_add(&q->files, (uint64_t)files, __ATOMIC_RELAXED);
	__atomic_fetch_add(&q->bytes, (uint64_t)bytes, __ATOMIC_RELAXED);
}

void archive_quota__usage(const struct archive_quota *q, uint64_t *files, uint64_t *bytes)
{
	*files = __atomic_load_n(&q->files, __ATOMIC_RELAXED);
	*bytes = __atomic_load_n(&q->bytes, __ATOMIC_RELAXED);
}

/*
 * A user's share holds its subordinate uids' maps too (its rootless
 * containers'): 65,536 small shares would make everyone else's the largest.
 */
static struct share *share_find(const struct archive_quota *q, uid_t uid)
{
	size_t i;

	uid = subids_owner(uid);
	for (i = 0; i < q->ns; i++)
		if (q->s[i].uid == uid)
			return &q->s[i];
	return NULL;
}

/* @uid's share, made if it has none yet; NULL when out of memory. */
static struct share *share_of(struct archive_quota *q, uid_t uid)
{
	struct share *ns = share_find(q, uid);
	size_t cap;

	if (ns)
		return ns;
	if (q->ns == q->cap) {
		cap = q->cap ? q->cap * 2 : 8;
		ns = realloc(q->s, cap * sizeof(*ns));
		if (!ns)
			return NULL;
		q->s = ns;
		q->cap = cap;
	}
	q->s[q->ns] = (struct share){ .uid = subids_owner(uid) };
	return &q->s[q->ns++];
}

/* Room for one more at the end of @sh: the deleted head's room is taken back first. */
static int share_reserve(struct share *sh)
{
	struct archived_file *nv;
	size_t cap;

	if (sh->head && sh->head + sh->n == sh->cap) {
		memmove(sh->v, sh->v + sh->head, sh->n * sizeof(*sh->v));
		sh->head = 0;
	}
	if (sh->head + sh->n < sh->cap)
		return 0;
	cap = sh->cap ? sh->cap * 2 : 16;
	nv = realloc(sh->v, cap * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	sh->v = nv;
	sh->cap = cap;
	return 0;
}

int archive_quota__add(struct archive_quota *q, const char *name, uint64_t cost, struct timespec at, uid_t uid)
{
	struct share *sh = share_of(q, uid);
	struct archived_file *f;

	if (!sh || share_reserve(sh))
		return -ENOMEM;
	f = &sh->v[sh->head + sh->n];
	f->name = strdup(name);
	if (!f->name)
		return -ENOMEM;
	f->dump = NULL;
	f->cost = cost;
	f->at = at;
	f->uid = uid;
	sh->n++;
	sh->bytes += cost;
	totals_add(q, 1, (int64_t)cost);
	return 0;
}

/* @dump (the caller's, taken) counted with @f, an entry of @sh. */
static void attach(struct archive_quota *q, struct share *sh, struct archived_file *f, char *dump,
		   uint64_t cost)
{
	f->dump = dump;
	f->cost += cost;
	sh->bytes += cost;
	totals_add(q, 0, (int64_t)cost);
}

int archive_quota__add_dump(struct archive_quota *q, const char *map, const char *dump,
			    uint64_t cost, struct timespec at, uid_t uid)
{
	struct share *sh = share_find(q, uid);
	struct archived_file *f;
	char *name;
	size_t i;

	/* The newest first: the worker stores a dump just after its map. */
	for (i = sh && map ? sh->n : 0; i > 0; i--) {
		f = &sh->v[sh->head + i - 1];
		if (f->dump || f->uid != uid || strcmp(f->name, map))
			continue;
		name = strdup(dump);
		if (!name)
			return -ENOMEM;
		attach(q, sh, f, name, cost);
		return 0;
	}
	return archive_quota__add(q, dump, cost, at, uid);
}

/* An archived jitdump found at the start, to be counted with its map. */
struct loose_dump {
	char *name;
	uint64_t cost;
	struct timespec at;
	uid_t uid;
};

static int by_name(const void *x, const void *y)
{
	const struct archived_file *const *a = x, *const *b = y;

	return strcmp((*a)->name, (*b)->name);
}

/* "jit-<rest>.dump" -> "perf-<rest>.map"; false for another name. */
static bool map_of_dump(const char *dump, char *buf, size_t len)
{
	size_t n = strlen(dump);

	if (n < 10 || strncmp(dump, "jit-", 4) || strcmp(dump + n - 5, ".dump"))
		return false;
	return (size_t)snprintf(buf, len, "perf-%.*s.map", (int)(n - 9), dump + 4) < len;
}

/*
 * Each dump listed counted with its map, found by name through a sorted
 * index (once, at the start: O(files log files)); those without one, or
 * whose map is another uid's, are entries of their own.
 */
static int pair_dumps(struct archive_quota *q, struct loose_dump *d, size_t nd)
{
	struct archived_file **ix = NULL, key, *kp = &key, **hit;
	char map[NAME_MAX + 8];
	size_t i, j, n = 0;
	int err = 0;

	if (q->files) {
		ix = malloc(q->files * sizeof(*ix));
		if (!ix)
			return -ENOMEM;
		for (i = 0; i < q->ns; i++)
			for (j = q->s[i].head; j < q->s[i].head + q->s[i].n; j++)
				ix[n++] = &q->s[i].v[j];
		qsort(ix, n, sizeof(*ix), by_name);
	}
	for (i = 0; i < nd; i++) {
		if (!n || !map_of_dump(d[i].name, map, sizeof(map)))
			continue;
		key.name = map;
		hit = bsearch(&kp, ix, n, sizeof(*ix), by_name);
		if (!hit || (*hit)->dump || (*hit)->uid != d[i].uid)
			continue;
		attach(q, share_find(q, d[i].uid), *hit, d[i].name, d[i].cost);
		d[i].name = NULL;
	}
	free(ix);
	/* Entries of their own: the index above is not used past here (adding moves entries). */
	for (i = 0; !err && i < nd; i++)
		if (d[i].name)
			err = archive_quota__add(q, d[i].name, d[i].cost, d[i].at, d[i].uid);
	return err;
}

/* One more dump listed; -ENOMEM with nothing changed. */
static int loose_add(struct loose_dump **d, size_t *n, size_t *cap, const char *name,
		     const struct stat *st)
{
	struct loose_dump *nd;
	char *copy;

	if (*n == *cap) {
		nd = realloc(*d, (*cap ? *cap * 2 : 16) * sizeof(*nd));
		if (!nd)
			return -ENOMEM;
		*d = nd;
		*cap = *cap ? *cap * 2 : 16;
	}
	copy = strdup(name);
	if (!copy)
		return -ENOMEM;
	(*d)[(*n)++] = (struct loose_dump){ .name = copy, .cost = archive_quota__cost(st),
					     .at = st->st_mtim, .uid = st->st_uid };
	return 0;
}

int archive_quota__load(struct archive_quota *q, int dfd)
{
	struct loose_dump *dumps = NULL;
	size_t ndumps = 0, dumps_cap = 0;
	char map[NAME_MAX + 8];
	struct dirent *de;
	struct stat st;
	size_t i;
	DIR *d;
	int fd, err = 0;

	fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	while (!err && (de = readdir(d))) {
		if ((strncmp(de->d_name, "perf-", 5) && strncmp(de->d_name, "jit-", 4)) ||
		    fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
			continue;
		if (de->d_name[0] == 'j' && map_of_dump(de->d_name, map, sizeof(map)))
			err = loose_add(&dumps, &ndumps, &dumps_cap, de->d_name, &st);
		else if (de->d_name[0] == 'j')
			continue;
		else
			err = archive_quota__add(q, de->d_name, archive_quota__cost(&st), st.st_mtim,
						 st.st_uid);
	}
	closedir(d);
	if (!err)
		err = pair_dumps(q, dumps, ndumps);
	for (i = 0; i < ndumps; i++)
		free(dumps[i].name);
	free(dumps);
	/* Listed in the directory's order: each uid's oldest first from now on. */
	for (i = 0; i < q->ns; i++)
		qsort(q->s[i].v + q->s[i].head, q->s[i].n, sizeof(*q->s[i].v), by_age);
	return err;
}

/* The uid holding the most bytes; ties go to the one whose oldest file is oldest. */
static const struct share *largest(const struct archive_quota *q)
{
	const struct share *best = NULL, *sh;
	size_t i;

	for (i = 0; i < q->ns; i++) {
		sh = &q->s[i];
		if (!sh->n)
			continue;
		if (!best || sh->bytes > best->bytes ||
		    (sh->bytes == best->bytes &&
		     ts_cmp(&sh->v[sh->head].at, &best->v[best->head].at) < 0))
			best = sh;
	}
	return best;
}

const struct archived_file *archive_quota__victim(const struct archive_quota *q, uint64_t max_bytes,
					  uint64_t max_files)
{
	const struct share *sh;
	size_t i;

	for (i = 0; max_files && i < q->ns; i++)
		if (q->s[i].n > max_files)
			return &q->s[i].v[q->s[i].head];
	if (!max_bytes || __atomic_load_n(&q->bytes, __ATOMIC_RELAXED) <= max_bytes)
		return NULL;
	sh = largest(q);
	return sh ? &sh->v[sh->head] : NULL;
}

void archive_quota__drop(struct archive_quota *q, const struct archived_file *f)
{
	struct share *sh = share_find(q, f->uid);

	/* @f is the head of its uid's share: archive_quota__victim() says so. */
	if (!sh || !sh->n || f != &sh->v[sh->head])
		return;
	free(sh->v[sh->head].name);
	free(sh->v[sh->head].dump);
	sh->bytes -= f->cost;
	totals_add(q, -1, -(int64_t)f->cost);
	sh->head++;
	if (--sh->n)
		return;
	/* No files left: the share goes, so that uids come and go in bounded room. */
	share_fini(sh);
	*sh = q->s[--q->ns];
}

uint64_t archive_quota__enforce(struct archive_quota *q, int dfd, const char *dir, uint64_t max_bytes,
			uint64_t max_files, uint64_t *dumps)
{
	const struct archived_file *f;
	struct share *sh;
	uint64_t evicted = 0;

	*dumps = 0;
	while ((f = archive_quota__victim(q, max_bytes, max_files))) {
		sh = share_find(q, f->uid);
		if (unlinkat(dfd, f->name, 0) && errno != ENOENT)
			pr_warn("archive: cannot evict %s/%s: %s; no longer counted", dir, f->name,
				strerror(errno));
		else if (max_files && sh && sh->n > max_files)
			pr_info("archive: evicted %s/%s (%llu bytes): uid %u has more than %llu archived maps, this is its oldest",
				dir, f->name, (unsigned long long)f->cost, (unsigned int)f->uid,
				(unsigned long long)max_files);
		else
			pr_info("archive: evicted %s/%s (%llu bytes, uid %u's oldest: that uid holds the most) to stay under %llu bytes",
				dir, f->name, (unsigned long long)f->cost, (unsigned int)f->uid,
				(unsigned long long)max_bytes);
		/* Its jitdump with it: archived together, restored together. */
		if (f->dump && unlinkat(dfd, f->dump, 0) && errno != ENOENT)
			pr_warn("archive: cannot evict %s/%s, the jitdump of %s: %s; no longer counted",
				dir, f->dump, f->name, strerror(errno));
		else if (f->dump)
			pr_info("archive: evicted %s/%s with its map", dir, f->dump);
		*dumps += !!f->dump;
		/* A jitdump whose map the index lacks goes alone: a dump, not a map. */
		if (!strncmp(f->name, "jit-", 4))
			++*dumps;
		else
			evicted++;
		archive_quota__drop(q, f);
	}
	return evicted;
}

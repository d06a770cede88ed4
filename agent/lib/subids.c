/* /etc/subuid read once, and the owner of a subordinate uid looked up by binary search. */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/subids.h"

static struct subids table;

/* A decimal number of [p, end) into @v: false when it is not one (or over 32 bits). */
static bool number(const char *p, const char *end, unsigned long long *v)
{
	if (p == end || end - p > 10)
		return false;
	for (*v = 0; p < end; p++) {
		if (*p < '0' || *p > '9')
			return false;
		*v = *v * 10 + (unsigned long long)(*p - '0');
	}
	return *v <= UINT32_MAX;
}

/* One "USER:START:COUNT" line [p, end) into @out: false when it is not one. */
static bool parse_line(const char *p, const char *end, int (*uid_of)(const char *, uid_t *),
		       struct subid_range *out)
{
	const char *c1 = memchr(p, ':', (size_t)(end - p)), *c2;
	unsigned long long start, count, owner;
	char name[256];
	uid_t uid;

	c2 = c1 ? memchr(c1 + 1, ':', (size_t)(end - c1 - 1)) : NULL;
	if (!c1 || !c2 || c1 == p || !number(c1 + 1, c2, &start) || !number(c2 + 1, end, &count) ||
	    !count || start + count - 1 > UINT32_MAX - 1)
		return false;
	if (number(p, c1, &owner)) {
		uid = (uid_t)owner;
	} else {
		if ((size_t)(c1 - p) >= sizeof(name) || !uid_of)
			return false;
		memcpy(name, p, (size_t)(c1 - p));
		name[c1 - p] = '\0';
		if (uid_of(name, &uid))
			return false;
	}
	/*
	 * Root's and system users' ranges (LXD's root:1000000:1000000000, the
	 * containers user's of --userns=auto) hold many users' containers: kept
	 * per uid, as before, or their users would spend root's bounds.
	 */
	if (uid < SUBIDS_OWNER_MIN)
		return false;
	out->start = (uid_t)start;
	out->count = (unsigned int)count;
	out->owner = uid;
	return true;
}

static int by_start(const void *a, const void *b)
{
	const struct subid_range *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

int subids_parse(const char *buf, size_t len, int (*uid_of)(const char *name, uid_t *uid),
		 struct subids *t)
{
	const char *p = buf, *end = buf + len, *nl;
	struct subid_range r;
	size_t i, kept;

	memset(t, 0, sizeof(*t));
	for (; p < end && t->n < SUBIDS_MAX; p = nl + 1) {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			nl = end;
		if (*p == '#' || !parse_line(p, nl, uid_of, &r))
			continue;
		if (!(t->n & (t->n - 1))) {
			struct subid_range *g = realloc(t->r, (t->n ? t->n * 2 : 1) * sizeof(*g));

			if (!g) {
				subids_release(t);
				return -ENOMEM;
			}
			t->r = g;
		}
		t->r[t->n++] = r;
	}
	if (!t->n)
		return 0;
	qsort(t->r, t->n, sizeof(*t->r), by_start);
	/* Overlaps: the earlier range keeps its ids, the later one is left out. */
	for (i = 1, kept = 1; i < t->n; i++)
		if (t->r[i].start - t->r[kept - 1].start >= t->r[kept - 1].count)
			t->r[kept++] = t->r[i];
	t->n = kept;
	return 0;
}

void subids_release(struct subids *t)
{
	free(t->r);
	t->r = NULL;
	t->n = 0;
}

uid_t subids_owner_in(const struct subids *t, uid_t uid)
{
	size_t lo = 0, hi = t->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (uid < t->r[mid].start)
			hi = mid;
		else if (uid - t->r[mid].start >= t->r[mid].count)
			lo = mid + 1;
		else
			return t->r[mid].owner;
	}
	return uid;
}

static int passwd_uid(const char *name, uid_t *uid)
{
	struct passwd pw, *res = NULL;
	char buf[4096];

	if (getpwnam_r(name, &pw, buf, sizeof(buf), &res) || !res)
		return -ENOENT;
	*uid = res->pw_uid;
	return 0;
}

int subids_load(const char *path)
{
	size_t len = 0;
	ssize_t n;
	char *buf;
	int fd, err;

	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	buf = malloc(SUBIDS_FILE_MAX);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	while (len < SUBIDS_FILE_MAX && (n = read(fd, buf + len, SUBIDS_FILE_MAX - len)) > 0)
		len += (size_t)n;
	close(fd);
	if (len == SUBIDS_FILE_MAX)
		pr_warn("subids: %s is larger than %u bytes; the ranges past them are not known",
			path, SUBIDS_FILE_MAX);
	subids_release(&table);
	err = subids_parse(buf, len, passwd_uid, &table);
	free(buf);
	if (!err)
		pr_debug("subids: %zu subordinate uid ranges from %s: bounds per uid are kept per their owner",
			 table.n, path);
	return err;
}

uid_t subids_owner(uid_t uid)
{
	return subids_owner_in(&table, uid);
}

size_t subids_count(void)
{
	return table.n;
}

void subids_unload(void)
{
	subids_release(&table);
}

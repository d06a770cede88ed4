/*
 * The archive's quota: per-uid fair eviction by the agent's own archiving
 * time. A user who fills the archive with large maps, or with maps whose
 * mtime says 2035, loses their own oldest maps first: nothing a user
 * controls orders the eviction of another user's maps.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive_quota.h"
#include "log.h"

static int ts_cmp(const struct timespec *a, const struct timespec *b)
{
	if (a->tv_sec != b->tv_sec)
		return a->tv_sec < b->tv_sec ? -1 : 1;
	if (a->tv_nsec != b->tv_nsec)
		return a->tv_nsec < b->tv_nsec ? -1 : 1;
	return 0;
}

/* By uid, then oldest first (the name breaks ties: the order is total). */
static int by_uid_age(const void *x, const void *y)
{
	const struct archived_file *a = x, *b = y;
	int c;

	if (a->uid != b->uid)
		return a->uid < b->uid ? -1 : 1;
	c = ts_cmp(&a->at, &b->at);
	return c ? c : strcmp(a->name, b->name);
}

/* One uid's run of files in @v: [next, end), and the bytes still there. */
struct share {
	size_t next, end;
	uint64_t bytes;
};

/* The uid holding the most bytes; ties go to the one whose next file is oldest. */
static struct share *largest(struct share *s, size_t ns, const struct archived_file *v)
{
	struct share *best = NULL;
	size_t i;

	for (i = 0; i < ns; i++) {
		if (s[i].next == s[i].end)
			continue;
		if (!best || s[i].bytes > best->bytes ||
		    (s[i].bytes == best->bytes && ts_cmp(&v[s[i].next].at, &v[best->next].at) < 0))
			best = &s[i];
	}
	return best;
}

static size_t shares_of(const struct archived_file *v, size_t n, struct share *s)
{
	size_t i, ns = 0;

	for (i = 0; i < n; i++) {
		if (!i || v[i].uid != v[i - 1].uid)
			s[ns++] = (struct share){ .next = i, .end = i };
		s[ns - 1].end = i + 1;
		s[ns - 1].bytes += v[i].size;
	}
	return ns;
}

size_t quota__plan(struct archived_file *v, size_t n, uint64_t max, size_t *out)
{
	struct share *s, *top;
	uint64_t total = 0;
	size_t i, ns, k = 0;

	for (i = 0; i < n; i++)
		total += v[i].size;
	if (total <= max || !n)
		return 0;
	s = calloc(n, sizeof(*s));
	if (!s)
		return 0;
	qsort(v, n, sizeof(*v), by_uid_age);
	ns = shares_of(v, n, s);
	while (total > max && (top = largest(s, ns, v))) {
		out[k++] = top->next;
		top->bytes -= v[top->next].size;
		total -= v[top->next].size;
		top->next++;
	}
	free(s);
	return k;
}

/* Every archived map in @dfd (regular files named perf-*). */
static ssize_t list_archive(int dfd, struct archived_file **out)
{
	struct archived_file *v = NULL, *nv;
	size_t n = 0, cap = 0;
	struct dirent *de;
	struct stat st;
	DIR *d;
	int fd;

	/* A description of its own: the status reader lists while the worker evicts. */
	fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "perf-", 5) ||
		    fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv)
				break;
			v = nv;
		}
		snprintf(v[n].name, sizeof(v[n].name), "%s", de->d_name);
		v[n].size = (uint64_t)st.st_size;
		v[n].at = st.st_mtim;
		v[n].uid = st.st_uid;
		n++;
	}
	closedir(d);
	*out = v;
	return (ssize_t)n;
}

int quota__apply(int dfd, const char *dir, uint64_t max, struct quota_result *res)
{
	struct archived_file *v = NULL;
	size_t *plan = NULL, k, i;
	ssize_t n;

	memset(res, 0, sizeof(*res));
	n = list_archive(dfd, &v);
	if (n < 0)
		return (int)n;
	for (i = 0; i < (size_t)n; i++)
		res->bytes += v[i].size;
	res->files = (uint64_t)n;
	plan = max && res->bytes > max ? calloc((size_t)n, sizeof(*plan)) : NULL;
	k = plan ? quota__plan(v, (size_t)n, max, plan) : 0;
	for (i = 0; i < k; i++) {
		const struct archived_file *f = &v[plan[i]];

		if (unlinkat(dfd, f->name, 0))
			continue;
		res->bytes -= f->size;
		res->files--;
		res->evicted++;
		pr_info("archive: evicted %s/%s (%llu bytes, uid %u's oldest: that uid holds the most) to stay under %llu bytes",
			dir, f->name, (unsigned long long)f->size, (unsigned int)f->uid,
			(unsigned long long)max);
	}
	free(plan);
	free(v);
	return 0;
}

/*
 * What a profiled process has mapped executable, read from /proc while it
 * exists, keyed by (pid, start time): samples are named after the process
 * is gone, and a pid may be reused meanwhile.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#define MAPS_MAX_BYTES (16u << 20)   /* a process with more mappings is read in part */

static size_t bucket_of(pid_t pid)
{
	return (size_t)pid % (sizeof(((struct psnaps *)0)->bucket) / sizeof(struct psnap *));
}

/* Is @a later than @b: a later process at the pid, or a later image of it? */
static bool later(const struct psnap *a, const struct psnap *b)
{
	return !b || a->start_ticks > b->start_ticks ||
	       (a->start_ticks == b->start_ticks && a->image > b->image);
}

struct psnap *perfmap_prof__psnaps_find(struct psnaps *t, pid_t pid, uint64_t start_ticks,
					uint32_t image)
{
	struct psnap *s, *best = NULL;

	for (s = t->bucket[bucket_of(pid)]; s; s = s->next) {
		if (s->pid != pid || (start_ticks && s->start_ticks != start_ticks))
			continue;
		if (image != PSNAP_LATEST && start_ticks) {
			if (s->image == image)
				return s;
			continue;
		}
		if (later(s, best))
			best = s;
	}
	return best;
}

struct psnap *perfmap_prof__psnaps_get(struct psnaps *t, pid_t pid, uint64_t start_ticks,
				       uint32_t image)
{
	struct psnap *s = perfmap_prof__psnaps_find(t, pid, start_ticks, image);
	size_t b = bucket_of(pid);

	if (s)
		return s;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->pid = pid;
	s->start_ticks = start_ticks;
	s->image = image == PSNAP_LATEST ? 0 : image;
	s->next = t->bucket[b];
	t->bucket[b] = s;
	t->count++;
	return s;
}

static void vmas_clear(struct psnap *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i].path);
	free(s->v);
	s->v = NULL;
	s->n = 0;
}

/* Room for one more mapping in @s: 0, or -ENOMEM. */
static int vmas_reserve(struct psnap *s, size_t *cap)
{
	struct psnap_vma *nv;
	size_t nc;

	if (s->n < *cap)
		return 0;
	nc = *cap ? *cap * 2 : 32;
	nv = realloc(s->v, nc * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	s->v = nv;
	*cap = nc;
	return 0;
}

/* One mapping into @s, its path copied (@plen bytes; none when 0). */
static int vmas_push(struct psnap *s, size_t *cap, const struct perfmap_vma *v, const char *path,
		     size_t plen)
{
	if (vmas_reserve(s, cap))
		return -ENOMEM;
	s->v[s->n] = (struct psnap_vma){ .lo = v->lo, .hi = v->hi, .pgoff = v->pgoff,
					 .ino = v->ino, .dev_major = v->dev_major,
					 .dev_minor = v->dev_minor, .kind = v->kind,
					 .shared = v->shared };
	if (plen && !(s->v[s->n].path = strndup(path, plen)))
		return -ENOMEM;
	s->n++;
	return 0;
}

/* The executable lines of @buf into @s. */
static int parse_maps(struct psnap *s, const char *buf, size_t len)
{
	const char *line = buf, *end = buf + len, *nl, *path;
	struct perfmap_vma v;
	size_t plen, cap = 0;

	for (; line < end; line = nl + 1) {
		nl = memchr(line, '\n', (size_t)(end - line));
		if (!nl)
			break;
		if (perfmap__vma_parse_path(line, (size_t)(nl - line), &v, &path, &plen) ||
		    !(v.prot & PROT_EXEC))
			continue;
		if (vmas_push(s, &cap, &v, path, plen))
			return -ENOMEM;
	}
	return 0;
}

/*
 * The start of @name in the process's /proc/<pid> directory, open at
 * @dirfd, into @buf, NUL-terminated: 0, -ESRCH when the process is gone, or
 * -errno.
 */
static int read_proc(int dirfd, const char *name, char *buf, size_t len)
{
	ssize_t n;
	int fd, err;

	fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	n = read(fd, buf, len - 1);
	err = n < 0 ? -errno : 0;
	close(fd);
	if (err)
		return err;
	/* Nothing at all: the process went between the open and the read. */
	if (!n)
		return -ESRCH;
	buf[n] = '\0';
	return 0;
}

/*
 * The numbers of the line at @p, up to its end, into @out (NULL: counted
 * only): how many, or -1 past @max or past 32 bits.
 */
static long parse_ids(const char *p, unsigned int *out, size_t max)
{
	unsigned long long v;
	size_t n = 0;
	char *end;

	for (;;) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p < '0' || *p > '9')
			return (long)n;
		errno = 0;
		v = strtoull(p, &end, 10);
		if (n == max || errno || v > UINT32_MAX)
			return -1;
		if (out)
			out[n] = (unsigned int)v;
		n++;
		p = end;
	}
}

/*
 * Its ids from /proc/<pid>/status, as the host sees them: the effective
 * uid, which its perf map must have as owner; the file-system uid and gid
 * and the supplementary groups, which the kernel checks its opens with (the
 * source files its JIT names and DWARF lines carry are opened with them,
 * perfmapctl profile -j a). A Groups line the buffer cut is no groups
 * known: a number cut in two could be another group's.
 */
uint64_t perfmap_prof__psnap_own_mnt_ns(void)
{
	return perfmap__ns_inode(0, "mnt");
}

static void read_creds(struct psnap *s, int dirfd)
{
	unsigned int uids[4], gids[4];
	char buf[16384], *p, *nl;
	gid_t *groups;
	long n;

	if (read_proc(dirfd, "status", buf, sizeof(buf)))
		return;
	p = strstr(buf, "\nUid:");
	n = p ? parse_ids(p + 5, uids, 4) : 0;
	if (n >= 2) {
		s->uid = uids[1];
		s->uid_known = true;
	}
	/* Its pid in the innermost pid namespace, NSpid's last; none before Linux 4.1: the host's. */
	s->ns_pid = s->pid;
	p = strstr(buf, "\nNSpid:");
	nl = p ? strchr(p + 1, '\n') : NULL;
	if (nl) {
		while (nl > p && (nl[-1] == ' ' || nl[-1] == '\t'))
			nl--;
		while (nl > p && nl[-1] >= '0' && nl[-1] <= '9')
			nl--;
		if (*nl >= '1' && *nl <= '9')
			s->ns_pid = (pid_t)strtol(nl, NULL, 10);
	}
	s->creds_known = false;
	p = strstr(buf, "\nGid:");
	if (n != 4 || !p || parse_ids(p + 5, gids, 4) != 4)
		return;
	p = strstr(buf, "\nGroups:");
	nl = p ? strchr(p + 1, '\n') : NULL;
	if (!nl)
		return;
	*nl = '\0';
	n = parse_ids(p + 8, NULL, 1 << 16);
	groups = n < 0 ? NULL : calloc(n ? (size_t)n : 1, sizeof(*groups));
	if (!groups)
		return;
	parse_ids(p + 8, groups, (size_t)n);
	free(s->groups);
	s->groups = groups;
	s->ngroups = (size_t)n;
	s->fsuid = uids[3];
	s->fsgid = gids[3];
	s->mnt_ns = perfmap__ns_inode_at(dirfd, "mnt");
	s->creds_known = s->mnt_ns != 0;
}

/* What read_creds() found, to tell whether an exec (or a setns) came between two reads. */
struct creds_seen {
	bool known;
	uid_t fsuid;
	gid_t fsgid;
	size_t ngroups;
	uint64_t mnt_ns, groups_hash;
};

static bool same_creds(const struct creds_seen *a, const struct creds_seen *b)
{
	return a->known && b->known && a->fsuid == b->fsuid && a->fsgid == b->fsgid &&
	       a->ngroups == b->ngroups && a->mnt_ns == b->mnt_ns && a->groups_hash == b->groups_hash;
}

static struct creds_seen creds_seen(const struct psnap *s)
{
	struct creds_seen c = { .known = s->creds_known, .fsuid = s->fsuid, .fsgid = s->fsgid,
				.ngroups = s->ngroups, .mnt_ns = s->mnt_ns,
				.groups_hash = 0xcbf29ce484222325ull };

	for (size_t i = 0; c.known && i < s->ngroups; i++)
		c.groups_hash = (c.groups_hash ^ s->groups[i]) * 0x100000001b3ull;
	return c;
}

/* Its executable's path and its cgroup, for zones: read with its mappings, while it is there. */
static void read_identity(struct psnap *s, int dirfd)
{
	char buf[4096], *p, *nl;
	ssize_t n;

	read_creds(s, dirfd);
	n = readlinkat(dirfd, "exe", buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = '\0';
		free(s->exe);
		s->exe = strdup(buf);
	}
	if (read_proc(dirfd, "cgroup", buf, sizeof(buf)))
		return;
	/* The unified hierarchy's line ("0::/path") where there is one, else the first line's path. */
	p = !strncmp(buf, "0::", 3) ? buf : strstr(buf, "\n0::");
	if (p)
		p += *p == '\n' ? 4 : 3;
	else if ((p = strchr(buf, ':')) && (p = strchr(p + 1, ':')))
		p++;
	else
		return;
	nl = strchr(p, '\n');
	if (nl)
		*nl = '\0';
	free(s->cgroup);
	s->cgroup = strdup(p);
	s->container[0] = '\0';
	for (const char *c = p; *c; c++) {
		size_t k = strspn(c, "0123456789abcdef");

		if (k == 64) {
			memcpy(s->container, c, 64);
			s->container[64] = '\0';
			break;
		}
		c += k ? k - 1 : 0;
	}
}

/* Its executable mappings from the text of /proc/<pid>/maps, open at @fd. */
static int text_maps(struct psnap *s, int fd)
{
	size_t len = 0, cap = 1 << 16;
	char *buf, *nb;
	ssize_t n;
	int err;

	if (lseek(fd, 0, SEEK_SET) < 0)
		return -errno;
	buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		if (len == cap) {
			if (cap >= MAPS_MAX_BYTES)
				break;
			nb = realloc(buf, cap * 2);
			if (!nb)
				break;
			buf = nb;
			cap *= 2;
		}
		n = read(fd, buf + len, cap - len);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	err = parse_maps(s, buf, len);
	free(buf);
	return err;
}

/*
 * PROCMAP_QUERY was refused once (a kernel before 6.11): the text from then
 * on. Racing threads may both learn it, which is harmless.
 */
static bool no_query;

/*
 * Its executable mappings, asked of the kernel one by one: it skips the
 * others (most of a process's) and prints none of their paths. The gate
 * area the text lists last ([vsyscall]) is not among them; its addresses
 * are the kernel's half, named from the kernel's symbols either way. 0;
 * -EAGAIN for "read the text" (no query here, or a path too long for it);
 * -ESRCH, -ENOMEM or -errno.
 */
static int query_maps(struct psnap *s, int fd)
{
	char path[PATH_MAX * 4 + 1];
	struct perfmap_vma v;
	uint64_t addr = 0;
	size_t cap = 0, plen;
	int err;

	if (__atomic_load_n(&no_query, __ATOMIC_RELAXED))
		return -EAGAIN;
	for (;;) {
		if (s->n >= PERFMAP_VMAS_MAX)
			return 0;  /* as the text read's bound: the rest unread */
		err = perfmap__vma_query(fd, addr, true, &v, path, sizeof(path), &plen);
		if (err == -ENOENT)
			return 0;
		if (err == -ENOTTY || err == -EINVAL) {
			__atomic_store_n(&no_query, true, __ATOMIC_RELAXED);
			return -EAGAIN;
		}
		if (err == -ENAMETOOLONG)
			return -EAGAIN;
		if (err)
			return err;
		err = vmas_push(s, &cap, &v, path, plen);
		if (err)
			return err;
		addr = v.hi;
	}
}

/*
 * Does a mapping of @s overlap @o? @i is where the last call left off: @o
 * comes in order, and so does the index.
 */
static bool overlapped(const struct psnap *s, size_t *i, const struct psnap_vma *o)
{
	while (*i < s->n && s->v[*i].hi <= o->lo)
		(*i)++;
	return *i < s->n && s->v[*i].lo < o->hi;
}

/*
 * @s's mappings just read, with those of the earlier read (@old, @nold) it
 * no longer has and that overlap none of its: unmapped since, they held
 * the code of the samples taken before. A runtime that tears its JIT's
 * code down before it exits (V8 does) would otherwise leave the last read
 * without the code all its samples ran in. Both lists are sorted and
 * disjoint, and so is the result. Past PERFMAP_VMAS_MAX, the earlier ones
 * are let go.
 */
static void keep_earlier(struct psnap *s, struct psnap_vma *old, size_t nold)
{
	struct psnap_vma *m = NULL;
	size_t i = 0, j, n = 0, kept = 0;

	/* Mostly nothing went: then no new list is made. */
	for (j = 0; j < nold; j++)
		kept += !overlapped(s, &i, &old[j]);
	if (kept && s->n + kept <= PERFMAP_VMAS_MAX)
		m = malloc((s->n + kept) * sizeof(*m));
	for (i = 0, j = 0; m && (i < s->n || j < nold);) {
		if (j == nold || (i < s->n && s->v[i].lo <= old[j].lo)) {
			m[n++] = s->v[i++];
			continue;
		}
		/* Unmapped since, and nothing there now: its samples' code. */
		if (!overlapped(s, &(size_t){ i ? i - 1 : 0 }, &old[j])) {
			m[n++] = old[j];
			old[j].path = NULL;
		}
		j++;
	}
	for (j = 0; j < nold; j++)
		free(old[j].path);
	free(old);
	if (!m)
		return;
	free(s->v);
	s->v = m;
	s->n = n;
}

/*
 * Its executable mappings now, kept with what earlier reads had that is
 * gone since; a read that fails (the process is gone, or a zombie, which
 * has no mappings) leaves what was read before as it was.
 */
static int read_maps(struct psnap *s, int dirfd)
{
	struct psnap_vma *old = s->v;
	size_t nold = s->n;
	int fd, err;

	fd = openat(dirfd, "maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	s->v = NULL;
	s->n = 0;
	err = query_maps(s, fd);
	if (err == -EAGAIN) {
		vmas_clear(s);
		err = text_maps(s, fd);
	}
	close(fd);
	if (!err && !s->n)
		err = -ESRCH;
	if (err) {
		vmas_clear(s);
		s->v = old;
		s->n = nold;
		return err;
	}
	keep_earlier(s, old, nold);
	return 0;
}

int perfmap_prof__psnap_read(struct psnap *s)
{
	struct creds_seen before, after;
	struct perfmap_proc_stat st;
	char path[32];
	int dirfd, err;

	/*
	 * Everything through its /proc directory: one path walk, and a
	 * directory opened while it lives names it alone. Once it is gone, and
	 * its pid taken by another, every read through it fails.
	 */
	snprintf(path, sizeof(path), "/proc/%d", (int)s->pid);
	dirfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	err = perfmap__proc_stat_read_at(dirfd, &st);
	if (err)
		goto close_dir;
	if (s->start_ticks && st.start_ticks != s->start_ticks) {
		err = -ESRCH;  /* another process holds the pid now */
		goto close_dir;
	}
	s->start_ticks = st.start_ticks;
	s->ppid = st.ppid;
	/*
	 * Its credentials before its mappings, and again after (read_identity()):
	 * an exec between the two (a setuid binary's) must not lend the new
	 * image's credentials to the old image's names.
	 */
	read_creds(s, dirfd);
	before = creds_seen(s);
	err = read_maps(s, dirfd);
	if (err)
		goto close_dir;
	s->read = true;
	/* Its own mappings now: the parent's are no longer its. */
	perfmap_prof__psnap_set_parent(s, NULL);
	read_identity(s, dirfd);
	after = creds_seen(s);
	if (!same_creds(&before, &after))
		s->creds_known = false;
close_dir:
	close(dirfd);
	return err;
}

void perfmap_prof__psnap_unread(struct psnap *s)
{
	vmas_clear(s);
	s->read = false;
}

const struct psnap_vma *perfmap_prof__psnap_find_vma(const struct psnap *s, uint64_t addr)
{
	size_t lo = 0, hi = s->n, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (addr < s->v[mid].lo)
			hi = mid;
		else if (addr >= s->v[mid].hi)
			lo = mid + 1;
		else
			return &s->v[mid];
	}
	return NULL;
}

/* Its references to dumps: the bytes of those it was the last to hold. */
static uint64_t dumps_put(struct psnap *s)
{
	uint64_t bytes = perfmap_prof__jdump_put(s->dump[0]) + perfmap_prof__jdump_put(s->dump[1]);

	s->dump[0] = s->dump[1] = NULL;
	return bytes;
}

static void psnap_free(struct psnap *s)
{
	vmas_clear(s);
	dumps_put(s);
	perfmap_prof__jitmap_free(s->jit);
	free(s->exe);
	free(s->cgroup);
	free(s->groups);
	free(s);
}

void perfmap_prof__psnap_set_parent(struct psnap *child, struct psnap *parent)
{
	if (child->parent)
		child->parent->unread_children--;
	child->parent = child == parent ? NULL : parent;
	if (child->parent)
		child->parent->unread_children++;
}

int perfmap_prof__psnaps_forget(struct psnaps *t, pid_t pid, uint64_t start_ticks, uint64_t *bytes)
{
	struct psnap **pp, *s;

	for (s = t->bucket[bucket_of(pid)]; s; s = s->next)
		if (s->pid == pid && s->start_ticks == start_ticks && s->unread_children)
			return -EBUSY;
	pp = &t->bucket[bucket_of(pid)];
	while ((s = *pp)) {
		if (s->pid != pid || s->start_ticks != start_ticks) {
			pp = &s->next;
			continue;
		}
		*pp = s->next;
		*bytes += s->jit ? perfmap_prof__jitmap_bytes(s->jit) : 0;
		*bytes += dumps_put(s);
		perfmap_prof__psnap_set_parent(s, NULL);
		psnap_free(s);
		t->count--;
	}
	return 0;
}

void perfmap_prof__psnaps_free(struct psnaps *t)
{
	struct psnap *s, *next;

	if (!t)
		return;
	for (size_t b = 0; b < sizeof(t->bucket) / sizeof(t->bucket[0]); b++) {
		for (s = t->bucket[b]; s; s = next) {
			next = s->next;
			psnap_free(s);
		}
		t->bucket[b] = NULL;
	}
	t->count = 0;
}

/*
 * A process's mappings from /proc/<pid>/maps, parsed without stdio: the
 * agent reads them on its fork-copy path, so a list of a thousand mappings
 * costs a few large read() calls and one pass over the bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

/* A path is at most PATH_MAX bytes, escaped by the kernel: a line fits in this many times over. */
#define READ_CHUNK (64u << 10)

/* Lower-case hex as the kernel prints it, 1 to 16 digits; advances *@p. */
static bool parse_hex(const char **p, const char *end, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	int d;

	for (; s < end && s - *p < 17; s++) {
		d = *s >= '0' && *s <= '9' ? *s - '0' : *s >= 'a' && *s <= 'f' ? *s - 'a' + 10 : -1;
		if (d < 0)
			break;
		v = v << 4 | (uint64_t)d;
	}
	if (s == *p || s - *p > 16)
		return false;
	*p = s;
	*out = v;
	return true;
}

/* Decimal, 1 to 20 digits, no overflow; advances *@p. */
static bool parse_dec(const char **p, const char *end, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;

	for (; s < end && *s >= '0' && *s <= '9'; s++) {
		if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	if (s == *p)
		return false;
	*p = s;
	*out = v;
	return true;
}

static bool expect(const char **p, const char *end, char c)
{
	if (*p >= end || **p != c)
		return false;
	(*p)++;
	return true;
}

/* "rwxp": the protection and whether the mapping is shared. */
static bool parse_perms(const char **p, const char *end, struct perfmap_vma *out)
{
	const char *s = *p;

	if (end - s < 4 || (s[0] != 'r' && s[0] != '-') || (s[1] != 'w' && s[1] != '-') ||
	    (s[2] != 'x' && s[2] != '-') || (s[3] != 's' && s[3] != 'p'))
		return false;
	out->prot = (s[0] == 'r' ? PROT_READ : 0) | (s[1] == 'w' ? PROT_WRITE : 0) |
		    (s[2] == 'x' ? PROT_EXEC : 0);
	out->shared = s[3] == 's';
	*p = s + 4;
	return true;
}

static bool has_prefix(const char *s, size_t len, const char *prefix)
{
	size_t n = strlen(prefix);

	return len >= n && !memcmp(s, prefix, n);
}

/* Which way perf resolves the mapping; see enum perfmap_vma_kind for whose rules. */
static enum perfmap_vma_kind classify(const char *path, size_t len)
{
	if (!len || has_prefix(path, len, "/dev/zero") || has_prefix(path, len, "/anon_hugepage") ||
	    has_prefix(path, len, "/SYSV") || has_prefix(path, len, "[stack") ||
	    (len == 6 && !memcmp(path, "[heap]", 6)) || has_prefix(path, len, "[anon:") ||
	    has_prefix(path, len, "[anon_shmem:"))
		return PERFMAP_VMA_ANON;
	if (has_prefix(path, len, "/memfd:"))
		return PERFMAP_VMA_MEMFD;
	if (path[0] == '[')
		return PERFMAP_VMA_SPECIAL;
	return PERFMAP_VMA_FILE;
}

int perfmap__vma_parse_path(const char *line, size_t len, struct perfmap_vma *out,
			    const char **path, size_t *path_len)
{
	const char *p = line, *end = line + len;
	struct perfmap_vma v = { 0 };
	uint64_t major, minor;

	if (len && end[-1] == '\n')
		end--;
	/* "lo-hi perms offset major:minor inode   path": single spaces, then padding. */
	if (!parse_hex(&p, end, &v.lo) || !expect(&p, end, '-') || !parse_hex(&p, end, &v.hi) ||
	    !expect(&p, end, ' ') || !parse_perms(&p, end, &v) || !expect(&p, end, ' ') ||
	    !parse_hex(&p, end, &v.pgoff) || !expect(&p, end, ' ') ||
	    !parse_hex(&p, end, &major) || !expect(&p, end, ':') || !parse_hex(&p, end, &minor) ||
	    !expect(&p, end, ' ') || !parse_dec(&p, end, &v.ino))
		return -EINVAL;
	if (v.lo >= v.hi || major > UINT32_MAX || minor > UINT32_MAX || (p < end && *p != ' '))
		return -EINVAL;
	while (p < end && *p == ' ')
		p++;
	v.dev_major = (uint32_t)major;
	v.dev_minor = (uint32_t)minor;
	v.kind = classify(p, (size_t)(end - p));
	*out = v;
	if (path) {
		*path = p;
		*path_len = (size_t)(end - p);
	}
	return 0;
}

int perfmap__vma_parse(const char *line, size_t len, struct perfmap_vma *out)
{
	return perfmap__vma_parse_path(line, len, out, NULL, NULL);
}

static int vmas_push(struct perfmap_vmas *vs, const struct perfmap_vma *v)
{
	struct perfmap_vma *nv;
	size_t cap;

	if (vs->n == vs->cap) {
		if (vs->cap >= PERFMAP_VMAS_MAX)
			return -E2BIG;
		cap = vs->cap ? vs->cap * 2 : 256;
		nv = realloc(vs->v, cap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		vs->v = nv;
		vs->cap = cap;
	}
	vs->v[vs->n++] = *v;
	return 0;
}

/*
 * The kernel lists mappings in address order, but a list read in several
 * read() calls (some 60 lines each) is several looks at a changing address
 * space: a mapping that grew down, or merged with the one listed last (an
 * mprotect() that made two neighbours alike), starts before the end of the
 * last one listed. Its part past that end is kept: dropping it would lose
 * live memory (and a fork copy the entries naming it); the list stays
 * sorted and disjoint, which the binary search needs.
 */
static int vmas_add(struct perfmap_vmas *vs, const struct perfmap_vma *v)
{
	struct perfmap_vma tail;
	uint64_t last;

	if (!vs->n || v->lo >= vs->v[vs->n - 1].hi)
		return vmas_push(vs, v);
	last = vs->v[vs->n - 1].hi;
	if (v->hi <= last)
		return 0;
	tail = *v;
	tail.pgoff += last - v->lo;
	tail.lo = last;
	return vmas_push(vs, &tail);
}

/* A jitdump producer maps its dump executable: perf's marker, kept for who reads dumps. */
static void note_marker(struct perfmap_vmas *vs, const struct perfmap_vma *v, const char *path,
			size_t len)
{
	const char *base = path + len;

	if (vs->marker[0] || v->kind != PERFMAP_VMA_FILE || !(v->prot & PROT_EXEC) ||
	    len >= sizeof(vs->marker) || len < 10 || memcmp(path + len - 5, ".dump", 5))
		return;
	while (base > path && base[-1] != '/')
		base--;
	if (path + len - base < 10 || memcmp(base, "jit-", 4))
		return;
	memcpy(vs->marker, path, len);
	vs->marker[len] = '\0';
	vs->marker_ino = v->ino;
}

long perfmap__vmas_parse_buf(struct perfmap_vmas *vs, const char *buf, size_t len)
{
	const char *p = buf, *end = buf + len, *nl, *path;
	struct perfmap_vma v;
	size_t path_len;
	int err;

	for (; p < end && (nl = memchr(p, '\n', (size_t)(end - p))); p = nl + 1) {
		err = perfmap__vma_parse_path(p, (size_t)(nl - p), &v, &path, &path_len);
		if (!err) {
			note_marker(vs, &v, path, path_len);
			err = vmas_add(vs, &v);
		}
		if (err)
			return err;
	}
	return (long)(p - buf);
}

int perfmap__vmas_read_fd(int fd, struct perfmap_vmas *out)
{
	return perfmap__vmas_read_fd_max(fd, SIZE_MAX, out);
}

int perfmap__vmas_read_fd_max(int fd, size_t max_bytes, struct perfmap_vmas *out)
{
	size_t have = 0, total = 0;
	ssize_t n;
	long used;
	char *buf;
	int err = 0;

	out->n = 0;
	buf = malloc(READ_CHUNK);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		n = read(fd, buf + have, READ_CHUNK - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = -errno;
			break;
		}
		if (!n) {
			/* The kernel ends every line: a rest is no line. */
			err = have ? -EINVAL : 0;
			break;
		}
		have += (size_t)n;
		total += (size_t)n;
		if (total > max_bytes) {
			err = -E2BIG;
			break;
		}
		used = perfmap__vmas_parse_buf(out, buf, have);
		if (used < 0) {
			err = (int)used;
			break;
		}
		if (!used && have == READ_CHUNK) {
			err = -EINVAL;  /* a line longer than any the kernel writes */
			break;
		}
		memmove(buf, buf + used, have - (size_t)used);
		have -= (size_t)used;
	}
	free(buf);
	return err;
}

int perfmap__vmas_read(pid_t pid, struct perfmap_vmas *out)
{
	return perfmap__vmas_read_max(pid, SIZE_MAX, out);
}

int perfmap__vmas_read_max(pid_t pid, size_t max_bytes, struct perfmap_vmas *out)
{
	char path[64];
	int fd, err;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	err = perfmap__vmas_read_fd_max(fd, max_bytes, out);
	close(fd);
	return err;
}

const struct perfmap_vma *perfmap__vmas_find(const struct perfmap_vmas *vs, uint64_t addr)
{
	size_t lo = 0, hi = vs->n, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (addr < vs->v[mid].lo)
			hi = mid;
		else if (addr >= vs->v[mid].hi)
			lo = mid + 1;
		else
			return &vs->v[mid];
	}
	return NULL;
}

void perfmap__vmas_release(struct perfmap_vmas *vs)
{
	if (!vs)
		return;
	free(vs->v);
	vs->v = NULL;
	vs->n = vs->cap = 0;
	vs->marker[0] = '\0';
	vs->marker_ino = 0;
}

/*
 * PROCMAP_QUERY (Linux 6.11, include/uapi/linux/fs.h), declared here for
 * older headers: one mapping a call, filtered by the kernel, so a reader
 * that wants the executable mappings alone is not handed the text of all
 * of them (for a compiler, four in five).
 */
#ifndef PROCMAP_QUERY
struct procmap_query {
	uint64_t size;
	uint64_t query_flags;
	uint64_t query_addr;
	uint64_t vma_start;
	uint64_t vma_end;
	uint64_t vma_flags;
	uint64_t vma_page_size;
	uint64_t vma_offset;
	uint64_t inode;
	uint32_t dev_major;
	uint32_t dev_minor;
	uint32_t vma_name_size;
	uint32_t build_id_size;
	uint64_t vma_name_addr;
	uint64_t build_id_addr;
};
#define PROCMAP_QUERY _IOWR('f', 17, struct procmap_query)
#define PROCMAP_QUERY_VMA_READABLE 0x01
#define PROCMAP_QUERY_VMA_WRITABLE 0x02
#define PROCMAP_QUERY_VMA_EXECUTABLE 0x04
#define PROCMAP_QUERY_VMA_SHARED 0x08
#define PROCMAP_QUERY_COVERING_OR_NEXT_VMA 0x10
#endif

/* @in escaped as /proc/<pid>/maps shows a path (a newline as "\012") into @out: its length, or -1. */
static long mangle_newlines(const char *in, size_t len, char *out, size_t cap)
{
	size_t o = 0;

	for (size_t i = 0; i < len; i++) {
		if (o + (in[i] == '\n' ? 4 : 1) >= cap)
			return -1;
		if (in[i] == '\n') {
			memcpy(out + o, "\\012", 4);
			o += 4;
		} else {
			out[o++] = in[i];
		}
	}
	out[o] = '\0';
	return (long)o;
}

int perfmap__vma_query(int fd, uint64_t addr, bool exec_only, struct perfmap_vma *out,
		       char *path, size_t path_cap, size_t *path_len)
{
	char name[PATH_MAX + 1];
	struct procmap_query q = {
		.size = sizeof(q),
		.query_flags = PROCMAP_QUERY_COVERING_OR_NEXT_VMA |
			       (exec_only ? PROCMAP_QUERY_VMA_EXECUTABLE : 0),
		.query_addr = addr,
		.vma_name_size = sizeof(name),
		.vma_name_addr = (uint64_t)(uintptr_t)name,
	};
	long n;

	if (ioctl(fd, PROCMAP_QUERY, &q))
		return -errno;
	/* The size counts the NUL; 0 for a mapping with no name. */
	n = q.vma_name_size ? mangle_newlines(name, q.vma_name_size - 1, path, path_cap)
			    : mangle_newlines("", 0, path, path_cap);
	if (n < 0)
		return -ENAMETOOLONG;
	*path_len = (size_t)n;
	*out = (struct perfmap_vma){
		.lo = q.vma_start, .hi = q.vma_end, .pgoff = q.vma_offset, .ino = q.inode,
		.dev_major = q.dev_major, .dev_minor = q.dev_minor,
		.prot = (q.vma_flags & PROCMAP_QUERY_VMA_READABLE ? PROT_READ : 0) |
			(q.vma_flags & PROCMAP_QUERY_VMA_WRITABLE ? PROT_WRITE : 0) |
			(q.vma_flags & PROCMAP_QUERY_VMA_EXECUTABLE ? PROT_EXEC : 0),
		.shared = q.vma_flags & PROCMAP_QUERY_VMA_SHARED,
		.kind = classify(path, (size_t)n),
	};
	return out->lo < out->hi ? 0 : -EINVAL;
}

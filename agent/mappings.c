/*
 * Do a map's newest entries lie in the process's mappings? A runtime names
 * code it has just mapped. After an exec the address space is a new one, and
 * a new process's is its parent's: entries that lie in none of the process's
 * mappings (anonymous, file-backed, or reserved without access, all count)
 * cannot be its own, while its own newest ones always do. The newest entries
 * are at the end of the file: a runtime that appends to an earlier file adds
 * its lines after the earlier writer's, one that truncates leaves only its own.
 * Both kinds in the tail is a file two writers shared, or a runtime that
 * freed code it had named: which, the entries cannot tell.
 * With address-space randomization off, an old image's addresses can meet the
 * new one's mappings by chance: that only ever keeps a map, never moves one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mappings.h"
#include "perfmap_tools.h"
#include "procfs.h"

#define MAX_RANGES (1u << 16)

/* Up to 16 hex digits at *@p, advanced past them; false without one or past 64 bits. */
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

int mappings_parse_line(const char *line, size_t len, uint64_t *lo, uint64_t *hi)
{
	const char *p = line, *end = line + len;

	/* "lo-hi perms offset dev inode path", lower-case hex as the kernel prints it. */
	if (!parse_hex(&p, end, lo) || p == end || *p++ != '-' || !parse_hex(&p, end, hi))
		return -EINVAL;
	if (p < end && *p != ' ' && *p != '\n')
		return -EINVAL;
	return *lo < *hi ? 0 : -EINVAL;
}

int ranges__add(struct ranges *rs, uint64_t lo, uint64_t hi)
{
	void *nr;

	/* The search needs the kernel's order: anything else is not a list to judge by. */
	if (lo >= hi || (rs->n && lo < rs->r[rs->n - 1][1]))
		return -EINVAL;
	if (rs->n == rs->cap) {
		if (rs->cap >= MAX_RANGES)
			return -E2BIG;
		nr = realloc(rs->r, (rs->cap ? rs->cap * 2 : 256) * sizeof(*rs->r));
		if (!nr)
			return -ENOMEM;
		rs->r = nr;
		rs->cap = rs->cap ? rs->cap * 2 : 256;
	}
	rs->r[rs->n][0] = lo;
	rs->r[rs->n][1] = hi;
	rs->n++;
	return 0;
}

void ranges__release(struct ranges *rs)
{
	if (!rs)
		return;
	free(rs->r);
	rs->r = NULL;
	rs->n = rs->cap = 0;
}

/*
 * /proc/<pid>/maps, as the kernel lists it; -E2BIG past MAX_RANGES, -EINVAL
 * for a line out of order or not a mapping: the verdict is then unknown.
 */
static int read_ranges(pid_t pid, struct ranges *rs)
{
	char path[64], line[512];
	uint64_t lo, hi;
	FILE *f;
	int err = 0;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (!err && fgets(line, sizeof(line), f)) {
		err = mappings_parse_line(line, strlen(line), &lo, &hi);
		if (!err)
			err = ranges__add(rs, lo, hi);
		/* A line longer than the buffer: skip its rest. */
		while (!strchr(line, '\n') && fgets(line, sizeof(line), f))
			;
	}
	fclose(f);
	return err;
}

bool ranges__has(const struct ranges *rs, uint64_t addr)
{
	size_t lo = 0, hi = rs->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (addr < rs->r[mid][0])
			hi = mid;
		else if (addr >= rs->r[mid][1])
			lo = mid + 1;
		else
			return true;
	}
	return false;
}

size_t mappings_tail_starts(const char *buf, size_t n, bool mid_file, uint64_t *starts, size_t cap)
{
	const char *p = buf, *end = buf + n, *nl;
	struct perfmap_record rec;
	size_t count = 0;

	/* Mid-file, the first line is a part of one. */
	if (mid_file && (p = memchr(p, '\n', n)))
		p++;
	for (; p && count < cap && (nl = memchr(p, '\n', end - p)); p = nl + 1)
		if (perfmap_parse_line(p, nl - p, 0, &rec) == PERFMAP_REJECT_NONE)
			starts[count++] = rec.start;
	return count;
}

/* The starts of the complete lines in the last MAPPINGS_TAIL_BYTES of @fd: -errno or their count. */
static ssize_t read_tail(int fd, uint64_t size, uint64_t **out)
{
	uint64_t off = size > MAPPINGS_TAIL_BYTES ? size - MAPPINGS_TAIL_BYTES : 0, *v;
	ssize_t n, count;
	char *buf;

	buf = malloc(MAPPINGS_TAIL_BYTES);
	v = malloc(MAPPINGS_TAIL_STARTS * sizeof(*v));
	if (!buf || !v) {
		count = -ENOMEM;
		goto free_all;
	}
	n = pread(fd, buf, size - off, (off_t)off);
	if (n < 0) {
		count = -errno;
		goto free_all;
	}
	count = (ssize_t)mappings_tail_starts(buf, (size_t)n, off != 0, v, MAPPINGS_TAIL_STARTS);
	*out = v;
	v = NULL;
free_all:
	free(v);
	free(buf);
	return count;
}

enum map_entries mappings_check(int dirfd, const char *name, pid_t pid, uint64_t start_ticks,
				const struct map_info *mi)
{
	PERFMAP_OPTS(perfmap_open_opts, oopts);
	enum map_entries verdict = ENTRIES_UNKNOWN;
	struct ranges rs = { 0 };
	uint64_t *starts = NULL;
	ssize_t n = -1, i, mapped = 0;
	struct stat st;
	int fd;

	/*
	 * The entries first, then the mappings: an entry a runtime writes names
	 * code it mapped before, so its mapping is in a later read of the list.
	 */
	fd = perfmap__open_map_at(dirfd, name, O_RDONLY, &oopts, &st);
	if (fd < 0)
		return ENTRIES_UNKNOWN;
	if (st.st_dev == mi->dev && st.st_ino == mi->ino)
		n = read_tail(fd, (uint64_t)st.st_size, &starts);
	close(fd);
	if (n < 0)
		return ENTRIES_UNKNOWN;
	if (!n) {
		free(starts);
		return ENTRIES_NONE;
	}
	/*
	 * The mappings must be this process's, not a later holder's of the pid,
	 * and whole: an exiting process lets its memory go, maybe while the list
	 * is read, which then ends early. Not exiting after the read, it was whole.
	 */
	if (!procfs_is(pid, start_ticks) || read_ranges(pid, &rs) || !rs.n ||
	    !procfs_is(pid, start_ticks))
		goto free_all;
	for (i = 0; i < n; i++)
		mapped += ranges__has(&rs, starts[i]);
	verdict = !mapped ? ENTRIES_UNMAPPED : mapped < n ? ENTRIES_MIXED : ENTRIES_MAPPED;
free_all:
	free(starts);
	ranges__release(&rs);
	return verdict;
}

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

struct ranges {
	uint64_t (*r)[2];
	size_t n, cap;
};

/* /proc/<pid>/maps, sorted as the kernel lists it; -E2BIG past MAX_RANGES. */
static int read_ranges(pid_t pid, struct ranges *rs)
{
	char path[64], line[512];
	unsigned long long lo, hi;
	FILE *f;
	void *nr;
	int err = 0;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx-%llx", &lo, &hi) != 2)
			continue;
		if (rs->n == rs->cap) {
			if (rs->cap >= MAX_RANGES) {
				err = -E2BIG;
				break;
			}
			rs->cap = rs->cap ? rs->cap * 2 : 256;
			nr = realloc(rs->r, rs->cap * sizeof(*rs->r));
			if (!nr) {
				err = -ENOMEM;
				break;
			}
			rs->r = nr;
		}
		rs->r[rs->n][0] = lo;
		rs->r[rs->n][1] = hi;
		rs->n++;
		/* A line longer than the buffer: skip its rest. */
		while (!strchr(line, '\n') && fgets(line, sizeof(line), f))
			;
	}
	fclose(f);
	return err;
}

static bool in_ranges(const struct ranges *rs, uint64_t addr)
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

/* The starts of the complete lines in the last MAPPINGS_TAIL_BYTES of @fd: -errno or their count. */
static ssize_t read_tail(int fd, uint64_t size, uint64_t **out)
{
	uint64_t off = size > MAPPINGS_TAIL_BYTES ? size - MAPPINGS_TAIL_BYTES : 0, *v;
	struct perfmap_record rec;
	char *buf, *p, *end, *nl;
	ssize_t n, count = 0;

	buf = malloc(MAPPINGS_TAIL_BYTES);
	/* A line is at least "1 1 abc\n": no more starts than that. */
	v = malloc(MAPPINGS_TAIL_BYTES / 8 * sizeof(*v));
	if (!buf || !v) {
		count = -ENOMEM;
		goto free_all;
	}
	n = pread(fd, buf, size - off, (off_t)off);
	if (n < 0) {
		count = -errno;
		goto free_all;
	}
	p = buf;
	end = buf + n;
	/* Mid-file, the first line is a part of one. */
	if (off && (p = memchr(p, '\n', end - p)))
		p++;
	for (; p && (nl = memchr(p, '\n', end - p)); p = nl + 1)
		if (perfmap_parse_line(p, nl - p, 0, &rec) == PERFMAP_REJECT_NONE &&
		    count < (ssize_t)(MAPPINGS_TAIL_BYTES / 8))
			v[count++] = rec.start;
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
		mapped += in_ranges(&rs, starts[i]);
	verdict = !mapped ? ENTRIES_UNMAPPED : mapped < n ? ENTRIES_MIXED : ENTRIES_MAPPED;
free_all:
	free(starts);
	free(rs.r);
	return verdict;
}

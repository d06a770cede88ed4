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

#include "in/mappings.h"
#include "perfmap_tools.h"
#include "lib/procfs.h"

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
	struct perfmap_vmas vs = { 0 };
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
	if (!procfs_is(pid, start_ticks) || perfmap__vmas_read(pid, &vs) || !vs.n ||
	    !procfs_is(pid, start_ticks))
		goto free_all;
	for (i = 0; i < n; i++)
		mapped += perfmap__vmas_find(&vs, starts[i]) != NULL;
	verdict = !mapped ? ENTRIES_UNMAPPED : mapped < n ? ENTRIES_MIXED : ENTRIES_MAPPED;
free_all:
	free(starts);
	perfmap__vmas_release(&vs);
	return verdict;
}

/* Whether a map's newest entries name memory a process has mapped: evidence of who wrote them. */
#ifndef PERFMAPD_MAPPINGS_H
#define PERFMAPD_MAPPINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "policy.h"

/* Bytes read from the end of a map: the newest entries, written last. */
#define MAPPINGS_TAIL_BYTES (64u << 10)
/* A line is at least "1 1 abc\n": no more entry starts than this in the tail. */
#define MAPPINGS_TAIL_STARTS (MAPPINGS_TAIL_BYTES / 8)

/* A process's mappings, sorted and disjoint as /proc/<pid>/maps lists them. */
struct ranges {
	uint64_t (*r)[2];
	size_t n, cap;
};

/*
 * The parsers, without system calls (the fuzzers drive them). One line of
 * /proc/<pid>/maps (@len bytes, not NUL-terminated): its range [@lo, @hi),
 * 0, or -EINVAL for a line that is not a mapping or an empty range.
 */
int mappings_parse_line(const char *line, size_t len, uint64_t *lo, uint64_t *hi);
/* Appends [@lo, @hi): -EINVAL when it is empty or not after the last one, -E2BIG past the bound. */
int ranges__add(struct ranges *rs, uint64_t lo, uint64_t hi);
bool ranges__has(const struct ranges *rs, uint64_t addr);
void ranges__release(struct ranges *rs);
/*
 * The starts of the map's well-formed complete lines in @buf (@n bytes read
 * from a map; @mid_file: its first line is a part of one), at most @cap.
 */
size_t mappings_tail_starts(const char *buf, size_t n, bool mid_file, uint64_t *starts, size_t cap);

/*
 * The entries of the map @name in @dirfd (which must still be the inode
 * @mi) against the mappings of the process (@pid, @start_ticks).
 */
enum map_entries mappings_check(int dirfd, const char *name, pid_t pid, uint64_t start_ticks,
				const struct map_info *mi);

#endif /* PERFMAPD_MAPPINGS_H */

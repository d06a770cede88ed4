/* Whether a map's newest entries name memory a process has mapped: evidence of who wrote them. */
#ifndef PERFMAPD_MAPPINGS_H
#define PERFMAPD_MAPPINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "policy/mapstore.h"

/* Bytes read from the end of a map: the newest entries, written last. */
#define MAPPINGS_TAIL_BYTES (64u << 10)
/* A line is at least "1 1 abc\n": no more entry starts than this in the tail. */
#define MAPPINGS_TAIL_STARTS (MAPPINGS_TAIL_BYTES / 8)

/*
 * The starts of the map's well-formed complete lines in @buf (@n bytes read
 * from a map; @mid_file: its first line is a part of one), at most @cap.
 * No system calls: the fuzzer drives it.
 */
size_t mappings_tail_starts(const char *buf, size_t n, bool mid_file, uint64_t *starts, size_t cap);

/*
 * The entries of the map @name in @dirfd (which must still be the inode
 * @mi) against the mappings of the process (@pid, @start_ticks).
 */
enum map_entries mappings_check(int dirfd, const char *name, pid_t pid, uint64_t start_ticks,
				const struct map_info *mi);

#endif /* PERFMAPD_MAPPINGS_H */

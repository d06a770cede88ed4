/* Whether a map's newest entries name memory a process has mapped: evidence of who wrote them. */
#ifndef PERFMAPD_MAPPINGS_H
#define PERFMAPD_MAPPINGS_H

#include <stdint.h>
#include <sys/types.h>

#include "policy.h"

/* Bytes read from the end of a map: the newest entries, written last. */
#define MAPPINGS_TAIL_BYTES (64u << 10)

/*
 * The entries of the map @name in @dirfd (which must still be the inode
 * @mi) against the mappings of the process (@pid, @start_ticks).
 */
enum map_entries mappings_check(int dirfd, const char *name, pid_t pid, uint64_t start_ticks,
				const struct map_info *mi);

#endif /* PERFMAPD_MAPPINGS_H */

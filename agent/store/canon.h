/* An exited process's map made canonical in place, during its retention (canon.c). */
#ifndef PERFMAPD_CANON_H
#define PERFMAPD_CANON_H

#include <stdint.h>
#include <sys/types.h>

#include "policy/mapstore.h"

/*
 * Maps larger than this are left as they are (archived compacted, later):
 * the rewrite runs in the event loop, a few milliseconds at most.
 */
#define CANON_MAX_BYTES (256u << 10)

/*
 * The map at @pid's path in @dirfd (@map_dir), which must still be @expect,
 * rewritten in canonical form when some consumer would misread it: 0 (a new
 * inode at the path), -EALREADY (every consumer reads it right: left), -EBUSY
 * (a process holds it open for writing, or opened it meanwhile: left), -ESTALE
 * (another file by now), -EFBIG (over @max_bytes), or -errno.
 */
int store_canonicalize(int dirfd, const char *map_dir, pid_t pid, uint64_t max_bytes,
		       const struct map_info *expect);

#endif /* PERFMAPD_CANON_H */

/* Where perfmapd writes maps: a forked child's copy of its parent's map. */
#ifndef PERFMAPD_MAPFILE_H
#define PERFMAPD_MAPFILE_H

#include <stdint.h>

#include "policy.h"

/*
 * A new map at the child's path in @dirfd with the parent's entries as
 * they stand now (whole lines, at most @max_bytes of them): -EEXIST when
 * anything is at the name, -EAGAIN when the parent's map is not
 * @rq->parent_map any more.
 */
int mapfile_create(int dirfd, const struct copy_req *rq, uint64_t max_bytes,
		   struct copy_result *res);
/*
 * The parent's entries appended to the child's own map in whole lines, or
 * nothing when it already starts with them; -EAGAIN while it ends in a
 * partial line.
 */
int mapfile_append(int dirfd, const struct copy_req *rq, uint64_t max_bytes,
		   struct copy_result *res);

#endif /* PERFMAPD_MAPFILE_H */

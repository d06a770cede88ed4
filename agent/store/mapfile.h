/* Where perfmapd writes maps: a forked child's copy of its parent's map. */
#ifndef PERFMAPD_MAPFILE_H
#define PERFMAPD_MAPFILE_H

#include <stdint.h>

#include "policy/mapstore.h"

/*
 * For a copy made off the event loop (copier.c): enter() is called just
 * before the copy can show at the child's path (0 goes on, else that error
 * stops it, nothing shown), leave() once it shows or failed to; stopped(),
 * between chunks of a large copy, ends one nobody waits for any more.
 */
struct copy_gate {
	int (*enter)(void *arg);
	void (*leave)(void *arg, int err, const struct copy_result *res);
	bool (*stopped)(void *arg);
	void *arg;
};

/*
 * The parent's map opened, hardened, for a copy made later: the file the
 * policy judged, whatever becomes of its path (an exec archives it) by
 * then. A negative errno, with @res->why, when it cannot be.
 */
int mapfile_open_parent(int dirfd, const struct copy_req *rq, uint64_t max_bytes,
			struct copy_result *res);
/*
 * A new map at the child's path in @dirfd with the parent's entries as
 * they stand now (whole lines, at most @max_bytes of them, at most
 * @rq->max_data bytes of data): -EEXIST when anything is at the name,
 * -EAGAIN when the parent's map is not @rq->parent_map any more, -EFBIG
 * when it holds more data than allowed. The parent's map is @parent_fd
 * (the caller's; -1: opened here). @gate may be NULL.
 */
int mapfile_create(int dirfd, int parent_fd, const struct copy_req *rq, uint64_t max_bytes,
		   const struct copy_gate *gate, struct copy_result *res);
/*
 * The parent's entries appended to the child's own map in whole lines, or
 * nothing when it already starts with them; -EAGAIN while it ends in a
 * partial line.
 */
int mapfile_append(int dirfd, int parent_fd, const struct copy_req *rq, uint64_t max_bytes,
		   const struct copy_gate *gate, struct copy_result *res);

/* Link an open O_TMPFILE at @name in @dirfd: 0, -EEXIST when anything is there, or -errno. */
int mapfile_link_tmpfile(int dirfd, int fd, const char *name);

#endif /* PERFMAPD_MAPFILE_H */

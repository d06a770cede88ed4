/* Replacing or moving a map: temporary file, rename(), and never under a live writer. */
#ifndef PERFMAPD_REPLACE_H
#define PERFMAPD_REPLACE_H

#include <stdbool.h>

#include "writers.h"

/* Write the new contents of the file open as @src_fd to @out_fd; 0 or -errno. */
typedef int (*replace_fill_fn)(int src_fd, int out_fd, void *ctx);

struct replace_result {
	struct writers writers;  /* who holds the file open for writing */
	bool guarded;            /* a read lease kept writers out throughout */
	const char *why;         /* what went wrong, in words, when not 0 */
	char kept[4096];         /* where the original was left, if not at its path */
};

/*
 * Replace @path, open read-only as @src_fd, with what @fill writes, through
 * a temporary file in the same directory and rename(). A process holding the
 * file open for writing would go on appending to the old inode, so refuse
 * with -EBUSY when one does, or when one opens it before the swap is done.
 * Blocks SIGIO while it runs and consumes the SIGIO a lease break raises:
 * not for programs that use SIGIO themselves.
 */
int map_replace(const char *path, int src_fd, replace_fill_fn fill, void *ctx,
		struct replace_result *res);

/* Write what @fill makes to @path, atomically (temporary file and rename()). */
int file_write_atomic(const char *path, int src_fd, replace_fill_fn fill,
		      void *ctx, struct replace_result *res);

/*
 * Rename @name in @dirfd, open read-only as @fd, to @dest in the same
 * directory, unless a process has it open for writing (-EBUSY) or @name is
 * another file by now (-ESTALE). Never replaces an existing @dest.
 */
int map_move_aside(int dirfd, const char *name, int fd, const char *dest,
		   struct replace_result *res);

#endif /* PERFMAPD_REPLACE_H */

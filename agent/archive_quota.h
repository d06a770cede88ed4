/*
 * The archive's quota, fair between users: over --archive-max-bytes, the
 * user whose maps take the most room loses its oldest first. Age is the
 * time the agent archived a map (the archived file's mtime, which only the
 * agent sets: the directory is root's alone), never a time a user chose;
 * the user is the archived file's owner, the map's uid.
 */
#ifndef PERFMAPD_ARCHIVE_QUOTA_H
#define PERFMAPD_ARCHIVE_QUOTA_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

struct archived_file {
	char name[256];
	uint64_t size;
	struct timespec at;   /* when the agent archived it */
	uid_t uid;            /* whose map it was */
};

/*
 * The order in which to delete @v's files to bring their total under @max:
 * each time, the oldest file of the uid holding the most bytes (ties: the
 * oldest file). Fills @out with indices into @v; returns how many.
 * Reorders @v.
 */
size_t quota__plan(struct archived_file *v, size_t n, uint64_t max, size_t *out);

struct quota_result {
	uint64_t files, bytes;  /* what stays */
	uint64_t evicted;
};

/* Count the archive in @dfd; with @max not 0, evict by quota__plan() down to @max. */
int quota__apply(int dfd, const char *dir, uint64_t max, struct quota_result *res);

#endif /* PERFMAPD_ARCHIVE_QUOTA_H */

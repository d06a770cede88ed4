/*
 * One archived map: the staged map's contents, compacted in bounded memory
 * (or as they were, when too many to compact), written under a name that
 * replaces nothing, owned by the map's uid, dated by the agent's clock;
 * and the directory they are in.
 */
#ifndef PERFMAPD_ARCHIVE_FILE_H
#define PERFMAPD_ARCHIVE_FILE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

/* A file the agent was writing when it stopped: removed at the next start. */
#define ARCHIVE_TMP_PREFIX ".tmp."

struct archive_file_req {
	const char *dir;           /* the archive directory */
	int dir_fd;                /* open */
	const char *name;          /* wanted name; another if taken */
	int src_fd;                /* the staged map */
	uint64_t src_size;
	uid_t uid;                 /* the map's owner: its share of the quota */
	gid_t gid;
	uint64_t max_map_bytes;    /* at most this much is read */
	uint64_t max_table_bytes;  /* above, stored uncompacted */
};

struct archive_file_res {
	char name[128];            /* the name it got */
	unsigned long entries, lines;
	const char *uncompacted;   /* why it was stored as it was, or NULL */
	uint64_t cost;             /* what it takes on disk: max(size, blocks) */
	struct timespec at;        /* its mtime: when the agent wrote it */
	const char *why;           /* what failed, in words */
};

int archive_file__write(const struct archive_file_req *rq, struct archive_file_res *res);

/* Create or check @dir: ours (the effective uid's), open to no one else (077 clear); 0 or -errno. */
int archive_dir__make(const char *dir);
/* Remove what archive_file__write() left half-written when the agent stopped. */
void archive_dir__remove_temporaries(int dir_fd);

#endif /* PERFMAPD_ARCHIVE_FILE_H */

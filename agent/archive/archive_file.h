/*
 * One archived map: the staged map's contents, compacted in bounded memory
 * (or as they were, when too many to compact), written under a name that
 * replaces nothing, owned by the map's uid, dated by the agent's clock;
 * or one archived jitdump beside its map, its bytes as they were; and the
 * directory they are in.
 */
#ifndef PERFMAPD_ARCHIVE_FILE_H
#define PERFMAPD_ARCHIVE_FILE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

/* A file the agent was writing when it stopped: removed at the next start. */
#define ARCHIVE_TMP_PREFIX ".tmp."
/*
 * Set on an archived map before it is linked: the staged map's name it was
 * made from (random, never used twice). An agent killed after the link and
 * before the staged map's removal leaves both; the next start finds the
 * mark and removes the staged map rather than archiving it a second time.
 */
#define ARCHIVE_STAGED_XATTR "user.perfmapd.staged"

struct archive_file_req {
	const char *dir;           /* the archive directory */
	int dir_fd;                /* open */
	const char *name;          /* wanted name; another if taken */
	const char *staged;        /* the staged map's name: ARCHIVE_STAGED_XATTR's value */
	int src_fd;                /* the staged map */
	uint64_t src_size;
	uid_t uid;                 /* the map's owner: its share of the quota */
	gid_t gid;
	uint64_t max_map_bytes;    /* at most this much is read */
	uint64_t max_table_bytes;  /* above, stored uncompacted */
	bool verbatim;             /* a jitdump: binary, its bytes copied as they are */
};

struct archive_file_res {
	char name[128];            /* the name it got */
	unsigned long entries, lines;
	const char *uncompacted;   /* why it was stored as it was, or NULL */
	uint64_t cost;             /* what it takes on disk: max(size, blocks) */
	struct timespec at;        /* its mtime: when the agent wrote it */
	bool truncated;            /* verbatim: past max_map_bytes, its first max_map_bytes kept */
	const char *why;           /* what failed, in words */
	bool linked;               /* at its name in the archive, even where an error followed */
};

/*
 * Write the archived map, durable (its data, then its name) before the
 * return: the caller removes the staged map next, and a power cut must not
 * keep that removal and lose what was written.
 */
int archive_file__write(const struct archive_file_req *rq, struct archive_file_res *res);
/*
 * Is the staged map @staged archived already, as @name or one of the names
 * archive_file__write() takes when it is taken? 0 with the name in @found,
 * -ENOENT when none carries its mark (or the file system keeps no marks).
 */
int archive_file__find(int dir_fd, const char *name, const char *staged, char *found, size_t len);

/* Is @name an archived jitdump's, "jit-<rest>.dump"? */
bool archive_file__is_dump(const char *name);

/* Create or check @dir: ours (the effective uid's), open to no one else (077 clear); 0 or -errno. */
int archive_dir__make(const char *dir);
/* Remove what archive_file__write() left half-written when the agent stopped. */
void archive_dir__remove_temporaries(int dir_fd);

#endif /* PERFMAPD_ARCHIVE_FILE_H */

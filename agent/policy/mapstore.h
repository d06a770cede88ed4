/*
 * The map store's interface: what the policy sees of a map at a pid's path
 * (map_info), what it asks made (copy_req, archive), and the operations
 * through which it sees and acts (mapstore_ops). store.c is the real store,
 * tests/unit/test_policy.c a fake; copier.c and mapfile.c make its copies.
 */
#ifndef PERFMAPD_MAPSTORE_H
#define PERFMAPD_MAPSTORE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/clock.h"

/* The map at a pid's path, as the store sees it now. */
struct map_info {
	dev_t dev;
	ino_t ino;
	uint64_t size;
	/* Bytes on disk (st_blocks): less than @size in a sparse file; 0 when not known. */
	uint64_t disk_bytes;
	uid_t uid;
	/*
	 * 0, or what the hardened open would refuse the file with: -ELOOP (a
	 * symlink), -EINVAL (not a regular file), -EMLINK (hard-linked).
	 */
	int refused;
	/* When this inode appeared at the path, per the inotify index; SPAN_UNKNOWN if it cannot say. */
	struct span born;
	/* When it was seen so: the file's size was read before this (CLOCK_BOOTTIME). */
	uint64_t seen_ns;
};

/* Do a map's newest entries name memory the process has mapped? */
enum map_entries {
	ENTRIES_UNKNOWN,    /* the process is gone, or the file or /proc could not be read */
	ENTRIES_NONE,       /* no complete entry */
	ENTRIES_MAPPED,     /* every one lies in the process's mappings */
	ENTRIES_MIXED,      /* some do, some do not: another writer's lines among its own? */
	ENTRIES_UNMAPPED,   /* entries, and none lies in its mappings */
};

struct copy_req {
	pid_t parent, child;
	uint64_t child_start_ticks;   /* the copy is not linked in once another process holds the pid */
	uint64_t child_start_ns;   /* CLOCK_BOOTTIME: an exec after it stops a copy off the loop */
	uid_t uid;                 /* the child's: the copy is its file */
	gid_t gid;
	const struct map_info *parent_map;
	uint64_t max_data;         /* bytes of the parent's data at most (-EFBIG); 0: no bound */
};

enum copy_op {
	COPY_OP_CREATE,            /* copy_create(), then copy_append() on -EEXIST */
	COPY_OP_APPEND,
};

enum copy_kind {
	COPY_CREATED,              /* a new map holding the parent's entries */
	COPY_APPENDED,             /* the child's own map took the parent's entries */
	COPY_BY_RUNTIME,           /* the child's map already starts with the parent's entries */
};

struct copy_result {
	enum copy_kind kind;
	long entries;
	struct map_info map;       /* the child's map as the copy left it */
	uint64_t took_ns;
	uint64_t bytes;            /* written by the copy */
	const char *why;           /* words for an error */
	bool refused;              /* @why is the hardened open's refusal, whole */
	/* What was refused, so that a trap is said once wherever the agent meets it (log_first_time()). */
	uint64_t trap_dev, trap_ino;
	char trap_name[32];
	/* Entries naming memory the child did not inherit (unmapped, or a shared memfd): left out. */
	long left_out;
	bool unfiltered;           /* the child's mappings could not be read: all copied */
};

enum archive_reason {
	ARCHIVE_EXIT,              /* retention over */
	ARCHIVE_EXEC,              /* the image that wrote it is gone */
	ARCHIVE_STALE,             /* an earlier holder of the pid wrote it */
	ARCHIVE_DROP,              /* only perfmapd's copy, never written: deleted */
};

static inline const char *archive_reason_str(enum archive_reason why)
{
	switch (why) {
	case ARCHIVE_EXIT: return "its process exited";
	case ARCHIVE_EXEC: return "its image exec'd";
	case ARCHIVE_STALE: return "an earlier process with this pid wrote it";
	case ARCHIVE_DROP: return "only perfmapd's copy of the parent's map, never written";
	}
	return "?";
}

/* archive(): the move follows the event at once, an exec's own close may still be finishing. */
#define ARCHIVE_F_FRESH (1u << 0)
/* archive(): only while the file is the size it was judged at (written since: -ESTALE). */
#define ARCHIVE_F_AS_JUDGED (1u << 1)
/*
 * archive(): another uid's map at a new holder's path, never that holder's:
 * moved even while open for writing (its writer is not the pid's process, and
 * a rename tears no fd) and when the archive's queue is full.
 */
#define ARCHIVE_F_SQUATTED (1u << 2)

/* A process in another mount or pid namespace (mirror.c). */
struct ns_req {
	pid_t pid;                 /* as the host sees it */
	pid_t ns_pid;              /* as its own pid namespace does: its map's name there */
	uint64_t start_ticks;
	uid_t uid;
	gid_t gid;
	uint64_t mnt_ns;           /* its mount namespace: refusals of its directory are said once */
	/*
	 * Its nearest known ancestors in the same mount namespace (0: none): a
	 * process gone before it was looked at is placed through their roots.
	 */
	pid_t kin[4];
	const char *comm;          /* escaped */
};

/* Where such a process's map is. */
enum ns_place {
	NS_OURS,                   /* <map dir>/perf-<pid>.map itself: handled as a host process */
	NS_MIRRORED,               /* elsewhere, mirrored there from now on (or once it appears) */
	NS_REFUSED,                /* not mirrored: refused, over a bound, or ambiguous; counted, said */
};

struct mapstore_ops {
	/*
	 * The map at @pid's path: 0, or -ENOENT when there is none, or when the
	 * index knows there was none at @at_ns (CLOCK_BOOTTIME; 0: now), which
	 * costs no system call.
	 */
	int (*look)(void *ctx, pid_t pid, uint64_t at_ns, struct map_info *mi);
	/*
	 * Whether @mi's newest entries lie in the mappings of (@pid,
	 * @start_ticks) as its image was at @image_ns: ENTRIES_UNKNOWN when it
	 * has exec'd since, and its mappings are a later image's.
	 */
	enum map_entries (*entries)(void *ctx, pid_t pid, uint64_t start_ticks, uint64_t image_ns,
				    const struct map_info *mi);
	/* Did @pid exec since @since_ns? The kernel's record, not a guess. */
	bool (*execd_since)(void *ctx, pid_t pid, uint64_t since_ns);
	/*
	 * Does a process other than the one started at @start_ticks hold @pid
	 * now (0: any process)? An exited process not reaped yet holds nothing.
	 */
	bool (*pid_held)(void *ctx, pid_t pid, uint64_t start_ticks);
	/* Does @child run the same executable as @parent (no exec since the fork)? */
	bool (*same_image)(void *ctx, pid_t child, pid_t parent);
	/*
	 * Make the child's map with the parent's entries; -EEXIST when the child
	 * has a map, -ESRCH when another process holds the child's pid by now.
	 */
	int (*copy_create)(void *ctx, const struct copy_req *rq, struct copy_result *res);
	/* Append them to the child's own map; -EAGAIN while it ends in a partial line, -ESRCH as above. */
	int (*copy_append)(void *ctx, const struct copy_req *rq, struct copy_result *res);
	/*
	 * Either of those off the event loop (NULL: none is): 0 when queued,
	 * and the result comes back to policy__copy_done() with @ticket; -EAGAIN
	 * when the queue holds as many of @rq->uid's copies as it may, -EBUSY
	 * when it holds as many as it may in all.
	 */
	int (*copy_defer)(void *ctx, const struct copy_req *rq, enum copy_op op, uint64_t ticket);
	/*
	 * A deferred copy, before the child's next event is weighed: -ECANCELED
	 * when it was stopped before it began and nothing of it will show;
	 * -EINPROGRESS when it is being made (stopped: nothing shows) or appended
	 * to the child's own map, and its result, with the bytes it cost, comes
	 * to policy__copy_done() later; else its result (0 or the copy's error,
	 * @res filled), now and only now.
	 */
	int (*copy_settle)(void *ctx, pid_t child, uint64_t ticket, struct copy_result *res);
	/*
	 * Move the map at @pid's path, which must still be @expect (-ESTALE), out
	 * of the way: into the archive, or deleted for ARCHIVE_DROP. -EBUSY while
	 * a process has it open for writing, -EAGAIN while the archive's queue
	 * is full (left in place either way).
	 */
	int (*archive)(void *ctx, pid_t pid, uint64_t start_ticks, enum archive_reason why,
		       const struct map_info *expect, unsigned int flags);

	/*
	 * An exited process's map @mi, at @pid's path, made canonical in place
	 * when some consumer would misread it: 0 (a new inode there: look()
	 * again), -EALREADY (read right: left), -EBUSY (open for writing: left),
	 * or -errno. NULL: never.
	 */
	int (*canonicalize)(void *ctx, pid_t pid, const struct map_info *mi);

	/* ---- processes in other namespaces; NULL: the store has no mirrors ---- */

	/* Where @rq's map is; from NS_MIRRORED on, it is mirrored. 0 or -errno (-ESRCH: gone). */
	int (*ns_attach)(void *ctx, const struct ns_req *rq, enum ns_place *place);
	/* Bring @pid's mirror up to date now, rather than at the next tick. */
	void (*ns_sync)(void *ctx, pid_t pid);
	/*
	 * Fork: the mirrored child @rq gets @parent's entries in its own map
	 * directory, under its own pid, and in its mirror. 0, -EEXIST (it has
	 * a map), -ENOENT (the parent has none), or -errno.
	 */
	int (*ns_copy)(void *ctx, pid_t parent, const struct ns_req *rq);
	/*
	 * Exec at @at_ns: @pid's mirror so far, let go of (@mi); a new one
	 * follows, beginning with what may have been written after @at_ns.
	 * 1: it was only the fork's copy, unwritten; -ENOENT: none.
	 */
	int (*ns_exec)(void *ctx, pid_t pid, uint64_t at_ns, struct map_info *mi);
	/* Exit: @pid's mirror, up to date and ended (@mi). -ENOENT: none. */
	int (*ns_end)(void *ctx, pid_t pid, struct map_info *mi);
};

struct mapstore {
	const struct mapstore_ops *ops;
	void *ctx;
};

#endif /* PERFMAPD_MAPSTORE_H */

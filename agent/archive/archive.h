/*
 * The archive: maps moved out of the map directory, compacted into
 * --archive-dir under --archive-max-bytes, fairly between users, an exited
 * process's jitdump with its map when it lies in the map directory. The move
 * is done at once; the compaction and the quota in a worker thread.
 */
#ifndef PERFMAPD_ARCHIVE_H
#define PERFMAPD_ARCHIVE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "archive/archive_journal.h"
#include "policy/mapstore.h"

/*
 * Staged name in the map directory: ".perfmapd.<32 random hex digits>.map".
 * Nobody can guess it before the move; the journal (archive_journal.h) says
 * which staged files the agent made.
 */
#define ARCHIVE_STAGE_PREFIX STAGE_PREFIX

/* Maps queued for the worker at most; a move beyond waits in place (-EAGAIN). */
#define ARCHIVE_QUEUE_MAX 256
/* One uid's maps queued at most, of max_queue: one user cannot fill it for all. */
#define ARCHIVE_QUEUE_SHARE(max) ((max) / 4 ? (max) / 4 : 1)
/* Archived maps per uid at most: past it, its oldest go (the directory's inodes, the index's memory). */
#define ARCHIVE_FILES_PER_UID 16384
/* The compaction's table at most; a map needing more is stored as it is. */
#define ARCHIVE_TABLE_MAX_BYTES (64ull << 20)

struct archive_config {
	const char *map_dir;
	int map_dir_fd;
	const char *dir;              /* --archive-dir */
	uint64_t max_bytes;           /* the quota: the largest user's oldest go first */
	uint64_t max_map_bytes;       /* at most this much of a map is stored */
	uint64_t max_dump_bytes;      /* a larger jitdump is left in place; 0: max_map_bytes */
	unsigned int max_queue;       /* 0: ARCHIVE_QUEUE_MAX; a uid's share a quarter of it */
	uint64_t max_files_per_uid;   /* 0: ARCHIVE_FILES_PER_UID */
	uint64_t max_table_bytes;     /* 0: ARCHIVE_TABLE_MAX_BYTES */
};

/*
 * Counted by the worker and the event loop; read at any time. The fields are
 * perfmapd_counters.def's PERFMAPD_ARCHIVE rows (there: what each counts).
 */
struct archive_stats {
#define PERFMAPD_ARCHIVE(key, field, ...) uint64_t field;
#include "perfmapd_counters.def"
};

struct archive;

/*
 * Create or check the directory (ours, writable by nobody else), open its
 * journal of staged maps, and start the worker.
 */
struct archive *archive__open(const struct archive_config *cfg);
/* Stop the worker after the map in hand; queued ones stay staged for the next start. */
void archive__free(struct archive *ar);
/* A new quota (a SIGHUP): the worker holds the archive to it from its next store on. */
void archive__set_max_bytes(struct archive *ar, uint64_t max_bytes);
/* The quota now: any thread. */
uint64_t archive__max_bytes(struct archive *ar);

/*
 * Move the map at @pid's path, which must be (@dev, @ino) and, unless
 * @size is UINT64_MAX, @size bytes long (-ESTALE), out of
 * the map directory, never under a writer (-EBUSY), then have it compacted
 * into the archive as perf-<pid>-<start>[-<reason>].map; ARCHIVE_DROP
 * deletes it instead, and so is a map `perfmapctl restore` put back
 * (PERFMAP_RESTORED_XATTR) whose archived map is still there, the same size. -EAGAIN, the map left in place, while the worker's
 * queue, or its owner's share of it, is full.
 *
 * ARCHIVE_EXIT of a process in the host's namespaces (no tag) takes its
 * jitdump too when it lies in the map directory as jit-<pid>.dump, the
 * map's owner's, a regular file of one link no larger than max_dump_bytes,
 * and no one has it open for writing: staged and journaled as the map is,
 * stored beside it as it is, jit-<pid>-<start>.dump, and deleted with it by
 * the quota. One `perfmapctl restore` put back, unchanged, is deleted
 * rather than archived again. Any other dump, and any dump elsewhere, is
 * left where it is.
 */
int archive__move(struct archive *ar, pid_t pid, uint64_t start_ticks, enum archive_reason why,
		  dev_t dev, ino_t ino, uint64_t size);
/* archive__move() with @tag (a container's, "c<12 hex>") in the archived name, after the pid. */
int archive__move_tagged(struct archive *ar, pid_t pid, uint64_t start_ticks,
			 enum archive_reason why, dev_t dev, ino_t ino, uint64_t size,
			 const char *tag);
/*
 * The map at @pid's path, (@dev, @ino), is another uid's, and a new process
 * holds the pid: it is never that process's map, and never kept for it.
 * Moved as archive__move() moves an ARCHIVE_STALE map, but even while it is
 * open for writing (its writer is not the pid's process; a rename tears no
 * fd) and even when the worker's queue is full (queued past the bound: at
 * most one such map per process started, each a job of 200 bytes, no fd).
 */
int archive__move_squatted(struct archive *ar, pid_t pid, dev_t dev, ino_t ino);
/*
 * At start, a file named ARCHIVE_STAGE_PREFIX... in the map directory:
 * finish the move a crash interrupted if the journal says an earlier run of
 * the agent made it (name, device, inode, owner), without a second archived
 * copy if that run had stored it already; nothing if this run made it (it is
 * queued); else leave it alone, logged and counted.
 */
void archive__finish_staged(struct archive *ar, const char *name);
/* Wait until every queued map is stored. */
void archive__flush(struct archive *ar);
/* Hold the worker before its next map, or let it go on (tests: a queue that stays full). */
void archive__pause(struct archive *ar, bool paused);

/* What the archive holds, from the quota's index: no listing, any thread. */
void archive__usage(struct archive *ar, uint64_t *files, uint64_t *bytes);
void archive__stats(struct archive *ar, struct archive_stats *out);

#endif /* PERFMAPD_ARCHIVE_H */

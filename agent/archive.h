/*
 * The archive: maps moved out of the map directory, compacted into
 * --archive-dir under --archive-max-bytes. The move is done at once; the
 * compaction and the quota in a worker thread.
 */
#ifndef PERFMAPD_ARCHIVE_H
#define PERFMAPD_ARCHIVE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "policy.h"

/* Staged name prefix in the map directory: ".perfmapd.<archive name>". */
#define ARCHIVE_STAGE_PREFIX ".perfmapd."

struct archive_config {
	const char *map_dir;
	int map_dir_fd;
	const char *dir;              /* --archive-dir */
	uint64_t max_bytes;           /* the quota; the maps written longest ago go first */
	uint64_t max_map_bytes;       /* larger maps are not compacted */
};

/* Counted by the worker; read at any time. */
struct archive_stats {
	uint64_t archived;
	uint64_t evicted;
	uint64_t failed;              /* left staged in the map directory */
};

struct archive;

/* Create or check the directory (ours, writable by nobody else) and start the worker. */
struct archive *archive__open(const struct archive_config *cfg);
/* Stop the worker after the map in hand; queued ones stay staged for the next start. */
void archive__free(struct archive *ar);

/*
 * Move the map at @pid's path, which must be (@dev, @ino) and, unless
 * @size is UINT64_MAX, @size bytes long (-ESTALE), out of
 * the map directory, never under a writer (-EBUSY), then have it compacted
 * into the archive as perf-<pid>-<start>[-<reason>].map; ARCHIVE_DROP
 * deletes it instead.
 */
int archive__move(struct archive *ar, pid_t pid, uint64_t start_ticks, enum archive_reason why,
		  dev_t dev, ino_t ino, uint64_t size);
/* Finish a move a crash interrupted: @name is a staged map in the map directory. */
void archive__finish_staged(struct archive *ar, const char *name);
/* Wait until every queued map is stored. */
void archive__flush(struct archive *ar);

void archive__usage(struct archive *ar, uint64_t *files, uint64_t *bytes);
void archive__stats(struct archive *ar, struct archive_stats *out);

#endif /* PERFMAPD_ARCHIVE_H */

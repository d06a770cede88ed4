/* Exited processes' maps: kept in place for --retention, then compacted into the archive. */
#ifndef PERFMAPD_ARCHIVE_H
#define PERFMAPD_ARCHIVE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

struct agent;

enum archive_reason {
	ARCHIVE_EXIT,             /* retention over */
	ARCHIVE_EXEC,             /* the image that wrote it is gone */
	ARCHIVE_STALE,            /* an earlier holder of the pid wrote it */
	ARCHIVE_DROP,             /* only our copy, never written: delete instead */
};

struct retained {
	pid_t pid;
	uint64_t start_ticks;     /* 0: unknown (found on disk without its process) */
	int reason;               /* enum archive_reason */
	unsigned int tries;       /* ARCHIVE_EXEC: attempts left while busy */
	dev_t dev;                /* the map as it was at the exit */
	ino_t ino;
	uint64_t deadline_ns;     /* CLOCK_MONOTONIC */
};

/* Create or check the archive directory (ours, writable by nobody else); start the worker. */
int archive_init(struct agent *a);
/* Stop the worker after the map in hand; queued ones stay staged for the next start. */
void archive_fini(void);

/* Keep the map of exited @pid at its path until @deadline_ns, then archive it. */
void retain_add(struct agent *a, pid_t pid, uint64_t start_ticks, const struct stat *st,
		uint64_t deadline_ns);
/*
 * Move the exec'd @pid's old map a little later: the exec closed the old
 * image's fd, but the kernel finishes closing it only as the task returns
 * to user space, and until then the map still counts as open for writing.
 */
void retain_retry_exec(struct agent *a, pid_t pid, uint64_t start_ticks,
		       const struct stat *st, int reason);
bool retain_has(struct agent *a, pid_t pid);
/* A new process has @pid: archive its predecessor's map now, before it appends. */
void retain_evict_pid(struct agent *a, pid_t pid);
/* Archive every retained map whose time has come. */
void retain_expire(struct agent *a);


/*
 * Move the map of @pid out of its path (never under a writer: -EBUSY), then
 * compact it into the archive as perf-<pid>-<start>[-<reason>].map.
 * @expect, when given, must still be the file at the path (-ESTALE).
 */
int archive_map(struct agent *a, pid_t pid, uint64_t start_ticks,
		enum archive_reason why, const struct stat *expect);
/* Finish moves a crash interrupted: staged maps left in the map directory. */
void archive_staged(struct agent *a, const char *name);
/* Staged name prefix in the map directory. */
#define ARCHIVE_STAGE_PREFIX ".perfmapd."

/* Archive size now, for status. */
void archive_usage(struct agent *a, uint64_t *files, uint64_t *bytes);

#endif /* PERFMAPD_ARCHIVE_H */

/*
 * The map directory's inotify watch: which pids have a map there and when
 * each map's inode appeared, known without touching the disk.
 */
#ifndef PERFMAPD_MAPWATCH_H
#define PERFMAPD_MAPWATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "lib/clock.h"

struct mapwatch;

/*
 * Maps the index holds at most (8 MB): past it, the index is inexact, and
 * every event looks on the disk until it has emptied by half and the
 * directory is listed again. pid_max allows 4M names, anyone can make them.
 */
#define MAPWATCH_RECORDS_MAX (128u * 1024)

/*
 * Watch @dir (open as @dirfd, which the caller keeps open). The index knows
 * nothing (every map may exist) until mapwatch__synced().
 */
struct mapwatch *mapwatch__open(const char *dir, int dirfd);
void mapwatch__free(struct mapwatch *mw);
int mapwatch__fd(const struct mapwatch *mw);

/* Told of each map that appeared at, or left, a pid's path. */
typedef void (*mapwatch_fn)(void *ctx, pid_t pid, bool exists);

/*
 * Read every queued change into the index, telling @fn of each. True when
 * changes were lost (the queue overflowed, or the full index has room again
 * for the maps it left out): the index is reset, and only a
 * listing of the directory (mapwatch__listed(), then mapwatch__synced())
 * makes it exact again.
 */
bool mapwatch__drain(struct mapwatch *mw, mapwatch_fn fn, void *ctx);

/* Is the directory still there? Checked on the agent's tick; blind for good if not. */
void mapwatch__check(struct mapwatch *mw);
/* A listing found @pid's map, @st (lstat). */
void mapwatch__listed(struct mapwatch *mw, pid_t pid, const struct stat *st);
/* The listing that began at @since_ns (CLOCK_BOOTTIME) is complete: the index is exact. */
void mapwatch__synced(struct mapwatch *mw, uint64_t since_ns);
/* perfmapd itself put the inode (@dev, @ino) at @pid's path within @when. */
void mapwatch__made(struct mapwatch *mw, pid_t pid, dev_t dev, ino_t ino, struct span when);

/*
 * When the inode (@dev, @ino), now at @pid's path, appeared there, as far as
 * the queue's order tells: SPAN_UNKNOWN when the index cannot say.
 */
struct span mapwatch__born(const struct mapwatch *mw, pid_t pid, dev_t dev, ino_t ino);

/*
 * Could perf-@pid.map have existed at @ts_ns (CLOCK_BOOTTIME; 0: unknown)?
 * False only when the index was exact then: a map made before an event was
 * in the inotify queue before the event's record was in the ring buffer.
 */
bool mapwatch__may_exist(const struct mapwatch *mw, pid_t pid, uint64_t ts_ns);
/* The same for the changes read so far: false only when known absent. */
bool mapwatch__has(const struct mapwatch *mw, pid_t pid);
/* Calls @fn for every pid the index holds a map for (all, when exact). */
void mapwatch__for_each(const struct mapwatch *mw, void (*fn)(pid_t pid, void *ctx), void *ctx);
/* "exact", "listing" (after an overflow) or "off" (the watch is gone), for status. */
const char *mapwatch__state(const struct mapwatch *mw);
uint64_t mapwatch__overflows(const struct mapwatch *mw);
/* Times a map was left out of the index, full at MAPWATCH_RECORDS_MAX. */
uint64_t mapwatch__full(const struct mapwatch *mw);
/* Hold at most @max_records maps (tests). */
void mapwatch__limit(struct mapwatch *mw, size_t max_records);

#endif /* PERFMAPD_MAPWATCH_H */

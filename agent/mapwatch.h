/* The map directory's inotify watch: which pids have a map there, kept without touching the disk. */
#ifndef PERFMAPD_MAPWATCH_H
#define PERFMAPD_MAPWATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct agent;
struct mapwatch;

/* Watch @a->cfg.map_dir; the index is unknown (everything may exist) until mapwatch__synced(). */
struct mapwatch *mapwatch__open(const struct agent *a);
void mapwatch__free(struct mapwatch *mw);
int mapwatch__fd(const struct mapwatch *mw);

/*
 * Read every queued change into the index. True when the directory must be
 * listed again: the queue overflowed (the index is reset) or a map appeared
 * for a pid the agent knows nothing of.
 */
bool mapwatch__drain(struct agent *a);

/* perf-@pid.map exists: record it here and in BPF (only such pids wake the agent). */
void mapwatch__set(struct agent *a, pid_t pid, bool exists);
/* A listing that began at @since_ns (CLOCK_BOOTTIME) is complete: the index is exact from then on. */
void mapwatch__synced(struct mapwatch *mw, uint64_t since_ns);
/* "exact", "listing" (after an overflow) or "off" (the watch is gone), for status. */
const char *mapwatch__state(const struct mapwatch *mw);

/*
 * Could perf-@pid.map exist for an event at @ts_ns (CLOCK_BOOTTIME, 0 for
 * unknown)? False only when the index was exact after the event: a map made
 * before a fork was in the inotify queue before the fork's event was.
 */
bool mapwatch__may_exist(const struct mapwatch *mw, pid_t pid, uint64_t ts_ns);
/* The same for the changes read so far: false only when known absent. */
bool mapwatch__has(const struct mapwatch *mw, pid_t pid);

#endif /* PERFMAPD_MAPWATCH_H */

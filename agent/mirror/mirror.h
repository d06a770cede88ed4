/*
 * Mirrors: the maps of processes in other mount or pid namespaces, kept at
 * <map dir>/perf-<host pid>.map as they grow. A process's map lives at
 * <its root>/<ns map dir>/perf-<its own pid>.map; the mirror holds its
 * complete lines, appended in whole lines, a bounded amount per tick. New
 * maps are noticed by inotify on each such directory; growth is polled at
 * the tick. Forks inside a container get their copy there, under the
 * child's own pid. The policy decides when (policy_ns.c); this is the how.
 */
#ifndef PERFMAPD_MIRROR_H
#define PERFMAPD_MIRROR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "mirror/container.h"
#include "policy/mapstore.h"
#include "lib/nsroot.h"

struct mirror_config {
	int map_dir_fd;
	const char *map_dir;
	const char *ns_map_dir;      /* where runtimes in other namespaces write, as they see it */
	uint64_t max_bytes;          /* a mirror's size bound; 0: none */
	uint64_t rate, burst;        /* bytes each uid's mirrors may write a second, saved up */
};

/*
 * Why nothing was created, appended to or removed in a namespace's own map
 * directory for a process (a fork's copy then goes to its mirror alone):
 * counted, and said once per directory and reason.
 */
enum ns_write_refusal {
	NSW_NOT_ITS_DIR,  /* owned by a uid its user namespace does not map: a host path, not its own */
	NSW_UNMAPPED,     /* its own uid or gid has no mapping in the user namespace */
	NSW_DENIED,       /* its own credentials do not allow it (the kernel's answer, acting as it) */
	NSW_GONE,         /* gone, or its pid another's: nobody to act for */
	NSW__COUNT,
};

/* Bins of the lag histogram: milliseconds, the last one "and more". */
#define MIRROR_LAG_BINS 2048

/*
 * The mirrors' counters. The scalar ones are perfmapd_counters.def's
 * PERFMAPD_MIRROR rows (there: what each counts, its status key, its metric).
 */
struct mirror_stats {
#define PERFMAPD_MIRROR(key, field, ...) uint64_t field;
#include "perfmapd_counters.def"
	uint64_t refused[NSR__COUNT];         /* maps refused, by reason: the refused_* rows */
	uint64_t writes_refused[NSW__COUNT];  /* by reason: the ns_writes_refused_* rows */
	uint64_t lag[MIRROR_LAG_BINS];        /* lines by lag, in ms: mirrors__lag_p99_ms() */
};

struct mirrors;

struct mirrors *mirrors__new(const struct mirror_config *cfg);
void mirrors__free(struct mirrors *m);
/* A new copy budget for the mirrors (a SIGHUP). */
void mirrors__set_budget(struct mirrors *m, uint64_t rate, uint64_t burst);
/* The inotify fd for the loop's epoll; mirrors__on_inotify() when readable. */
int mirrors__fd(const struct mirrors *m);
void mirrors__on_inotify(struct mirrors *m, uint64_t now_ns);
/* perf-<@name_pid>.map appeared in the map dir: a process sharing it may be waiting. */
void mirrors__on_map_dir(struct mirrors *m, pid_t name_pid, uint64_t now_ns);
/* The tick: bring mirrors up to date, within the bounds. */
void mirrors__poll(struct mirrors *m, uint64_t now_ns);

/*
 * Where @rq's map is; when it is elsewhere, mirror it from now on (read at
 * the next mirrors__sync() or tick). 0 or -errno (-ESRCH: gone).
 */
int mirrors__attach(struct mirrors *m, const struct ns_req *rq, enum ns_place *place,
		    uint64_t now_ns);
bool mirrors__has(const struct mirrors *m, pid_t pid);
/* Bring @pid's mirror up to date now (a bounded pass). */
void mirrors__sync(struct mirrors *m, pid_t pid, uint64_t now_ns);
/*
 * Fork: the child @rq, attached, gets @parent's entries: in its own map
 * directory under its own pid (a container's), or, in the map dir itself,
 * straight in its mirror. 0, -EEXIST (it has a map), -ENOENT (the parent
 * has none) or -errno.
 */
int mirrors__copy(struct mirrors *m, pid_t parent, const struct ns_req *rq, uint64_t now_ns);
/*
 * Exec at @at_ns: the mirror so far is the old image's. It is brought up to
 * date and let go of (@mi: it, to archive), and a new one begins, at the
 * next sync (once the caller moved the old one away), with the lines that
 * may have been written after @at_ns, and what is written next.
 * 1 when it held only the copy made at the fork, unwritten (removed in the
 * container too); -ENOENT when there was none.
 */
int mirrors__exec(struct mirrors *m, pid_t pid, uint64_t at_ns, struct map_info *mi,
		  uint64_t now_ns);
/* Exit: brought up to date and ended; @mi the mirror, to retain. -ENOENT: none. */
int mirrors__end(struct mirrors *m, pid_t pid, struct map_info *mi, uint64_t now_ns);
/*
 * Is (@dev, @ino), at perf-<@name_pid>.map in the map dir, a process's
 * in another pid namespace (whose own pid is @name_pid), not the host's
 * @name_pid's?
 */
bool mirrors__claims(const struct mirrors *m, pid_t name_pid, dev_t dev, ino_t ino);
/* The container tag ("c" and 12 hex digits) of the mirror of (@pid, @start_ticks), or "". */
const char *mirrors__tag(const struct mirrors *m, pid_t pid, uint64_t start_ticks);
/* Its map is archived: the tag of an ended mirror is no longer needed. */
void mirrors__archived(struct mirrors *m, pid_t pid, uint64_t start_ticks);

size_t mirrors__active(const struct mirrors *m);
const struct mirror_stats *mirrors__stats(const struct mirrors *m);
uint64_t mirrors__behind(const struct mirrors *m);
uint64_t mirrors__lag_p99_ms(const struct mirrors *m);
/* One "mirror_<pid>: ..." status line per mirror, at most @max; the bytes written. */
size_t mirrors__describe(const struct mirrors *m, char *buf, size_t len, size_t max);

#endif /* PERFMAPD_MIRROR_H */

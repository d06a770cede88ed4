/*
 * The perf maps perfmapd writes for jitdump producers: each producer's
 * jit-<pid>.dump found by its marker mapping, read as it grows (as untrusted
 * input, a bounded share a tick), and its functions named in the
 * producer's perf-<pid>.map and in its descendants' (the records a forked
 * child writes into its parent's dump), unless a process writes its own.
 */
#ifndef PERFMAPD_JITDUMPS_H
#define PERFMAPD_JITDUMPS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct policy;

/*
 * What producers can make the agent hold: dumps read at once (a fork pool
 * of 64 workers, each with its dump, is one uid's), and the live functions
 * and their names' bytes kept, for one dump, one uid's dumps together, and
 * all dumps together (some 100 bytes a function besides its name). Past a
 * bound the dump that would pass it stops being read, said once: its map
 * keeps what it had. Records read a tick: JITDUMP_RECORDS_PER_TICK for each
 * dump, JITDUMPS_RECORDS_PER_TICK for all.
 */
#define JITDUMPS_PER_UID 64
#define JITDUMPS_MAX 1024
#define JITDUMP_FUNCS_MAX (256u << 10)
#define JITDUMP_NAME_BYTES_MAX (32u << 20)
#define JITDUMP_UID_FUNCS_MAX (512u << 10)
#define JITDUMP_UID_NAME_BYTES_MAX (64u << 20)
#define JITDUMP_ALL_FUNCS_MAX (2u << 20)
#define JITDUMP_ALL_NAME_BYTES_MAX (256u << 20)
#define JITDUMP_RECORDS_PER_TICK 8192
#define JITDUMPS_RECORDS_PER_TICK 32768
/* Maps written from one dump: its producer's and its descendants' (more: counted, not written). */
#define JITDUMP_TARGETS_MAX 64
/* Bytes of a dump read at most: a dump growing without end is read no further (said). */
#define JITDUMP_BYTES_MAX (4ull << 30)

/*
 * The counters; the status keys and what each counts are perfmapd_counters.def's
 * PERFMAPD_JITDUMP rows.
 */
struct jitdumps_stats {
#define PERFMAPD_JITDUMP(key, field, ...) uint64_t field;
#include "perfmapd_counters.def"
};

struct jitdumps;

/* Maps written in @map_dir_fd (the agent's map directory, @map_dir for messages); NULL with errno. */
struct jitdumps *jitdumps__new(const char *map_dir, int map_dir_fd, struct policy *p);
void jitdumps__free(struct jitdumps *jd);
/*
 * @pid mapped @path (as it sees it, in its own root) executable, inode
 * @ino (0: not known), named jit-<N>.dump: its dump is read from now on,
 * if it is one perfmapd may read for it.
 */
void jitdumps__marker(struct jitdumps *jd, pid_t pid, const char *path, uint64_t ino);
/* What the dumps gained since, read and written to their maps, within the tick's share. */
void jitdumps__tick(struct jitdumps *jd);
/*
 * @pid exec'd or ended: the dump it produced is read to its end (bounded),
 * written, and closed, before the policy weighs the event.
 */
void jitdumps__ended(struct jitdumps *jd, pid_t pid);
/* @pid forks: the dump it produces read to its end now (bounded) and written, for the copy. */
void jitdumps__flush(struct jitdumps *jd, pid_t pid);
const struct jitdumps_stats *jitdumps__stats(const struct jitdumps *jd);
size_t jitdumps__count(const struct jitdumps *jd);
/* One status line per dump, @max at most, into @buf: the bytes written. */
size_t jitdumps__describe(const struct jitdumps *jd, char *buf, size_t len, unsigned int max);

#endif /* PERFMAPD_JITDUMPS_H */

/*
 * The hold socket beside the status socket: a profiler (perfmapctl profile)
 * asks there that the maps of the processes it sampled stay at their paths
 * until its report is written. Root's alone. See holds.c for the protocol.
 */
#ifndef PERFMAPD_HOLDS_H
#define PERFMAPD_HOLDS_H

#include <stddef.h>
#include <stdint.h>

struct policy;

#define HOLDERS_MAX 8   /* connections at once; more are closed at once (counted) */

struct holds;

/* The hold socket's counters: perfmapd_counters.def's PERFMAPD_HOLDS rows. */
struct holds_stats {
#define PERFMAPD_HOLDS(key, field, ...) uint64_t field;
#include "perfmapd_counters.def"
};

/*
 * Listen at @path (made 0600, root's, under a umask of the process's: so
 * before any thread that makes files starts). NULL with errno set.
 */
struct holds *holds__open(const char *path);
/* Holds go to @p from now on: nothing is read before. */
void holds__attach(struct holds *h, struct policy *p);
/* Close every connection, releasing its holds, and remove the socket. NULL is fine. */
void holds__free(struct holds *h);
/*
 * At the loop's tick, and before each retry's decisions: accept again after
 * running out of fds; take new holders, and what each asked since. The
 * socket wakes no one: holds matter only when a retention ends, which is
 * decided at those times, right after. A profiler sending its holds every
 * 50 ms would otherwise wake the agent 20 times a second.
 */
void holds__tick(struct holds *h);
void holds__stats(const struct holds *h, struct holds_stats *st);

#endif /* PERFMAPD_HOLDS_H */

/* The gaps in what the kernel reports of executable mappings, filled from /proc/<pid>/maps. */
#ifndef PERFMAPD_JITSCAN_H
#define PERFMAPD_JITSCAN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct policy;

/*
 * /proc/<pid>/maps reads per tick at most, and the time they may take: a
 * pass never holds the loop long, whatever mappings a user's processes have
 * (a read of 60,000 takes some 20 ms; the one that passes the bound ends
 * the tick's share).
 */
#define JITSCAN_PER_TICK 64
#define JITSCAN_TICK_NS (5ull * 1000000)
/* With /proc as the only source, a pass over every process this often at most. */
#define JITSCAN_PERIOD_NS (10000ull * 1000000)

struct jitscan;

/* A jitdump's marker mapping found in @pid's mappings: @path as the agent's root sees it. */
typedef void (*jitscan_marker_fn)(void *ctx, pid_t pid, const char *path, uint64_t ino);

/*
 * @periodic: /proc is the only source, passes repeat; else one pass per
 * jitscan__pass(). @marker (may be NULL) is told of each jitdump marker read.
 */
struct jitscan *jitscan__new(bool periodic, jitscan_marker_fn marker, void *ctx);
void jitscan__free(struct jitscan *js);
/* Every process the policy knows is read again, beginning at the next tick. */
void jitscan__pass(struct jitscan *js, const struct policy *p);
void jitscan__tick(struct jitscan *js, struct policy *p, uint64_t now_ns);
uint64_t jitscan__reads(const struct jitscan *js);
uint64_t jitscan__passes(const struct jitscan *js);

#endif /* PERFMAPD_JITSCAN_H */

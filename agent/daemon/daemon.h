/*
 * The agent's pieces, wired together: daemon.c opens, connects and closes
 * them; loop.c runs them; main.c only parses, opens, runs and closes. The
 * one header of this room that main.c includes.
 */
#ifndef PERFMAPD_DAEMON_H
#define PERFMAPD_DAEMON_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/daemon_config.h"

struct archive;
struct events;
struct execmap;
struct holds;
struct instance;
struct jitdumps;
struct jitscan;
struct mapwatch;
struct metrics;
struct mirrors;
struct policy;
struct store;

/* Pages of each CPU's mmap-report ring: 1 MiB, some 8,000 records (a few hundred execs). */
#define EXECMAP_RING_PAGES 256

/* The agent's handles, and the config they were opened with; the loop keeps its own state. */
struct daemon {
	struct daemon_config *cfg;
	int map_dir_fd;
	struct instance *inst;
	struct holds *holds;          /* profilers' holds on maps */
	struct archive *ar;
	struct mapwatch *mw;
	struct events *events;
	struct mirrors *mirrors;      /* NULL: --no-mirrors or --dry-run */
	struct execmap *execmap;      /* NULL: executable mappings from /proc only, or not at all */
	enum execmap_source exec_src; /* what was chosen */
	char exec_probe[96];          /* what else this kernel would load (execprobe.c) */
	struct jitscan *jitscan;      /* reads /proc/<pid>/maps for the gaps */
	struct jitdumps *jitdumps;    /* NULL: no executable mappings, or a dry run */
	struct metrics *metrics;      /* NULL: no --metrics-listen */
	struct store *store;
	struct policy *policy;
	uint64_t self_mnt_ns, self_pid_ns;
};

/*
 * daemon.c: every piece opened and wired, with @cfg's values (kept: a
 * SIGHUP changes its numbers); 0 or a negative errno, said. daemon__close()
 * undoes whatever part of it was done.
 */
int daemon__open(struct daemon *d, struct daemon_config *cfg);
void daemon__close(struct daemon *d);

/* loop.c: the signals the loop reads, blocked before any thread starts. */
void daemon__block_signals(void);
/*
 * loop.c: the event loop, until SIGTERM or SIGINT; 0 or a negative errno.
 * @started_ns (CLOCK_MONOTONIC): when the agent started, which its uptime counts from.
 */
int daemon__run(struct daemon *d, uint64_t started_ns);

#endif /* PERFMAPD_DAEMON_H */

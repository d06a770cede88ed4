/*
 * What the agent says of itself: the status text `perfmapctl status` reads
 * and the metrics endpoint's exposition, both from one table of counters
 * (perfmapd_counters.def). The report is given the pieces it reads once, at
 * setup, and reads them when asked. The one header of report/ the rooms
 * above include: the status socket (instance.h) and the endpoint (metrics.h)
 * come with it.
 */
#ifndef PERFMAPD_REPORT_H
#define PERFMAPD_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "report/instance.h"
#include "report/metrics.h"

struct archive;
struct events;
struct execmap;
struct holds;
struct jitdumps;
struct jitscan;
struct mapwatch;
struct mirrors;
struct policy;

/*
 * What the event loop counts of its own work: the loop's, which the report
 * only reads. The counters are perfmapd_counters.def's PERFMAPD_LOOP rows.
 */
struct loop_stats {
	uint64_t started_ns;          /* CLOCK_MONOTONIC: when the agent started */
#define PERFMAPD_LOOP(key, field, ...) uint64_t field;
#include "perfmapd_counters.def"
};

/* The pieces a report reads: read only; NULL where a piece does not run. */
struct report_pieces {
	const char *map_dir;
	int map_dir_fd;
	const char *archive_dir;
	const char *ns_map_dir;       /* where processes in other namespaces write, as they see it */
	bool dry_run;
	const char *exec_source;      /* how executable mappings are learned */
	const char *exec_probe;       /* what else this kernel would load; "" */
	struct policy *policy;
	struct events *events;
	struct mapwatch *mw;
	struct archive *ar;
	struct mirrors *mirrors;      /* NULL: not mirroring */
	struct execmap *execmap;      /* NULL: no mmap reports */
	struct jitscan *jitscan;      /* NULL: no /proc/<pid>/maps reads for JIT code */
	struct holds *holds;
	struct jitdumps *jitdumps;    /* NULL: jitdumps not read */
	struct instance *inst;        /* the status socket: its answers are counted */
	struct metrics *metrics;      /* NULL: no --metrics-listen */
};

struct report;

/*
 * A report of @p's pieces (kept: they must outlive it; the strings are
 * copied) and @loop's counters. NULL and errno when out of memory.
 */
struct report *report__new(const struct report_pieces *p, const struct loop_stats *loop);
void report__free(struct report *r);
/* The status text into @buf: its length (cut to fit, always NUL-terminated). */
size_t report__status(struct report *r, char *buf, size_t len);
/*
 * The answer to a client's request (instance.h) into @buf: for "pid N" a
 * first line "request: pid N", then the process's JIT line, its regions'
 * count and one line per region kept; for anything else an error line.
 */
size_t report__answer(struct report *r, const struct status_request *rq, char *buf, size_t len);
/* The metrics rendered and published to the endpoint; nothing without one. */
void report__metrics(struct report *r);

#endif /* PERFMAPD_REPORT_H */

/* The status report `perfmapctl status` prints: what the agent tracks, one "key: value" per line. */
#ifndef PERFMAPD_STATUS_H
#define PERFMAPD_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct archive;
struct events;
struct execmap;
struct holds;
struct jitscan;
struct mapwatch;
struct policy;

/* What the report is made of: the agent's pieces, read only. */
struct status_sources {
	const char *map_dir;
	int map_dir_fd;
	const char *archive_dir;
	uint64_t archive_max_bytes;
	uint64_t retention_s;
	bool dry_run;
	uint64_t started_ns;          /* CLOCK_MONOTONIC */
	uint64_t resyncs;
	uint64_t rescans, rescans_deferred;   /* listings of the map directory after start */
	uint64_t status_served, status_throttled;
	const struct policy *policy;
	struct events *events;
	const struct mapwatch *mw;
	struct archive *ar;
	const struct mirrors *mirrors;   /* NULL: none */
	const char *ns_map_dir;
	const struct execmap *execmap;   /* NULL: /proc only, or off */
	const char *exec_source;
	const char *exec_probe;
	const struct jitscan *jitscan;   /* NULL: off */
	const struct holds *holds;
};

/* The report into @buf; its length (cut to fit, always NUL-terminated). */
size_t status_text(const struct status_sources *src, char *buf, size_t len);

#endif /* PERFMAPD_STATUS_H */

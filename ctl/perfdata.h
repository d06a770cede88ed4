/*
 * What `perfmapctl restore --perf-data` needs of a perf.data file: the pids it
 * recorded and, per pid, the anonymous executable regions perf saw (where JIT
 * code ran, named by /tmp/perf-<pid>.map). The parser reads a buffer and makes
 * no system call, so that a fuzzer drives all of it (tests/fuzz/fuzz_perfdata.c).
 */
#ifndef PERFMAPD_CTL_PERFDATA_H
#define PERFMAPD_CTL_PERFDATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bounds: a file past them is refused (-E2BIG) rather than read in part. */
#define PERFDATA_MAX_RECORDS (64u << 20)
#define PERFDATA_MAX_PIDS (1u << 20)
#define PERFDATA_MAX_ATTRS 4096u
/* Regions kept per pid; more are counted in regions_dropped. */
#define PERFDATA_MAX_REGIONS 4096u

struct perfdata_region {
	uint64_t start, len;
};

struct perfdata_pid {
	int32_t pid;
	int32_t ppid;                      /* from a FORK record; 0 when none was seen */
	uint64_t samples;
	uint32_t nregions, cap;
	struct perfdata_region *regions;   /* anonymous executable, as recorded */
};

struct perfdata {
	struct perfdata_pid *pids;         /* a hash table: slots with pid 0 are empty */
	size_t cap, npids;
	uint64_t records;
	uint64_t samples_unattributed;     /* samples whose layout the attrs do not settle */
	uint64_t regions_dropped;
	bool has_clock;                    /* HEADER_CLOCK_DATA was there */
	uint64_t clock_wall_ns;            /* its wall-clock time: when the recording began */
	bool truncated;                    /* the header's data size was 0: read to the end */
};

/*
 * Parse the perf.data file held in @buf (@len bytes) into @pd. 0, or
 * -EINVAL (not a perf.data file or a malformed one), -EPROTONOSUPPORT (the
 * other byte order, or written to a pipe), -EOPNOTSUPP (compressed records:
 * `perf inject` writes them uncompressed), -E2BIG (past a bound), -ENOMEM.
 * @why says what, in words, on an error. perfdata_free() in every case.
 */
int perfdata_parse(const void *buf, size_t len, struct perfdata *pd, const char **why);
void perfdata_free(struct perfdata *pd);

/* The entry of @pid, or NULL. */
const struct perfdata_pid *perfdata_find(const struct perfdata *pd, int32_t pid);
/* Is [@start, @start + @len) inside a region of @pid or of an ancestor it was forked from? */
bool perfdata_covers(const struct perfdata *pd, int32_t pid, uint64_t start, uint64_t len);
/* Does @pid have anonymous executable regions of its own (or, with @inherited, of an ancestor's)? */
bool perfdata_has_regions(const struct perfdata *pd, int32_t pid, bool inherited);

/* Is @name what perf records for anonymous memory (a JIT's code): "//anon" and kin? */
bool perfdata_anon_name(const char *name, size_t len);

#endif /* PERFMAPD_CTL_PERFDATA_H */

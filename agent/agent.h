/* perfmapd's state: configuration, counters and the objects each concern owns. */
#ifndef PERFMAPD_AGENT_H
#define PERFMAPD_AGENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "proctab.h"

struct events;
struct instance;
struct mapwatch;

enum bpf_programs {
	BPF_PROGS_AUTO,               /* tp_btf, else raw_tp */
	BPF_PROGS_TP_BTF,
	BPF_PROGS_RAW_TP,
};

struct agent_config {
	const char *map_dir;          /* where runtimes write perf-<pid>.map */
	const char *archive_dir;      /* compacted maps of exited processes */
	const char *run_dir;          /* lock and status socket */
	uint64_t retention_s;         /* how long an exited process's map stays */
	uint64_t archive_max_bytes;   /* archive quota; the oldest go first */
	uint64_t max_map_bytes;       /* larger maps are not copied or archived */
	unsigned int ringbuf_bytes;
	enum bpf_programs bpf_programs;
	bool dry_run;
};

/* What `perfmapctl status` reports; every counter only grows. */
struct agent_stats {
	uint64_t events[4];           /* by PERFMAPD_EV_*, as received */
	uint64_t dropped;             /* counted by BPF: the ring buffer was full */
	uint64_t resyncs;
	uint64_t index_overflows;     /* inotify queue overflowed: directory listed again */
	uint64_t copies_created;      /* child map made from the parent's */
	uint64_t copies_appended;     /* parent's entries added to the child's own map */
	uint64_t copies_by_runtime;   /* the runtime had copied them already */
	uint64_t copies_failed;
	uint64_t foreign_ns;          /* processes in another mount or pid namespace */
	uint64_t stale_moved;         /* maps of an earlier holder of the pid */
	uint64_t exec_archived;
	uint64_t exec_dropped;        /* our copy, never written after the exec */
	uint64_t retained_total;
	/* Counted by the archiving thread only, atomically. */
	uint64_t archived;
	uint64_t archive_evicted;
	uint64_t archive_failed;      /* left staged in the map directory */
	uint64_t busy_deferred;       /* open for writing: not moved this time */
	uint64_t errors;
};

struct retained;

struct agent {
	struct agent_config cfg;
	struct agent_stats stats;
	struct proctab procs;
	struct retained *retained;    /* exited processes' maps, by deadline */
	size_t retained_count;
	struct events *events;
	struct mapwatch *watch;       /* which pids have a map */
	struct instance *inst;
	int map_dir_fd;
	uint64_t self_mnt_ns, self_pid_ns;
	uint64_t start_mono_ns;
	int64_t boot_to_real_ns;      /* CLOCK_REALTIME minus CLOCK_BOOTTIME */
	uint64_t ticks_per_sec;
	bool stop;
};

/* now on CLOCK_MONOTONIC and CLOCK_BOOTTIME, in ns */
uint64_t mono_ns(void);
uint64_t boot_ns(void);

#endif /* PERFMAPD_AGENT_H */

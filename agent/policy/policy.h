/*
 * The policy: what each process event means for the maps, decided in one
 * place. Events come in (from BPF, or made by a scan of /proc and the map
 * directory); the policy weighs the evidence the map store gives and acts
 * through the store. Time comes in with each call. Nothing here touches the
 * system, so unit tests drive it with a fake store and a fake clock.
 */
#ifndef PERFMAPD_POLICY_H
#define PERFMAPD_POLICY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "policy/mapstore.h"

/* ---- what comes in ---- */

enum policy_event_type {
	POLICY_EV_FORK = 1,   /* a new process (from BPF: PERFMAPD_EV_FORK) */
	POLICY_EV_EXEC = 2,   /* a process replaced its image */
	POLICY_EV_EXIT = 3,   /* a process ended */
	POLICY_EV_FOUND,      /* a scan of /proc found a process the table lacks */
	POLICY_EV_MAP,        /* a map is in the directory: a listing found it, or it appeared for a pid the table lacks */
};

enum policy_event_flags {
	POLICY_EVF_VFORK = 1 << 0,   /* the child shares the parent's memory until it execs */
	POLICY_EVF_FOREIGN = 1 << 1, /* another mount or pid namespace: its /tmp is not ours */
};

struct policy_event {
	enum policy_event_type type;
	uint32_t flags;
	pid_t pid;
	pid_t ppid;                /* fork, found: the parent */
	uint64_t start_ticks;      /* the process's identity with @pid (/proc/<pid>/stat field 22) */
	struct span start;         /* when the process started */
	struct span pstart;        /* fork: when the parent started */
	struct span at;            /* when the event happened; SPAN_UNKNOWN from a scan */
	uid_t uid;
	gid_t gid;
	pid_t ns_pid;              /* its pid in its own pid namespace (0: not known) */
	uint64_t mnt_ns;           /* its mount namespace's inode (0: not known) */
	char comm[LOG_COMM_LEN];   /* escaped by the event source (log_escape(), reversible) */
};

/* ---- configuration and counters ---- */

struct policy_config {
	const char *map_dir;          /* for messages */
	const char *archive_dir;
	uint64_t retention_ns;        /* how long an exited process's map stays */
	uint64_t max_map_bytes;       /* larger maps are neither copied nor archived */
	/* Bytes of data each uid may have copied: per second, and saved up at most (0: no bound). */
	uint64_t copy_rate, copy_burst;
	/* Copies of more data go to the worker (0: none does)... */
	uint64_t defer_copy_bytes;
	/* ...and so do a uid's copies past this many bytes a second in the event loop (0: no bound). */
	uint64_t loop_copy_rate;
	/* Maps without a process retained per owner at most (0: ORPHANS_PER_UID). */
	size_t orphans_per_uid;
	/* Exited processes' maps retained per owner at most (0: RETAINED_PER_UID). */
	size_t retained_per_uid;
	bool dry_run;                 /* decide and say so; change nothing */
};

/*
 * Anyone can make perf-<pid>.map names for pids no process holds, by the
 * thousand: each retained costs an entry and its archiving. Past this many
 * of one owner's, more are left where they are (see on_map()).
 */
#define ORPHANS_PER_UID 1024
/*
 * A user can end short-lived processes with maps by the hundred thousand.
 * Past this many of one owner's exited maps waiting, more are archived at
 * once (retention 0): nothing is lost, the excess only leaves its path early.
 */
#define RETAINED_PER_UID 8192

/*
 * Fork copies' latency, from the fork to the map linked at the child's path,
 * in these buckets (upper bounds, nanoseconds); one more counts the slower.
 * The metrics endpoint shows them as a histogram (metrics_text.c).
 */
#define POLICY_COPY_BUCKETS 10
#define POLICY_COPY_BOUNDS_NS { 500000, 1000000, 2500000, 5000000, 10000000, 25000000, \
				50000000, 100000000, 250000000, 1000000000 }

/*
 * The policy's counters: every one only grows. Those `perfmapctl status`
 * reports are declared in perfmapd_counters.def (its PERFMAPD_POLICY rows:
 * the field, its status key and metric, what it counts); the rest here.
 */
struct policy_stats {
#define PERFMAPD_POLICY(key, field, ...) uint64_t field;
#include "perfmapd_counters.def"
	/* Copies with an exact fork-to-link time, per bucket (not cumulative), and their sum. */
	uint64_t copy_latency[POLICY_COPY_BUCKETS + 1];
	uint64_t copy_latency_sum_ns;
	uint64_t ns_copies;            /* fork copies made in a child's own namespace */
	uint64_t retained_total;       /* exited processes' maps kept for --retention */
};

/* ---- the policy ---- */

struct policy;

struct policy *policy__new(const struct policy_config *cfg, struct mapstore store);
void policy__free(struct policy *p);
/*
 * What a SIGHUP may change: the retention of maps of processes that exit
 * from now on (those retained keep their deadlines), and the copy budget.
 */
void policy__set_limits(struct policy *p, uint64_t retention_ns, uint64_t copy_rate,
			uint64_t copy_burst);

/*
 * Handle one event. @now_ns is CLOCK_BOOTTIME, like every time the policy
 * keeps: the events' times are on it.
 */
void policy__event(struct policy *p, const struct policy_event *ev, uint64_t now_ns);
/*
 * A map appeared at @pid's path (the index saw it). When no known process
 * holds the pid, it is handled as a map a listing found; else nothing.
 */
void policy__map_appeared(struct policy *p, pid_t pid, uint64_t now_ns);
/*
 * A copy the store made off the event loop (copy_defer) is done: @err and
 * @res as copy_create() or copy_append() would have returned them.
 */
void policy__copy_done(struct policy *p, pid_t child, uint64_t ticket, int err,
		       const struct copy_result *res, uint64_t now_ns);
/* Timers: copies waiting for a runtime to finish its line, retention, busy retries. */
void policy__tick(struct policy *p, uint64_t now_ns);
/*
 * When policy__tick() must run next at the latest, if sooner than the
 * caller's regular tick (a busy move retried within milliseconds), else
 * UINT64_MAX.
 */
uint64_t policy__next_deadline(const struct policy *p);

/*
 * A scan of /proc: mark every process still there, then end the unmarked
 * ones; a scan cut short clears the marks with @end_unmarked false.
 */
bool policy__mark(struct policy *p, pid_t pid, uint64_t start_ticks);
void policy__sweep(struct policy *p, bool end_unmarked, uint64_t now_ns);

const struct policy_stats *policy__stats(const struct policy *p);
/*
 * A profiler asks that (@pid, @start_ticks)'s map stay at its path until it
 * releases it: its exit's retention lasts as long as the hold. Each hold is
 * released once; -ENOSPC when HELD_MAX processes are held, -EINVAL for no
 * start time (a hold names a process, never a pid alone).
 */
int policy__hold(struct policy *p, pid_t pid, uint64_t start_ticks);
#define HELD_MAX 65536   /* processes held at once, by all holders together */
void policy__release(struct policy *p, pid_t pid, uint64_t start_ticks);
/* Held: @start_ticks 0 matches any process at @pid. */
bool policy__is_held(const struct policy *p, pid_t pid, uint64_t start_ticks);
size_t policy__held(const struct policy *p);
size_t policy__processes(const struct policy *p);
/* Exited processes' maps waiting at their paths. */
size_t policy__retained(const struct policy *p);
/* How long an exited process's map stays at its path now (as a SIGHUP left it). */
uint64_t policy__retention_ns(const struct policy *p);
/*
 * A runtime maps its first code before it names it: a process is judged to
 * run JIT code without a map only this long after its first region.
 */
#define JIT_GRACE_NS (2000ull * 1000000)

/*
 * The kernel reported an executable mapping [@addr, @addr + @len) in @pid:
 * anonymous (named by perf-<pid>.map) or memfd-backed (@memfd). A process
 * with such code and no map when JIT_GRACE_NS is over is said to lose its
 * symbols, once. An anonymous one's new part is kept for the doctor
 * (jitregions.h: bounded per process and in all), until its exec or exit.
 */
void policy__exec_mapping(struct policy *p, pid_t pid, uint64_t addr, uint64_t len, bool memfd,
			  uint64_t now_ns);
/*
 * What /proc/<pid>/maps shows of (@pid, @start_ticks)'s JIT code now: the
 * gaps the kernel's reports leave (before the agent started, or records lost).
 */
void policy__exec_mappings_found(struct policy *p, pid_t pid, uint64_t start_ticks,
				 uint32_t regions, uint64_t jit_bytes, uint64_t memfd_bytes,
				 uint64_t now_ns);
struct policy_jit {
	pid_t pid;
	uint32_t regions;
	uint64_t jit_bytes, memfd_bytes;
	bool lost;
	char comm[LOG_COMM_LEN];
	uint32_t regions_kept;         /* its anonymous regions kept (policy__for_each_jit_region) */
	uint64_t regions_not_kept;     /* ... and the parts reported past a bound */
};
/* Processes with JIT code, to @fn; the number with no map now in @lost. */
void policy__for_each_jit(const struct policy *p, void (*fn)(const struct policy_jit *j, void *ctx),
			  void *ctx, uint64_t *lost);
/* @pid's JIT code into @j: false when the table knows none (no process, or no code seen). */
bool policy__jit_of(const struct policy *p, pid_t pid, struct policy_jit *j);
/* @pid's anonymous executable regions kept, to @fn in address order. */
void policy__for_each_jit_region(const struct policy *p, pid_t pid,
				 void (*fn)(uint64_t addr, uint64_t len, void *ctx), void *ctx);
/* Regions kept for all processes now (at most JITREGIONS_MAX). */
size_t policy__jit_regions_kept(const struct policy *p);
/* ---- jitdumps (policy_jitdump.c) ---- */

enum jitdump_target {
	JITDUMP_TARGET_OK,        /* its map may name the dump's code for it */
	JITDUMP_TARGET_WAIT,      /* a copy into its map is under way: ask again later */
	JITDUMP_TARGET_GONE,      /* no process the table knows holds the pid */
	JITDUMP_TARGET_REFUSED,   /* another uid's, or not the producer's nor its descendant */
};
/*
 * May records of the dump of (@owner, @owner_start), a file of @uid, name
 * code in @pid's map? OK with the process's @start_ticks.
 */
enum jitdump_target policy__jitdump_target(const struct policy *p, pid_t owner,
					   uint64_t owner_start, pid_t pid, uid_t uid,
					   uint64_t *start_ticks);
/*
 * May the map @mi at (@pid, @start_ticks)'s path take a dump's functions
 * after its lines? Only perfmapd's copy of its parent's, unwritten since.
 */
bool policy__jitdump_adopt(const struct policy *p, pid_t pid, uint64_t start_ticks,
			   const struct map_info *mi);
/* (@pid, @start_ticks) produces a jitdump: its code is not lost, whatever its map. */
void policy__jitdump_found(struct policy *p, pid_t pid, uint64_t start_ticks);

/* Calls @fn for every tracked process of ours (not foreign). */
void policy__for_each_pid(const struct policy *p, void (*fn)(pid_t pid, void *ctx), void *ctx);

#endif /* PERFMAPD_POLICY_H */

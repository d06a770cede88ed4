/* The Prometheus text exposition of the agent's counters: a pure renderer, no sockets. */
#ifndef PERFMAPD_METRICS_TEXT_H
#define PERFMAPD_METRICS_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"

#define METRICS_REASONS_MAX 16

/* A count by reason, its label value given by the piece that counts it. */
struct metrics_reason {
	const char *reason;
	uint64_t n;
};

/* The agent process itself, as Prometheus's client libraries name it (process_*). */
struct metrics_process {
	bool known;                    /* /proc/self could be read */
	uint64_t cpu_ticks;            /* user + system, in clock ticks */
	uint64_t ticks_per_s;
	uint64_t start_time_s;         /* since the epoch */
	uint64_t rss_bytes, vm_bytes;
	uint64_t open_fds, max_fds;
};

/* What the exposition shows: read from the agent's pieces by metrics.c, in the loop's thread. */
struct metrics_values {
	const char *version;           /* perfmapd's, as --version prints it */
	const char *bpf;               /* BPF program kind loaded: tp_btf or raw_tp */
	const char *exec_maps;         /* how executable mappings are learned */
	uint64_t uptime_s;
	uint64_t processes;            /* tracked now */
	uint64_t events_fork, events_exec, events_exit;
	uint64_t events_dropped;       /* the ring buffer was full */
	uint64_t resyncs;              /* scans of /proc after drops */
	uint64_t copies_created, copies_appended, copies_by_runtime;
	uint64_t copies_skipped_exec, copies_over_budget;
	uint64_t copies_queue_full, copies_resource_deferred;  /* put off, tried again */
	uint64_t copy_bytes, copy_entries_left_out;
	uint64_t copy_latency[POLICY_COPY_BUCKETS + 1];  /* per bucket, not cumulative */
	uint64_t copy_latency_sum_ns;
	uint64_t retained;             /* exited processes' maps at their paths now */
	uint64_t retention_s;          /* --retention, as SIGHUP left it */
	uint64_t held_processes;       /* profilers hold now (hold.c) */
	uint64_t held_past_retention;  /* exited maps kept past their retention for a holder */
	uint64_t archived, archive_evicted, archive_files, archive_bytes, archive_max_bytes;
	bool mirroring;
	uint64_t mirrors, mirrors_started, mirror_bytes, mirror_behind_bytes;
	uint64_t mirror_lag_p99_ms, mirror_lag_max_ms;
	/* Container maps refused (symlink, FIFO, sparse, ...): a hostile container's mark. */
	struct metrics_reason ns_refused[METRICS_REASONS_MAX];
	size_t n_ns_refused;
	/* Nothing written for a process in its namespace's directory: not its, unmapped ids, denied. */
	struct metrics_reason ns_writes_refused[METRICS_REASONS_MAX];
	size_t n_ns_writes_refused;
	uint64_t mirror_lines_dropped; /* lines of containers' maps that are no entry */
	/* Host map paths refused: traps left alone, another uid's map at a holder's path. */
	uint64_t host_traps, squatted_moved, squatted_left, too_large;
	uint64_t exec_archived, exec_dropped, exec_kept, stale_archived, ambiguous_kept;
	uint64_t ns_ambiguous;         /* mirrors: a container's map whose writer could not be told */
	uint64_t by_index, by_identity, by_mappings;
	uint64_t jit_processes, lost_symbol_processes, lost_symbols_total, lost_symbols_named;
	uint64_t err_policy, err_copy, err_archive, err_ns_copy, err_exec_maps_lost;
	/* This endpoint's connections by kind of peer: open now, and refused at their accept. */
	struct metrics_reason http_open[METRICS_REASONS_MAX], http_refused[METRICS_REASONS_MAX];
	size_t n_http_open, n_http_refused;
	uint64_t http_expired_request, http_expired_answer;  /* closed at a deadline */
	struct metrics_process proc;
};

/* A buffer the exposition is written into; a line that does not fit is left out whole. */
struct metrics_text {
	char *buf;
	size_t len, cap;
	bool cut;                      /* a line was left out */
};

void metrics_text__init(struct metrics_text *m, char *buf, size_t cap);
/* "# HELP" and "# TYPE" lines of a family; @type is counter, gauge or histogram. */
void metrics_text__family(struct metrics_text *m, const char *name, const char *type, const char *help);
/* One sample; @label may be NULL (no labels), @value is escaped. */
void metrics_text__sample(struct metrics_text *m, const char *name, const char *label, const char *value,
		  uint64_t v);
/* A sample of a fractional value (seconds). */
void metrics_text__sample_f(struct metrics_text *m, const char *name, double v);
/*
 * A histogram family: @counts per bucket (not cumulative) of @n upper bounds
 * @bounds, and one more past the last; written cumulative with _sum and _count.
 */
void metrics_text__histogram(struct metrics_text *m, const char *name, const char *help, const double *bounds,
		     const uint64_t *counts, size_t n, double sum);

/* The whole exposition of @v into @buf (NUL-terminated); its length. */
size_t metrics_render(const struct metrics_values *v, char *buf, size_t cap);

#endif /* PERFMAPD_METRICS_TEXT_H */

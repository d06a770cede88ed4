/* The Prometheus text exposition of the agent's counters: a pure renderer, no sockets. */
#ifndef PERFMAPD_METRICS_TEXT_H
#define PERFMAPD_METRICS_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"
#include "report/counters.h"

#define METRICS_REASONS_MAX 16

/* A count by a label value the endpoint names itself (a kind of peer). */
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

/*
 * What the exposition shows: the table's counters (report.c reads them) and
 * what the endpoint reads of itself (metrics.c), in the loop's thread.
 */
struct metrics_values {
	uint64_t v[PMC__COUNT];        /* perfmapd_counters.def's counters, by PMC_<key> */
	const char *version;           /* perfmapd's, as --version prints it */
	const char *bpf;               /* BPF program kind loaded: tp_btf or raw_tp */
	const char *exec_maps;         /* how executable mappings are learned */
	/* Fork copies' latency: per POLICY_COPY_BOUNDS_NS bucket (not cumulative), and the sum. */
	uint64_t copy_latency[POLICY_COPY_BUCKETS + 1];
	uint64_t copy_latency_sum_ns;
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

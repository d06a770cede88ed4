/*
 * The Prometheus text exposition format (version 0.0.4) of the agent's
 * counters. Names follow Prometheus's conventions: a perfmapd_ prefix,
 * _total on counters, seconds and bytes; labels name kinds, never pids.
 * The agent process's own are process_*, as every client library names them.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "report/metrics_text.h"

void metrics_text__init(struct metrics_text *m, char *buf, size_t cap)
{
	*m = (struct metrics_text){ .buf = buf, .cap = cap };
	if (cap)
		buf[0] = '\0';
}

/* A line, or nothing: a line cut in the middle would make the whole scrape unparsable. */
__attribute__((format(printf, 2, 3)))
static void line(struct metrics_text *m, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (m->len >= m->cap) {
		m->cut = true;
		return;
	}
	va_start(ap, fmt);
	n = vsnprintf(m->buf + m->len, m->cap - m->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= m->cap - m->len) {
		m->buf[m->len] = '\0';
		m->cut = true;
		return;
	}
	m->len += (size_t)n;
}

void metrics_text__family(struct metrics_text *m, const char *name, const char *type, const char *help)
{
	line(m, "# HELP %s %s\n", name, help);
	line(m, "# TYPE %s %s\n", name, type);
}

/* A label value as the format wants it: backslash, double quote and newline escaped. */
static void escape(const char *in, char *out, size_t len)
{
	size_t o = 0;

	for (; *in && o + 3 <= len; in++) {
		if (*in == '\\' || *in == '"') {
			out[o++] = '\\';
			out[o++] = *in;
		} else if (*in == '\n') {
			out[o++] = '\\';
			out[o++] = 'n';
		} else {
			out[o++] = *in;
		}
	}
	out[o] = '\0';
}

void metrics_text__sample(struct metrics_text *m, const char *name, const char *label, const char *value,
		  uint64_t v)
{
	char esc[256];

	if (!label) {
		line(m, "%s %llu\n", name, (unsigned long long)v);
		return;
	}
	escape(value ? value : "", esc, sizeof(esc));
	line(m, "%s{%s=\"%s\"} %llu\n", name, label, esc, (unsigned long long)v);
}

void metrics_text__sample_f(struct metrics_text *m, const char *name, double v)
{
	line(m, "%s %.9g\n", name, v);
}

void metrics_text__histogram(struct metrics_text *m, const char *name, const char *help, const double *bounds,
		     const uint64_t *counts, size_t n, double sum)
{
	uint64_t cum = 0;
	size_t i;

	metrics_text__family(m, name, "histogram", help);
	for (i = 0; i < n; i++) {
		cum += counts[i];
		line(m, "%s_bucket{le=\"%g\"} %llu\n", name, bounds[i], (unsigned long long)cum);
	}
	cum += counts[n];
	line(m, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
	line(m, "%s_sum %.9g\n", name, sum);
	line(m, "%s_count %llu\n", name, (unsigned long long)cum);
}

/* A family of one sample without labels. */
static void one(struct metrics_text *m, const char *name, const char *type, const char *help, uint64_t v)
{
	metrics_text__family(m, name, type, help);
	metrics_text__sample(m, name, NULL, NULL, v);
}

static void build_info(struct metrics_text *m, const struct metrics_values *v)
{
	char ver[64], bpf[64], exec[64];

	escape(v->version, ver, sizeof(ver));
	escape(v->bpf, bpf, sizeof(bpf));
	escape(v->exec_maps, exec, sizeof(exec));
	metrics_text__family(m, "perfmapd_build_info", "gauge",
		     "Always 1: perfmapd's version, the BPF program kind loaded and where executable mappings are learned.");
	line(m, "perfmapd_build_info{version=\"%s\",bpf=\"%s\",exec_maps=\"%s\"} 1\n", ver, bpf, exec);
}

static void events(struct metrics_text *m, const struct metrics_values *v)
{
	static const char n[] = "perfmapd_events_total";

	metrics_text__family(m, n, "counter", "Process events read from the BPF ring buffer, by kind.");
	metrics_text__sample(m, n, "kind", "fork", v->events_fork);
	metrics_text__sample(m, n, "kind", "exec", v->events_exec);
	metrics_text__sample(m, n, "kind", "exit", v->events_exit);
	one(m, "perfmapd_events_dropped_total", "counter",
	    "Events the BPF side could not queue: the ring buffer was full.", v->events_dropped);
	one(m, "perfmapd_resyncs_total", "counter",
	    "Scans of /proc after dropped events.", v->resyncs);
	one(m, "perfmapd_processes", "gauge", "Processes tracked.", v->processes);
}

static void copies(struct metrics_text *m, const struct metrics_values *v)
{
	static const double bounds[POLICY_COPY_BUCKETS] = { 0.0005, 0.001, 0.0025, 0.005, 0.01,
							     0.025, 0.05, 0.1, 0.25, 1 };
	static const char n[] = "perfmapd_fork_copies_total";
	static const char s[] = "perfmapd_fork_copies_skipped_total";

	metrics_text__family(m, n, "counter",
		     "Forked children given their parent's map entries, by kind: a new map, appended to the child's own, or copied by the runtime itself.");
	metrics_text__sample(m, n, "kind", "created", v->copies_created);
	metrics_text__sample(m, n, "kind", "appended", v->copies_appended);
	metrics_text__sample(m, n, "kind", "by_runtime", v->copies_by_runtime);
	metrics_text__family(m, s, "counter",
		     "Fork copies not made, by reason: the child exec'd first, or its uid's copy budget was spent.");
	metrics_text__sample(m, s, "reason", "exec", v->copies_skipped_exec);
	metrics_text__sample(m, s, "reason", "over_budget", v->copies_over_budget);
	metrics_text__family(m, "perfmapd_fork_copies_put_off_total", "counter",
		     "Fork copies put off and tried again, by reason: the worker threads' queue (or the uid's share of it) was full, or the agent was out of file descriptors or memory.");
	metrics_text__sample(m, "perfmapd_fork_copies_put_off_total", "reason", "queue_full",
		     v->copies_queue_full);
	metrics_text__sample(m, "perfmapd_fork_copies_put_off_total", "reason", "resources",
		     v->copies_resource_deferred);
	metrics_text__histogram(m, "perfmapd_fork_copy_seconds",
			"Time from a fork to the child's new map at its path, of copies whose times are exact.",
			bounds, v->copy_latency, POLICY_COPY_BUCKETS, v->copy_latency_sum_ns / 1e9);
	one(m, "perfmapd_fork_copy_bytes_total", "counter", "Bytes written by fork copies.",
	    v->copy_bytes);
	one(m, "perfmapd_fork_copy_entries_left_out_total", "counter",
	    "Entries naming memory a child did not inherit, left out of its copy.",
	    v->copy_entries_left_out);
}

static void maps(struct metrics_text *m, const struct metrics_values *v)
{
	one(m, "perfmapd_retained_maps", "gauge",
	    "Exited processes' maps kept at their paths for --retention.", v->retained);
	one(m, "perfmapd_retention_seconds", "gauge",
	    "How long an exited process's map stays at its path (--retention; SIGHUP changes it).",
	    v->retention_s);
	one(m, "perfmapd_held_processes", "gauge",
	    "Processes whose maps a profiler holds at their paths until its report (perfmapctl profile).",
	    v->held_processes);
	one(m, "perfmapd_maps_held_past_retention_total", "counter",
	    "Exited processes' maps kept past their retention because a profiler held them.",
	    v->held_past_retention);
	one(m, "perfmapd_archived_maps_total", "counter", "Maps stored in the archive.", v->archived);
	one(m, "perfmapd_archive_evicted_maps_total", "counter",
	    "Archived maps the --archive-max-bytes quota deleted.", v->archive_evicted);
	one(m, "perfmapd_archive_files", "gauge", "Maps the archive holds.", v->archive_files);
	one(m, "perfmapd_archive_bytes", "gauge", "Bytes the archive holds.", v->archive_bytes);
	one(m, "perfmapd_archive_max_bytes", "gauge", "The archive's quota (--archive-max-bytes).",
	    v->archive_max_bytes);
}

static void mirrors(struct metrics_text *m, const struct metrics_values *v)
{
	one(m, "perfmapd_mirroring", "gauge",
	    "1 when maps of processes in other namespaces (containers) are mirrored, 0 with --no-mirrors.",
	    v->mirroring);
	one(m, "perfmapd_mirrors", "gauge", "Container maps mirrored to the map directory now.",
	    v->mirrors);
	one(m, "perfmapd_mirrors_started_total", "counter", "Mirrors started.", v->mirrors_started);
	one(m, "perfmapd_mirror_bytes_total", "counter", "Bytes written to mirrors.", v->mirror_bytes);
	one(m, "perfmapd_mirror_behind_bytes", "gauge",
	    "Bytes written in containers not yet mirrored.", v->mirror_behind_bytes);
	metrics_text__family(m, "perfmapd_mirror_lag_p99_seconds", "gauge",
		     "99th percentile of the recent lag from a write in a container to its mirror.");
	metrics_text__sample_f(m, "perfmapd_mirror_lag_p99_seconds", v->mirror_lag_p99_ms / 1e3);
	metrics_text__family(m, "perfmapd_mirror_lag_max_seconds", "gauge",
		     "Largest lag from a write in a container to its mirror.");
	metrics_text__sample_f(m, "perfmapd_mirror_lag_max_seconds", v->mirror_lag_max_ms / 1e3);
}

static void refusals(struct metrics_text *m, const struct metrics_values *v)
{
	static const char c[] = "perfmapd_container_maps_refused_total";
	static const char h[] = "perfmapd_host_maps_refused_total";
	static const char w[] = "perfmapd_container_writes_refused_total";
	size_t i;

	metrics_text__family(m, c, "counter",
		     "Maps in containers not mirrored, by reason: a symlink, not a regular file, hard-linked, over --max-map-bytes, sparse, an unsafe map directory, FUSE, an unreachable root, another uid's.");
	for (i = 0; i < v->n_ns_refused; i++)
		metrics_text__sample(m, c, "reason", v->ns_refused[i].reason, v->ns_refused[i].n);
	metrics_text__family(m, w, "counter",
		     "Nothing created or removed for a process in its container's map directory, by reason: a directory its user namespace does not own (a host path bound there), ids the namespace does not map, not allowed to the process itself, the process gone. Its fork copy went to its mirror alone.");
	for (i = 0; i < v->n_ns_writes_refused; i++)
		metrics_text__sample(m, w, "reason", v->ns_writes_refused[i].reason, v->ns_writes_refused[i].n);
	metrics_text__family(m, "perfmapd_mirror_lines_dropped_total", "counter",
		     "Lines of containers' maps that are no entry: neither mirrored nor copied.");
	metrics_text__sample(m, "perfmapd_mirror_lines_dropped_total", NULL, NULL, v->mirror_lines_dropped);
	metrics_text__family(m, h, "counter",
		     "Map paths in --map-dir the agent would not touch, by reason: a trap with no process (symlink, hard link, not a file), another uid's map at a new holder's path (moved aside, or left when it could not be), over --max-map-bytes.");
	metrics_text__sample(m, h, "reason", "trap", v->host_traps);
	metrics_text__sample(m, h, "reason", "squatted_moved", v->squatted_moved);
	metrics_text__sample(m, h, "reason", "squatted_left", v->squatted_left);
	metrics_text__sample(m, h, "reason", "too_large", v->too_large);
}

static void decisions(struct metrics_text *m, const struct metrics_values *v)
{
	static const char n[] = "perfmapd_decisions_total";
	static const char e[] = "perfmapd_decisions_by_evidence_total";

	metrics_text__family(m, n, "counter",
		     "Exec and pid-reuse decisions by kind: the old image's map archived, only the agent's copy dropped, the new image's own kept, an earlier holder's archived, or the evidence could not tell and the map was kept.");
	metrics_text__sample(m, n, "kind", "exec_archived", v->exec_archived);
	metrics_text__sample(m, n, "kind", "exec_dropped", v->exec_dropped);
	metrics_text__sample(m, n, "kind", "exec_kept", v->exec_kept);
	metrics_text__sample(m, n, "kind", "stale_archived", v->stale_archived);
	metrics_text__sample(m, n, "kind", "ambiguous_kept", v->ambiguous_kept);
	metrics_text__sample(m, n, "kind", "container_ambiguous", v->ns_ambiguous);
	metrics_text__family(m, e, "counter", "Which evidence settled each decision.");
	metrics_text__sample(m, e, "evidence", "index", v->by_index);
	metrics_text__sample(m, e, "evidence", "identity", v->by_identity);
	metrics_text__sample(m, e, "evidence", "mappings", v->by_mappings);
}

static void jit(struct metrics_text *m, const struct metrics_values *v)
{
	one(m, "perfmapd_jit_processes", "gauge", "Processes running JIT code.", v->jit_processes);
	one(m, "perfmapd_lost_symbol_processes", "gauge",
	    "Processes running JIT code with no map now: perf shows their JIT frames as hex.",
	    v->lost_symbol_processes);
	one(m, "perfmapd_lost_symbols_total", "counter",
	    "Processes found running JIT code with no map.", v->lost_symbols_total);
	one(m, "perfmapd_lost_symbols_named_later_total", "counter",
	    "Of those, processes whose map appeared later.", v->lost_symbols_named);
}

static void errors(struct metrics_text *m, const struct metrics_values *v)
{
	static const char n[] = "perfmapd_errors_total";

	metrics_text__family(m, n, "counter",
		     "Errors by kind: the policy's moves and removals, fork copies, archive stores, copies in containers, mmap reports lost.");
	metrics_text__sample(m, n, "kind", "policy", v->err_policy);
	metrics_text__sample(m, n, "kind", "fork_copy", v->err_copy);
	metrics_text__sample(m, n, "kind", "archive", v->err_archive);
	metrics_text__sample(m, n, "kind", "container_copy", v->err_ns_copy);
	metrics_text__sample(m, n, "kind", "exec_maps_lost", v->err_exec_maps_lost);
}

/* This endpoint's own connections: who holds its slots, and who was turned away. */
static void http(struct metrics_text *m, const struct metrics_values *v)
{
	static const char o[] = "perfmapd_http_connections";
	static const char r[] = "perfmapd_http_connections_refused_total";
	static const char e[] = "perfmapd_http_connections_expired_total";
	size_t i;

	metrics_text__family(m, o, "gauge",
		     "Connections to this endpoint open now, by kind of peer: root, system (a uid below 1000), user (any other uid), remote (in another network namespace or host: its uid is not known).");
	for (i = 0; i < v->n_http_open; i++)
		metrics_text__sample(m, o, "peer", v->http_open[i].reason, v->http_open[i].n);
	metrics_text__family(m, r, "counter",
		     "Connections to this endpoint closed at their accept, by kind of peer: the slots of its kind, or its uid's or address's share of them, were taken; gone: the peer had closed its end.");
	for (i = 0; i < v->n_http_refused; i++)
		metrics_text__sample(m, r, "peer", v->http_refused[i].reason, v->http_refused[i].n);
	metrics_text__family(m, e, "counter",
		     "Connections to this endpoint closed at a deadline, by phase: no whole request in time after the accept, or the answer not read in time after the request.");
	metrics_text__sample(m, e, "phase", "request", v->http_expired_request);
	metrics_text__sample(m, e, "phase", "answer", v->http_expired_answer);
}

/* The names every Prometheus client library exports for its process: dashboards expect them. */
static void process(struct metrics_text *m, const struct metrics_process *p)
{
	if (!p->known)
		return;
	metrics_text__family(m, "process_cpu_seconds_total", "counter",
		     "Total user and system CPU time spent in seconds.");
	metrics_text__sample_f(m, "process_cpu_seconds_total",
		       p->ticks_per_s ? (double)p->cpu_ticks / (double)p->ticks_per_s : 0);
	one(m, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
	    p->rss_bytes);
	one(m, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
	    p->vm_bytes);
	one(m, "process_open_fds", "gauge", "Number of open file descriptors.", p->open_fds);
	one(m, "process_max_fds", "gauge", "Maximum number of open file descriptors.", p->max_fds);
	one(m, "process_start_time_seconds", "gauge",
	    "Start time of the process since unix epoch in seconds.", p->start_time_s);
}

size_t metrics_render(const struct metrics_values *v, char *buf, size_t cap)
{
	struct metrics_text m;

	metrics_text__init(&m, buf, cap);
	build_info(&m, v);
	one(&m, "perfmapd_uptime_seconds", "gauge", "Seconds since the agent started.", v->uptime_s);
	events(&m, v);
	copies(&m, v);
	maps(&m, v);
	mirrors(&m, v);
	refusals(&m, v);
	decisions(&m, v);
	jit(&m, v);
	errors(&m, v);
	http(&m, v);
	process(&m, &v->proc);
	return m.len;
}

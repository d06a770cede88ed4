/*
 * The Prometheus text exposition format (version 0.0.4) of the agent's
 * counters. Names follow Prometheus's conventions: a perfmapd_ prefix,
 * _total on counters, seconds and bytes; labels name kinds, never pids.
 * The agent process's own are process_*, as every client library names them.
 * Which families there are, their HELP and their samples: the counter table
 * (perfmapd_counters.def); a few the endpoint reads itself.
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

static void build_info(struct metrics_text *m, const struct perfmapd_family *f,
		       const struct metrics_values *v)
{
	char ver[64], bpf[64], exec[64];

	escape(v->version ? v->version : "", ver, sizeof(ver));
	escape(v->bpf ? v->bpf : "", bpf, sizeof(bpf));
	escape(v->exec_maps ? v->exec_maps : "", exec, sizeof(exec));
	metrics_text__family(m, f->name, "gauge", f->help);
	line(m, "%s{version=\"%s\",bpf=\"%s\",exec_maps=\"%s\"} 1\n", f->name, ver, bpf, exec);
}

/* The buckets' bounds in seconds, from the policy's own in nanoseconds. */
static void copy_seconds(struct metrics_text *m, const struct perfmapd_family *f,
			 const struct metrics_values *v)
{
	static const uint64_t bounds_ns[POLICY_COPY_BUCKETS] = POLICY_COPY_BOUNDS_NS;
	double bounds[POLICY_COPY_BUCKETS];

	for (size_t i = 0; i < POLICY_COPY_BUCKETS; i++)
		bounds[i] = bounds_ns[i] / 1e9;
	metrics_text__histogram(m, f->name, f->help, bounds, v->copy_latency, POLICY_COPY_BUCKETS,
				v->copy_latency_sum_ns / 1e9);
}

static void by_reason(struct metrics_text *m, const struct perfmapd_family *f,
		      const struct metrics_reason *r, size_t n)
{
	metrics_text__family(m, f->name, counters_type_name(f->type), f->help);
	for (size_t i = 0; i < n; i++)
		metrics_text__sample(m, f->name, f->label, r[i].reason, r[i].n);
}

/* The agent process itself, under the names every client library gives them: none unread. */
static void process(struct metrics_text *m, const struct perfmapd_family *f,
		    enum perfmapd_family_id id, const struct metrics_process *p)
{
	const char *type = counters_type_name(f->type);

	if (!p->known)
		return;
	switch (id) {
	case PMF_process_cpu_seconds_total:
		metrics_text__family(m, f->name, type, f->help);
		metrics_text__sample_f(m, f->name,
				       p->ticks_per_s ? (double)p->cpu_ticks / (double)p->ticks_per_s : 0);
		return;
	case PMF_process_resident_memory_bytes: one(m, f->name, type, f->help, p->rss_bytes); return;
	case PMF_process_virtual_memory_bytes: one(m, f->name, type, f->help, p->vm_bytes); return;
	case PMF_process_open_fds: one(m, f->name, type, f->help, p->open_fds); return;
	case PMF_process_max_fds: one(m, f->name, type, f->help, p->max_fds); return;
	case PMF_process_start_time_seconds: one(m, f->name, type, f->help, p->start_time_s); return;
	default: return;
	}
}

/* A family whose samples the endpoint reads itself (PMS_OWN). */
static void own(struct metrics_text *m, enum perfmapd_family_id id, const struct metrics_values *v)
{
	const struct perfmapd_family *f = &perfmapd_families[id];

	switch (id) {
	case PMF_perfmapd_build_info:
		build_info(m, f, v);
		return;
	case PMF_perfmapd_fork_copy_seconds:
		copy_seconds(m, f, v);
		return;
	case PMF_perfmapd_http_connections:
		by_reason(m, f, v->http_open, v->n_http_open);
		return;
	case PMF_perfmapd_http_connections_refused_total:
		by_reason(m, f, v->http_refused, v->n_http_refused);
		return;
	case PMF_perfmapd_http_connections_expired_total: {
		const struct metrics_reason phases[] = {
			{ "request", v->http_expired_request }, { "answer", v->http_expired_answer },
		};

		by_reason(m, f, phases, 2);
		return;
	}
	default:
		process(m, f, id, &v->proc);
		return;
	}
}

/* A family of the table's counters: one sample each, in the table's order. */
static void from_counters(struct metrics_text *m, enum perfmapd_family_id id,
			  const struct metrics_values *v)
{
	const struct perfmapd_family *f = &perfmapd_families[id];

	metrics_text__family(m, f->name, counters_type_name(f->type), f->help);
	for (int i = 0; i < PMC__COUNT; i++) {
		const struct perfmapd_counter *c = &perfmapd_counters[i];

		if (c->family != id)
			continue;
		if (c->unit == PMU_MS)
			metrics_text__sample_f(m, f->name, v->v[i] / 1e3);
		else if (f->label[0])
			metrics_text__sample(m, f->name, f->label, c->label, v->v[i]);
		else
			metrics_text__sample(m, f->name, NULL, NULL, v->v[i]);
	}
}

size_t metrics_render(const struct metrics_values *v, char *buf, size_t cap)
{
	struct metrics_text m;

	metrics_text__init(&m, buf, cap);
	for (int id = PMF_NONE + 1; id < PMF__COUNT; id++) {
		if (perfmapd_families[id].samples == PMS_OWN)
			own(&m, id, v);
		else
			from_counters(&m, id, v);
	}
	return m.len;
}

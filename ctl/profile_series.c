/*
 * A period's samples as series by workload, labelled for Pyroscope and
 * Parca: what `perfmapctl profile --push` sends one pprof each for.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile_pprof.h"
#include "profile_series.h"

/* Kubernetes' pod uid in a cgroup path: "pod<uid>" (cgroupfs) or "-pod<uid_with_underscores>.slice" (systemd). */
static bool pod_uid_of(const char *cgroup, char *uid, size_t len)
{
	const char *p = cgroup;
	size_t n;

	if (!cgroup || !strstr(cgroup, "kubepods"))
		return false;
	while ((p = strstr(p, "pod"))) {
		p += 3;
		n = strspn(p, "0123456789abcdef-_");
		if (n == 36 && n < len) {
			for (size_t i = 0; i < n; i++)
				uid[i] = p[i] == '_' ? '-' : p[i];
			uid[n] = '\0';
			return true;
		}
	}
	return false;
}

/* The innermost systemd service a cgroup path names ("/system.slice/nginx.service" -> "nginx.service"). */
static bool unit_of(const char *cgroup, char *unit, size_t len)
{
	const char *p, *end, *best = NULL;
	size_t bestn = 0;

	for (p = cgroup; p && *p; p = *end ? end + 1 : end) {
		end = strchrnul(p, '/');
		if (end - p > 8 && !memcmp(end - 8, ".service", 8)) {
			best = p;
			bestn = (size_t)(end - p);
		}
	}
	if (!best || bestn >= len)
		return false;
	memcpy(unit, best, bestn);
	unit[bestn] = '\0';
	return true;
}

/* @s copied into @buf at *@off, or NULL when it does not fit. */
static const char *put(char *buf, size_t len, size_t *off, const char *s)
{
	size_t n = strlen(s) + 1;
	char *d;

	if (*off + n > len)
		return NULL;
	d = memcpy(buf + *off, s, n);
	*off += n;
	return d;
}

void prof_workload_of(const char *exe, const char *cgroup, const char *container,
		      struct prof_workload *out, char *buf, size_t len)
{
	char tmp[256], id[16];
	const char *slash;
	size_t off = 0;

	*out = (struct prof_workload){ 0 };
	if (container) {
		snprintf(id, sizeof(id), "%.12s", container);
		out->container = put(buf, len, &off, id);
	}
	if (cgroup) {
		out->cgroup = put(buf, len, &off, cgroup);
		if (pod_uid_of(cgroup, tmp, sizeof(tmp)))
			out->pod_uid = put(buf, len, &off, tmp);
		if (!container && unit_of(cgroup, tmp, sizeof(tmp)))
			out->unit = put(buf, len, &off, tmp);
	}
	if (out->pod_uid)
		snprintf(tmp, sizeof(tmp), "pod:%s", out->pod_uid);
	else if (out->container)
		snprintf(tmp, sizeof(tmp), "container:%s", out->container);
	else if (out->unit)
		snprintf(tmp, sizeof(tmp), "%s", out->unit);
	else {
		slash = exe ? strrchr(exe, '/') : NULL;
		snprintf(tmp, sizeof(tmp), "%s", slash ? slash + 1 : exe && *exe ? exe : "unknown");
	}
	out->service = put(buf, len, &off, tmp);
	if (!out->service)
		out->service = "unknown";
}

bool prof_label_name_ok(const char *name)
{
	if (!name || !*name || !((*name >= 'a' && *name <= 'z') || (*name >= 'A' && *name <= 'Z') ||
				 *name == '_'))
		return false;
	return strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") ==
	       strlen(name);
}

int prof_label_parse(const char *kv, struct prof_label *out)
{
	const char *eq = strchr(kv, '=');

	*out = (struct prof_label){ 0 };
	if (!eq || !eq[1] || strlen(eq + 1) > 1024)
		return -EINVAL;
	out->name = strndup(kv, (size_t)(eq - kv));
	if (!out->name)
		return -ENOMEM;
	/* __name__ says which profile it is: perfmapctl's to set, not a label's. */
	if (!prof_label_name_ok(out->name) || !strncmp(out->name, "__", 2)) {
		free(out->name);
		out->name = NULL;
		return -EINVAL;
	}
	out->value = strdup(eq + 1);
	if (!out->value) {
		free(out->name);
		out->name = NULL;
		return -ENOMEM;
	}
	return 0;
}

static int strcmp_null(const char *a, const char *b)
{
	if (!a || !b)
		return !!a - !!b;
	return strcmp(a, b);
}

static int workload_cmp(const struct prof_workload *a, const struct prof_workload *b)
{
	int c;

	if (a == b)
		return 0;
	if ((c = strcmp_null(a->service, b->service)) || (c = strcmp_null(a->container, b->container)) ||
	    (c = strcmp_null(a->pod_uid, b->pod_uid)) || (c = strcmp_null(a->unit, b->unit)))
		return c;
	return strcmp_null(a->cgroup, b->cgroup);
}

struct order {
	size_t i;
	const struct prof_workload *wl;
};

static int order_cmp(const void *a, const void *b)
{
	const struct order *x = a, *y = b;
	int c = workload_cmp(x->wl, y->wl);

	return c ? c : (x->i > y->i) - (x->i < y->i);
}

static int label_cmp(const void *a, const void *b)
{
	return strcmp(((const struct prof_label *)a)->name, ((const struct prof_label *)b)->name);
}

/*
 * A label's value as the servers take it: valid UTF-8 without control
 * characters, at most PROF_LABEL_VALUE_MAX bytes. An executable's or a
 * cgroup's name is any local user's to choose, and one value a server
 * refuses would have the whole period's request refused.
 */
char *prof_label_value(const char *v)
{
	size_t n = strlen(v), o = 0, k;
	char *out = malloc(n + 1);

	if (!out)
		return NULL;
	for (size_t i = 0; i < n && o < PROF_LABEL_VALUE_MAX;) {
		k = prof_utf8_len((const unsigned char *)v + i);
		if (!k || (k == 1 && ((unsigned char)v[i] < 0x20 || v[i] == 0x7f))) {
			out[o++] = '_';
			i++;
			continue;
		}
		if (o + k > PROF_LABEL_VALUE_MAX)
			break;
		memcpy(out + o, v + i, k);
		o += k;
		i += k;
	}
	out[o] = '\0';
	return out;
}

/* @name=@value into @s's labels, over a label of that name given before; NULL @value: none. */
static int label_set(struct prof_series *s, const char *name, const char *value)
{
	struct prof_label *l = NULL, *nl;

	if (!value)
		return 0;
	for (size_t i = 0; i < s->nlabels; i++)
		if (!strcmp(s->labels[i].name, name))
			l = &s->labels[i];
	if (!l) {
		nl = realloc(s->labels, (s->nlabels + 1) * sizeof(*nl));
		if (!nl)
			return -ENOMEM;
		s->labels = nl;
		l = &s->labels[s->nlabels];
		*l = (struct prof_label){ .name = strdup(name) };
		if (!l->name)
			return -ENOMEM;
		s->nlabels++;
	}
	free(l->value);
	l->value = prof_label_value(value);
	return l->value ? 0 : -ENOMEM;
}

static int series_labels(struct prof_series *s, const struct prof_workload *wl,
			 const struct prof_series_opts *o)
{
	int err = 0;

	err = err ?: label_set(s, "__name__", o->name ? o->name : "process_cpu");
	err = err ?: label_set(s, "service_name", wl->service);
	err = err ?: label_set(s, "hostname", o->hostname);
	err = err ?: label_set(s, "container_id", wl->container);
	err = err ?: label_set(s, "pod_uid", wl->pod_uid);
	err = err ?: label_set(s, "systemd_unit", wl->unit);
	err = err ?: label_set(s, "cgroup", wl->cgroup);
	for (size_t i = 0; i < o->nextra && !err; i++)
		err = label_set(s, o->extra[i].name, o->extra[i].value);
	if (!err)
		qsort(s->labels, s->nlabels, sizeof(*s->labels), label_cmp);
	return err;
}

void prof_series_set_free(struct prof_series_set *set)
{
	if (!set)
		return;
	for (size_t i = 0; i < set->n; i++) {
		struct prof_series *s = &set->series[i];

		for (size_t k = 0; k < s->nlabels; k++) {
			free(s->labels[k].name);
			free(s->labels[k].value);
		}
		free(s->labels);
		free(s->samples);
	}
	free(set->series);
	*set = (struct prof_series_set){ 0 };
}

int prof_series_split(const struct prof_sample *s, const struct prof_workload *const *wl, size_t n,
		      const struct prof_series_opts *o, struct prof_series_set *out)
{
	static const struct prof_workload none = { .service = "unknown" };
	struct prof_series *cur = NULL, *ns;
	struct order *ord;
	size_t i;
	int err = -ENOMEM;

	*out = (struct prof_series_set){ 0 };
	ord = calloc(n ? n : 1, sizeof(*ord));
	if (!ord)
		return -ENOMEM;
	for (i = 0; i < n; i++)
		ord[i] = (struct order){ .i = i, .wl = wl[i] ? wl[i] : &none };
	qsort(ord, n, sizeof(*ord), order_cmp);
	for (i = 0; i < n; i++) {
		if (!cur || workload_cmp(ord[i].wl, ord[i - 1].wl)) {
			ns = realloc(out->series, (out->n + 1) * sizeof(*ns));
			if (!ns)
				goto free_set;
			out->series = ns;
			cur = &out->series[out->n++];
			*cur = (struct prof_series){ 0 };
			if (series_labels(cur, ord[i].wl, o))
				goto free_set;
		}
		/* Each series' samples together, for one pprof each: a copy of the sample, not of its frames. */
		if (!(cur->n & (cur->n - 1)) || !cur->n) {
			struct prof_sample *g = realloc(cur->samples, (cur->n ? 2 * cur->n : 1) * sizeof(*g));

			if (!g)
				goto free_set;
			cur->samples = g;
		}
		cur->samples[cur->n++] = s[ord[i].i];
		cur->count += s[ord[i].i].count;
	}
	free(ord);
	return 0;
free_set:
	free(ord);
	prof_series_set_free(out);
	return err;
}

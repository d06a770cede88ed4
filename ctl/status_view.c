/*
 * perfmapctl status laid out for a person, as systemctl status is: by
 * default a few lines (what the agent manages, what it did, every problem
 * counter that is not 0), and with --all every line under its group. Which
 * key is a problem, a gauge or a count, its group and its unit come from
 * the counter table the agent reports from (perfmapd_counters.def): the
 * lines go out in the table's order within each group, unknown keys last.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "status_view.h"

#define WIDTH 80                   /* summary lines wrap here */
#define INDENT 11                  /* under the titles' values */
#define LOST_LISTED 5              /* processes without symbols named under Problems */

static const struct perfmapd_group groups[PMG__COUNT] = {
#define PERFMAPD_GROUP PERFMAPD_GROUP_META
#include "perfmapd_counters.def"
};

static const struct perfmapd_counter counters[PMC__COUNT] = {
#define PERFMAPD_ROW PERFMAPD_ROW_META
#include "perfmapd_counters.def"
};

static const struct perfmapd_list lists[] = {
#define PERFMAPD_LIST PERFMAPD_LIST_META
#include "perfmapd_counters.def"
};

static int counter_of(const char *key)
{
	for (int i = 0; i < PMC__COUNT; i++)
		if (!strcmp(counters[i].key, key))
			return i;
	return -1;
}

/* "jit_4242" is an item of the jit group's list; anything else no group's. */
static int list_group(const char *key)
{
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		size_t n = strlen(lists[i].prefix);

		if (!strncmp(key, lists[i].prefix, n) && key[n] &&
		    strspn(key + n, "0123456789") == strlen(key + n))
			return lists[i].group;
	}
	return PMG__COUNT;
}

int status_view__parse(struct status_view *v, char *text)
{
	char *line, *save = NULL, *sep;
	size_t lines = 1;
	int id;

	memset(v, 0, sizeof(*v));
	for (const char *p = text; *p; p++)
		lines += *p == '\n';
	v->extra = calloc(lines, sizeof(*v->extra));
	if (!v->extra)
		return -ENOMEM;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		sep = strstr(line, ": ");
		if (!sep)
			continue;
		*sep = '\0';
		id = counter_of(line);
		if (id >= 0) {
			v->value[id] = sep + 2;
			continue;
		}
		v->extra[v->n_extra++] = (struct status_extra){ line, sep + 2, list_group(line) };
	}
	return 0;
}

void status_view__free(struct status_view *v)
{
	free(v->extra);
	v->extra = NULL;
	v->n_extra = 0;
}

/* ---- values as a person reads them ---- */

static bool number(const char *s, uint64_t *n)
{
	char *end;

	if (!s || !*s || strspn(s, "0123456789") != strlen(s))
		return false;
	errno = 0;
	*n = strtoull(s, &end, 10);
	return !errno;
}

static void bytes(uint64_t n, char *buf, size_t len)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)n;
	size_t u = 0;

	if (n < 1024) {
		snprintf(buf, len, "%" PRIu64 " B", n);
		return;
	}
	for (v /= 1024; v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0]); u++)
		v /= 1024;
	snprintf(buf, len, v < 10 && v != (uint64_t)v ? "%.1f %s" : "%.0f %s", v, units[u]);
}

/* The two largest units, as systemd says a time: "1h 2min", "3s". */
static void duration(uint64_t s, char *buf, size_t len)
{
	static const struct { uint64_t s; const char *unit; } units[] = {
		{ 86400, "d" }, { 3600, "h" }, { 60, "min" }, { 1, "s" },
	};
	size_t used = 0, shown = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]) && shown < 2; i++) {
		if (s < units[i].s && !(units[i].s == 1 && !shown))
			continue;
		used += snprintf(buf + used, len - used, "%s%" PRIu64 "%s", shown ? " " : "",
				 s / units[i].s, units[i].unit);
		s %= units[i].s;
		shown++;
		if (used >= len)
			break;
	}
}

/* @id's value in its unit: "4.5 MiB", "1h 2min", "250 ms"; as sent when no number. */
static void value_text(const struct status_view *v, int id, char *buf, size_t len)
{
	const char *s = v->value[id];
	uint64_t n;

	if (!number(s, &n)) {
		snprintf(buf, len, "%s", s ? s : "?");
		return;
	}
	switch (counters[id].unit) {
	case PMU_BYTES: bytes(n, buf, len); return;
	case PMU_SECONDS: duration(n, buf, len); return;
	case PMU_MS: snprintf(buf, len, "%" PRIu64 " ms", n); return;
	case PMU_NS: snprintf(buf, len, "%" PRIu64 " ns", n); return;
	default: snprintf(buf, len, "%s", s); return;
	}
}

static bool is_zero(const struct status_view *v, int id)
{
	uint64_t n;

	return !v->value[id] || (number(v->value[id], &n) && !n);
}

/* ---- the summary ---- */

/* A line of items, "Title: a, b, c", wrapped under its first item. */
struct items {
	FILE *out;
	int col;                       /* 0: nothing printed yet */
};

static void item(struct items *it, const char *title, const char *text)
{
	int n = (int)strlen(text);

	if (!it->col) {
		it->col = fprintf(it->out, "%*s: %s", INDENT - 2, title, text);
		return;
	}
	if (it->col + 2 + n > WIDTH) {
		it->col = fprintf(it->out, ",\n%*s%s", INDENT, "", text) - 2;
		return;
	}
	it->col += fprintf(it->out, ", %s", text);
}

static void items_end(struct items *it, const char *title, const char *none)
{
	if (!it->col)
		fprintf(it->out, "%*s: %s", INDENT - 2, title, none);
	fputc('\n', it->out);
	it->col = 0;
}

/* A summary phrase with its value: "<value> <phrase>", or the value in the phrase's %s. */
static void phrase(const struct status_view *v, int id, char *buf, size_t len)
{
	const char *p = counters[id].summary, *at = strstr(p, "%s");
	char val[64];

	value_text(v, id, val, sizeof(val));
	if (at)
		snprintf(buf, len, "%.*s%s%s", (int)(at - p), p, val, at + 2);
	else
		snprintf(buf, len, "%s %s", val, p);
}

/* Gauges with a summary phrase say what the agent manages; counters what it did. */
static void line_of(const struct status_view *v, FILE *out, const char *title, bool gauges,
		    const char *none)
{
	struct items it = { .out = out };
	char text[256];

	for (int i = 0; i < PMC__COUNT; i++) {
		const struct perfmapd_counter *c = &counters[i];

		if (!c->summary[0] || (c->flags & PMC_PROBLEM) || (c->type == PMT_GAUGE) != gauges)
			continue;
		if (is_zero(v, i))
			continue;
		phrase(v, i, text, sizeof(text));
		item(&it, title, text);
	}
	items_end(&it, title, none);
}

static const char *value_or(const struct status_view *v, int id, const char *dflt)
{
	return v->value[id] ? v->value[id] : dflt;
}

static void headline(const struct status_view *v, const char *map_dir, FILE *out)
{
	struct items it = { .out = out };
	char up[64], text[256];

	value_text(v, PMC_uptime_s, up, sizeof(up));
	fprintf(out, "perfmapd for %s: running for %s, pid %s\n", value_or(v, PMC_map_dir, map_dir),
		up, value_or(v, PMC_pid, "?"));
	snprintf(text, sizeof(text), "%s BPF programs", value_or(v, PMC_bpf, "?"));
	item(&it, "Runs", text);
	snprintf(text, sizeof(text), "executable mappings from %s",
		 value_or(v, PMC_exec_mappings_source, "?"));
	item(&it, "Runs", text);
	item(&it, "Runs", !strcmp(value_or(v, PMC_mirroring, "no"), "yes") ?
		 "containers' maps mirrored" : "containers left alone (--no-mirrors)");
	if (!strcmp(value_or(v, PMC_dry_run, "no"), "yes"))
		item(&it, "Runs", "dry run: no file is changed");
	items_end(&it, "Runs", "");
}

/* Every problem counter that is not 0, and the first processes whose JIT code has no names. */
static void problems(const struct status_view *v, FILE *out)
{
	char val[64];
	size_t lost = 0;
	int n = 0;

	for (int i = 0; i < PMC__COUNT; i++) {
		if (!(counters[i].flags & PMC_PROBLEM) || is_zero(v, i))
			continue;
		value_text(v, i, val, sizeof(val));
		if (n++)
			fprintf(out, "%*s", INDENT, "");
		else
			fprintf(out, "%*s: ", INDENT - 2, "Problems");
		fprintf(out, "%s: %s (%s)\n", counters[i].key, val, counters[i].summary);
	}
	if (!n) {
		fprintf(out, "%*s: none\n", INDENT - 2, "Problems");
		return;
	}
	for (size_t i = 0; i < v->n_extra && lost < LOST_LISTED; i++) {
		const struct status_extra *e = &v->extra[i];

		if (e->group != PMG_JIT || !strstr(e->value, "lost=yes"))
			continue;
		fprintf(out, "%*s%s: %s ('perfmapctl doctor %s' says why)\n", INDENT + 2, "", e->key,
			e->value, e->key + strcspn(e->key, "0123456789"));
		lost++;
	}
}

void status_view__summary(const struct status_view *v, const char *map_dir, FILE *out)
{
	headline(v, map_dir, out);
	line_of(v, out, "Manages", true, "nothing yet");
	line_of(v, out, "Did", false, "nothing yet");
	problems(v, out);
	fprintf(out, "Every counter: perfmapctl status --all; as JSON: --json\n");
}

/* ---- every line ---- */

static void title(int g, bool *any, FILE *out)
{
	fprintf(out, "%s%s:\n", *any ? "\n" : "", g < PMG__COUNT ? groups[g].title : "Other");
	*any = true;
}

static void group_lines(const struct status_view *v, int g, bool *any, FILE *out)
{
	bool titled = false;

	for (int i = 0; i < PMC__COUNT; i++) {
		if ((int)counters[i].group != g || !v->value[i])
			continue;
		if (!titled)
			title(g, any, out);
		titled = true;
		fprintf(out, "%s: %s\n", counters[i].key, v->value[i]);
	}
	for (size_t i = 0; i < v->n_extra; i++) {
		if (v->extra[i].group != g)
			continue;
		if (!titled)
			title(g, any, out);
		titled = true;
		fprintf(out, "%s: %s\n", v->extra[i].key, v->extra[i].value);
	}
}

void status_view__all(const struct status_view *v, FILE *out)
{
	bool any = false;

	for (int g = 0; g <= PMG__COUNT; g++)
		group_lines(v, g, &any, out);
}

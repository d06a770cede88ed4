/*
 * The status text: every counter the table declares, as "key: value" lines
 * in its order, those of pieces that do not run left out. perfmapctl lays
 * them out for a person or prints them as JSON (--json): keys are names; a
 * value is a number, yes or no, or the text to the end of its line.
 */
#include <stdarg.h>
#include <stdio.h>

#include "report/status.h"

void status_text__put(struct status_text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (t->len + 1 >= t->cap)
		return;
	va_start(ap, fmt);
	n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		t->len += (size_t)n < t->cap - t->len ? (size_t)n : t->cap - t->len - 1;
}

static void put_row(struct status_text *t, const struct counter_values *cv, enum perfmapd_counter_id i)
{
	const struct perfmapd_counter *c = &perfmapd_counters[i];

	if (c->type == PMT_INFO)
		status_text__put(t, "%s: %s\n", c->key, cv->s[i] ? cv->s[i] : "");
	else if (c->unit == PMU_BOOL)
		status_text__put(t, "%s: %s\n", c->key, cv->v[i] ? "yes" : "no");
	else
		status_text__put(t, "%s: %llu\n", c->key, (unsigned long long)cv->v[i]);
}

size_t status_render(const struct counter_values *cv, status_list_fn *list, void *ctx, char *buf,
		     size_t len)
{
	struct status_text t = { .buf = buf, .cap = len };
	int last[PMG__COUNT];
	int i;

	if (!len)
		return 0;
	buf[0] = '\0';
	/* Each group's list follows the group's last row, shown or not. */
	for (i = 0; i < PMG__COUNT; i++)
		last[i] = -1;
	for (i = 0; i < PMC__COUNT; i++)
		last[perfmapd_counters[i].group] = i;
	for (i = 0; i < PMC__COUNT; i++) {
		if (cv->shown[i])
			put_row(&t, cv, i);
		if (list && last[perfmapd_counters[i].group] == i)
			list(&t, perfmapd_counters[i].group, ctx);
	}
	return t.len;
}

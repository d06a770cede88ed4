/*
 * The counter table (perfmapd_counters.def) and what the report makes of
 * it. The table holds together: keys are unique names, each counter's
 * metric is a family of its type with one sample per label value, counters
 * end in _total and nothing else does, a problem has its phrase for the
 * summary. The status text shows every counter of a running piece once, in
 * the table's order, yes/no for flags, each group's list after its rows, and
 * is cut whole-line-free but always NUL-terminated. The exposition has a
 * sample for every counter the table gives a metric, with its own value.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "report/counters.h"
#include "report/instance.h"
#include "report/metrics_text.h"
#include "report/status.h"
#include "testutil.h"

static char buf[65536];

static bool is_name(const char *s)
{
	if (!*s || !islower((unsigned char)*s))
		return false;
	for (; *s; s++)
		if (!islower((unsigned char)*s) && !isdigit((unsigned char)*s) && *s != '_')
			return false;
	return true;
}

static bool ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), t = strlen(tail);

	return n >= t && !strcmp(s + n - t, tail);
}

static void test_keys_are_unique_names(void **state)
{
	(void)state;
	for (int i = 0; i < PMC__COUNT; i++) {
		const struct perfmapd_counter *c = &perfmapd_counters[i];

		assert_true(is_name(c->key));
		assert_true(c->help[0]);
		assert_true(c->group < PMG__COUNT);
		for (int j = 0; j < i; j++)
			assert_string_not_equal(c->key, perfmapd_counters[j].key);
		/* perfmapctl status lists a problem with its phrase; a word has no metric. */
		if (c->flags & PMC_PROBLEM)
			assert_true(c->summary[0] && c->type != PMT_INFO);
		if (c->type == PMT_INFO)
			assert_int_equal(c->family, PMF_NONE);
	}
	assert_true(PMC__COUNT > 120);
}

/* Each family is of its counters' type, has a sample per label value, and is named as Prometheus wants. */
static void test_families_match_their_counters(void **state)
{
	(void)state;
	for (int f = PMF_NONE + 1; f < PMF__COUNT; f++) {
		const struct perfmapd_family *fam = &perfmapd_families[f];
		int samples = 0;

		assert_true(fam->help[0]);
		assert_true(!strncmp(fam->name, "perfmapd_", 9) || !strncmp(fam->name, "process_", 8));
		assert_int_equal(ends_with(fam->name, "_total"), fam->type == PMT_COUNTER);
		for (int i = 0; i < PMC__COUNT; i++) {
			const struct perfmapd_counter *c = &perfmapd_counters[i];

			if ((int)c->family != f)
				continue;
			samples++;
			assert_int_equal(c->type, fam->type);
			assert_int_equal(!!c->label[0], !!fam->label[0]);
			for (int j = 0; j < i; j++)
				if ((int)perfmapd_counters[j].family == f)
					assert_string_not_equal(c->label, perfmapd_counters[j].label);
		}
		if (fam->samples == PMS_OWN)
			assert_int_equal(samples, 0);
		else if (fam->label[0])
			assert_true(samples >= 2);
		else
			assert_int_equal(samples, 1);
	}
}

/* Every counter with a metric is a sample of it, with the counter's own value. */
static void test_every_metric_counter_is_a_sample(void **state)
{
	static struct metrics_values v;
	char want[256];
	int n = 0;

	(void)state;
	for (int i = 0; i < PMC__COUNT; i++)
		v.v[i] = 1000 + i;
	v.proc.known = true;
	metrics_render(&v, buf, sizeof(buf));
	for (int f = PMF_NONE + 1; f < PMF__COUNT; f++) {
		snprintf(want, sizeof(want), "# TYPE %s %s", perfmapd_families[f].name,
			 counters_type_name(perfmapd_families[f].type));
		assert_true(tu_has_line(buf, want));
	}
	for (int i = 0; i < PMC__COUNT; i++) {
		const struct perfmapd_counter *c = &perfmapd_counters[i];
		const struct perfmapd_family *f = &perfmapd_families[c->family];

		if (c->family == PMF_NONE)
			continue;
		if (c->unit == PMU_MS)
			snprintf(want, sizeof(want), "%s %g", f->name, (1000 + i) / 1e3);
		else if (c->label[0])
			snprintf(want, sizeof(want), "%s{%s=\"%s\"} %d", f->name, f->label, c->label, 1000 + i);
		else
			snprintf(want, sizeof(want), "%s %d", f->name, 1000 + i);
		if (!tu_has_line(buf, want))
			print_message("missing: %s\n", want);
		assert_true(tu_has_line(buf, want));
		n++;
	}
	assert_true(n > 60);
}

static void lists(struct status_text *t, enum perfmapd_group_id group, void *ctx)
{
	(void)ctx;
	if (group == PMG_MIRRORS)
		status_text__put(t, "mirror_7: ns_pid=1 container=- bytes=0 behind=0\n");
	if (group == PMG_JIT)
		status_text__put(t, "jit_8: comm=node regions=1 bytes=4096 memfd_bytes=0 lost=yes\n");
	if (group == PMG_JITDUMP)
		status_text__put(t, "jitdump_9: path=/tmp/jit-9.dump records=1 map=written\n");
}

/* The line after @key's (a whole line), or "" */
static const char *line_after(const char *text, const char *key)
{
	static char line[256];
	char want[128];
	const char *p;
	size_t n;

	snprintf(want, sizeof(want), "\n%s: ", key);
	p = strstr(text, want);
	if (!p || !(p = strchr(p + 1, '\n')))
		return "";
	n = strcspn(p + 1, "\n");
	snprintf(line, sizeof(line), "%.*s", (int)n, p + 1);
	return line;
}

static void test_status_lines_in_the_tables_order(void **state)
{
	static struct counter_values cv;
	const char *p, *prev = buf;
	char want[128];
	size_t len;

	(void)state;
	for (int i = 0; i < PMC__COUNT; i++) {
		cv.v[i] = 10 + i;
		cv.s[i] = perfmapd_counters[i].type == PMT_INFO ? "word" : NULL;
		cv.shown[i] = true;
	}
	cv.v[PMC_mirroring] = 1;
	cv.v[PMC_dry_run] = 0;
	cv.shown[PMC_ns_copies] = false;
	len = status_render(&cv, lists, NULL, buf, sizeof(buf));
	assert_int_equal(len, strlen(buf));
	assert_true(!strncmp(buf, "pid: word\n", 10));
	assert_true(tu_has_line(buf, "mirroring: yes"));
	assert_true(tu_has_line(buf, "dry_run: no"));
	assert_true(tu_has_line(buf, "map_dir: word"));
	snprintf(want, sizeof(want), "stale_maps_archived: %d", 10 + PMC_stale_maps_archived);
	assert_true(tu_has_line(buf, want));
	assert_null(strstr(buf, "\nns_copies: "));
	/* Each shown once, in order. */
	for (int i = 0; i < PMC__COUNT; i++) {
		if (!cv.shown[i])
			continue;
		snprintf(want, sizeof(want), "\n%s: ", perfmapd_counters[i].key);
		p = i ? strstr(buf, want) : buf;
		assert_non_null(p);
		assert_true(p >= prev);
		assert_null(strstr(p + 1, want));
		prev = p;
	}
	/* A group's list after its last row; the last group's at the end. */
	assert_string_equal(line_after(buf, "ns_writes_refused_gone"),
			    "mirror_7: ns_pid=1 container=- bytes=0 behind=0");
	assert_string_equal(line_after(buf, "jit_watch_dropped"),
			    "jit_8: comm=node regions=1 bytes=4096 memfd_bytes=0 lost=yes");
	assert_true(ends_with(buf, "jitdump_9: path=/tmp/jit-9.dump records=1 map=written\n"));
}

/* A text too long for its buffer is cut, NUL-terminated, never past it. */
static void test_status_is_cut_to_fit(void **state)
{
	static struct counter_values cv;
	char small[100];
	size_t len;

	(void)state;
	memset(small, 'x', sizeof(small));
	for (int i = 0; i < PMC__COUNT; i++)
		cv.shown[i] = perfmapd_counters[i].type != PMT_INFO;
	len = status_render(&cv, lists, NULL, small, sizeof(small));
	assert_true(len < sizeof(small));
	assert_int_equal(small[len], '\0');
	assert_int_equal(len, strlen(small));
	assert_int_equal(status_render(&cv, NULL, NULL, small, 0), 0);
}

static struct status_request parsed(const char *s)
{
	struct status_request rq;

	instance_parse_request(s, strlen(s), &rq);
	return rq;
}

/*
 * The status socket's one request: "pid N" and a newline, exactly; nothing
 * at all is the whole status; anything else an error, never a pid.
 */
static void test_status_requests_are_parsed_strictly(void **state)
{
	static const char *const bad[] = {
		"pid\n", "pid \n", "pid 0\n", "pid -1\n", "pid 12", "pid 12\n\n", "pid 12\npid 13\n",
		"pid 1x\n", "pid  12\n", "PID 12\n", "pid 2147483648\n", "pid 99999999999\n",
		"pid 12 \n", "jit 12\n", "\n", "pid 0000000000000000000000012\n",
	};
	char big[STATUS_REQUEST_MAX + 1];
	struct status_request rq;
	size_t i;

	(void)state;
	instance_parse_request("", 0, &rq);
	assert_int_equal(rq.kind, STATUS_REQ_NONE);
	rq = parsed("pid 4242\n");
	assert_int_equal(rq.kind, STATUS_REQ_PID);
	assert_int_equal(rq.pid, 4242);
	rq = parsed("pid 2147483647\n");
	assert_int_equal(rq.kind, STATUS_REQ_PID);
	assert_int_equal(rq.pid, 2147483647);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		rq = parsed(bad[i]);
		assert_int_equal(rq.kind, STATUS_REQ_BAD);
		assert_int_equal(rq.pid, 0);
	}
	/* More than a request holds, read as it came (STATUS_REQUEST_MAX + 1 bytes): an error. */
	memset(big, '1', sizeof(big));
	memcpy(big, "pid ", 4);
	big[sizeof(big) - 1] = '\n';
	instance_parse_request(big, sizeof(big), &rq);
	assert_int_equal(rq.kind, STATUS_REQ_BAD);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keys_are_unique_names),
		cmocka_unit_test(test_families_match_their_counters),
		cmocka_unit_test(test_every_metric_counter_is_a_sample),
		cmocka_unit_test(test_status_lines_in_the_tables_order),
		cmocka_unit_test(test_status_is_cut_to_fit),
		cmocka_unit_test(test_status_requests_are_parsed_strictly),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

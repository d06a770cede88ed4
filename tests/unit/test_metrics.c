/*
 * metrics_text: the exposition is in Prometheus's text format: every family
 * has its HELP and TYPE, a histogram's buckets are cumulative and end in
 * +Inf with _count equal to it, label values are escaped, counters end in
 * _total, and a line that does not fit is left out whole, never cut.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "metrics_text.h"
#include "testutil.h"

static char buf[65536];

static const struct metrics_values sample = {
	.version = "0.1", .bpf = "tp_btf", .exec_maps = "perf-mmap2",
	.events_fork = 12, .events_exec = 3, .events_exit = 9,
	.copies_created = 5, .copy_bytes = 4096,
	/* 0.3 ms, 0.7 ms twice, 3 ms, 2 s */
	.copy_latency = { 1, 2, 0, 1, 0, 0, 0, 0, 0, 0, 1 },
	.copy_latency_sum_ns = 2004700000,
	.ambiguous_kept = 4, .mirror_lag_p99_ms = 250,
	.retention_s = 600, .copies_queue_full = 7,
	.ns_refused = { { "symlink", 2 }, { "sparse", 1 } }, .n_ns_refused = 2,
	.host_traps = 3,
	.proc = { .known = true, .cpu_ticks = 250, .ticks_per_s = 100, .rss_bytes = 8 << 20,
		  .open_fds = 12, .max_fds = 65536, .start_time_s = 1790000000 },
};

/* Whether @line is a whole line of the text. */
static bool has_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	const char *p = text;

	while ((p = strstr(p, line))) {
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return true;
		p += n;
	}
	return false;
}

static void test_every_family_has_help_and_type(void **state)
{
	char name[128], type[32], want[256];
	const char *p;
	size_t families = 0;

	(void)state;
	metrics_render(&sample, buf, sizeof(buf));
	for (p = buf; (p = strstr(p, "# TYPE ")); p++) {
		assert_int_equal(sscanf(p, "# TYPE %127s %31s", name, type), 2);
		/* The agent's own, or the process metrics every client library names alike. */
		assert_true(!strncmp(name, "perfmapd_", 9) || !strncmp(name, "process_", 8));
		snprintf(want, sizeof(want), "# HELP %s ", name);
		assert_non_null(strstr(buf, want));
		/* Counters, and only they, end in _total. */
		if (!strcmp(type, "counter"))
			assert_string_equal(name + strlen(name) - 6, "_total");
		else
			assert_null(strstr(name, "_total"));
		families++;
	}
	assert_true(families > 25);
	assert_true(has_line(buf, "perfmapd_build_info{version=\"0.1\",bpf=\"tp_btf\",exec_maps=\"perf-mmap2\"} 1"));
	assert_true(has_line(buf, "perfmapd_events_total{kind=\"fork\"} 12"));
	assert_true(has_line(buf, "perfmapd_decisions_total{kind=\"ambiguous_kept\"} 4"));
	assert_true(has_line(buf, "perfmapd_mirror_lag_p99_seconds 0.25"));
	assert_true(has_line(buf, "perfmapd_fork_copy_bytes_total 4096"));
	assert_true(has_line(buf, "perfmapd_retention_seconds 600"));
	assert_true(has_line(buf, "perfmapd_fork_copies_put_off_total{reason=\"queue_full\"} 7"));
	assert_true(has_line(buf, "perfmapd_container_maps_refused_total{reason=\"symlink\"} 2"));
	assert_true(has_line(buf, "perfmapd_container_maps_refused_total{reason=\"sparse\"} 1"));
	assert_true(has_line(buf, "perfmapd_host_maps_refused_total{reason=\"trap\"} 3"));
	assert_true(has_line(buf, "process_cpu_seconds_total 2.5"));
	assert_true(has_line(buf, "process_resident_memory_bytes 8388608"));
	assert_true(has_line(buf, "process_open_fds 12"));
	assert_true(has_line(buf, "process_start_time_seconds 1790000000"));
	/* No pid in any label. */
	assert_null(strstr(buf, "pid="));
}

static void test_histogram_buckets_are_cumulative(void **state)
{
	(void)state;
	metrics_render(&sample, buf, sizeof(buf));
	assert_true(has_line(buf, "# TYPE perfmapd_fork_copy_seconds histogram"));
	assert_true(has_line(buf, "perfmapd_fork_copy_seconds_bucket{le=\"0.0005\"} 1"));
	assert_true(has_line(buf, "perfmapd_fork_copy_seconds_bucket{le=\"0.001\"} 3"));
	assert_true(has_line(buf, "perfmapd_fork_copy_seconds_bucket{le=\"0.0025\"} 3"));
	assert_true(has_line(buf, "perfmapd_fork_copy_seconds_bucket{le=\"0.005\"} 4"));
	assert_true(has_line(buf, "perfmapd_fork_copy_seconds_bucket{le=\"1\"} 4"));
	assert_true(has_line(buf, "perfmapd_fork_copy_seconds_bucket{le=\"+Inf\"} 5"));
	assert_true(has_line(buf, "perfmapd_fork_copy_seconds_count 5"));
	assert_true(has_line(buf, "perfmapd_fork_copy_seconds_sum 2.0047"));
}

/* Without /proc/self, no process_* family at all: a 0 there would read as a real value. */
static void test_process_metrics_only_when_read(void **state)
{
	struct metrics_values v = sample;

	(void)state;
	v.proc.known = false;
	metrics_render(&v, buf, sizeof(buf));
	assert_null(strstr(buf, "process_"));
	assert_non_null(strstr(buf, "perfmapd_build_info"));
}

static void test_label_values_are_escaped(void **state)
{
	struct mtext m;

	(void)state;
	mtext_init(&m, buf, sizeof(buf));
	mtext_sample(&m, "perfmapd_x_total", "kind", "a\"b\\c\nd", 7);
	assert_string_equal(buf, "perfmapd_x_total{kind=\"a\\\"b\\\\c\\nd\"} 7\n");
	assert_false(m.cut);
}

static void test_a_line_that_does_not_fit_is_left_out_whole(void **state)
{
	struct mtext m;
	char small[48];

	(void)state;
	mtext_init(&m, small, sizeof(small));
	mtext_sample(&m, "perfmapd_a_total", NULL, NULL, 1);
	mtext_sample(&m, "perfmapd_much_longer_name_total", NULL, NULL, 123456789);
	assert_string_equal(small, "perfmapd_a_total 1\n");
	assert_true(m.cut);
	assert_int_equal(m.len, strlen(small));
}

static void test_the_whole_text_fits_its_buffer(void **state)
{
	size_t len;

	(void)state;
	len = metrics_render(&sample, buf, sizeof(buf));
	assert_int_equal(len, strlen(buf));
	/* metrics.c renders into 64 KiB: a fourth of it is the margin kept. */
	assert_true(len < sizeof(buf) / 4);
	assert_int_equal(buf[len - 1], '\n');
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_family_has_help_and_type),
		cmocka_unit_test(test_histogram_buckets_are_cumulative),
		cmocka_unit_test(test_process_metrics_only_when_read),
		cmocka_unit_test(test_label_values_are_escaped),
		cmocka_unit_test(test_a_line_that_does_not_fit_is_left_out_whole),
		cmocka_unit_test(test_the_whole_text_fits_its_buffer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

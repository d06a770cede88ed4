/*
 * log: no string from a process or a file can make a line of its own or
 * reach the terminal raw; names escape reversibly; floods of one kind of
 * line are bounded and summed up; the same trap is warned about once.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"
#include "testutil.h"

static char *dir;
static char path[4096];
static uint64_t fake_now;

static uint64_t fake_clock(void)
{
	return fake_now;
}

static int setup(void **state)
{
	(void)state;
	dir = tu_mkdtemp();
	if (!dir)
		return -1;
	snprintf(path, sizeof(path), "%s/log", dir);
	log_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
	log_clock = fake_clock;
	fake_now += 3600ull * 1000000000;  /* every test starts with full buckets */
	log_max_level = LOG_DEBUG;
	return log_fd >= 0 ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	log_flush(true);
	close(log_fd);
	log_fd = STDERR_FILENO;
	tu_rmdir(dir);
	return 0;
}

/* What was logged, NUL-terminated (freed by the caller). */
static char *logged(size_t *len)
{
	char *s = tu_read(path, len);

	assert_non_null(s);
	return s;
}

static void escapes_as(const char *in, size_t len, unsigned int flags, const char *want)
{
	char out[256];

	log_escape(out, sizeof(out), in, len, flags);
	assert_string_equal(out, want);
}

static void test_control_bytes(void **state)
{
	(void)state;
	escapes_as("a\nb\tc\rd", 7, 0, "a\\nb\\tc\\rd");
	escapes_as("\x01\x1b[31m\x7f", 7, 0, "\\x01\\x1b[31m\\x7f");
	/* A NUL ends the string, as in a C name. */
	escapes_as("ab\0cd", 5, 0, "ab");
	/* Without the flag a backslash is a character like others; with it, escaped. */
	escapes_as("a\\nb", 4, 0, "a\\nb");
	escapes_as("a\\nb", 4, LOG_ESC_REVERSIBLE, "a\\\\nb");
}

static void test_utf8(void **state)
{
	(void)state;
	/* Valid UTF-8 stays printable: é, €, an emoji. */
	escapes_as("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14, 0,
		   "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
	/* Invalid: a stray continuation, 0xff, an overlong '/', a surrogate, a cut sequence. */
	escapes_as("\x80", 1, 0, "\\x80");
	escapes_as("\xff", 1, 0, "\\xff");
	escapes_as("\xc0\xaf", 2, 0, "\\xc0\\xaf");
	escapes_as("\xed\xa0\x80", 3, 0, "\\xed\\xa0\\x80");
	escapes_as("x\xe2\x82", 3, 0, "x\\xe2\\x82");
	escapes_as("\xf4\x90\x80\x80", 4, 0, "\\xf4\\x90\\x80\\x80");
	/* C1 controls, U+0080..U+009F (U+009B is CSI to some terminals). */
	escapes_as("\xc2\x9b" "2J", 4, 0, "\\xc2\\x9b2J");
}

/* Valid, but it hides or reorders what follows: a line separator, bidi overrides, zero-width ones. */
static void test_invisible_characters(void **state)
{
	(void)state;
	escapes_as("a\xe2\x80\xa8" "b", 5, 0, "a\\xe2\\x80\\xa8b");
	escapes_as("\xe2\x80\xa9", 3, 0, "\\xe2\\x80\\xa9");
	escapes_as("\xe2\x80\xae" "gpj.exe", 10, 0, "\\xe2\\x80\\xaegpj.exe");
	escapes_as("\xe2\x80\xaa\xe2\x81\xa6\xe2\x81\xa9", 9, 0,
		   "\\xe2\\x80\\xaa\\xe2\\x81\\xa6\\xe2\\x81\\xa9");
	escapes_as("\xe2\x80\x8b\xe2\x80\x8d\xe2\x81\xa0\xef\xbb\xbf\xd8\x9c", 14, 0,
		   "\\xe2\\x80\\x8b\\xe2\\x80\\x8d\\xe2\\x81\\xa0\\xef\\xbb\\xbf\\xd8\\x9c");
	/* Their neighbours are visible text: an en dash, a per-mille sign, a superscript zero. */
	escapes_as("\xe2\x80\x93\xe2\x80\xb0\xe2\x81\xb0", 9, 0, "\xe2\x80\x93\xe2\x80\xb0\xe2\x81\xb0");
}

static void test_cut_between_escapes(void **state)
{
	char out[6];

	(void)state;
	/* "ab" and a 4-byte escape do not fit 5 bytes and a NUL: the escape is left out whole. */
	assert_int_equal(log_escape(out, sizeof(out), "ab\x01", 3, 0), 2);
	assert_string_equal(out, "ab");
	assert_int_equal(log_escape(out, sizeof(out), "abc\xe2\x82\xac", 6, 0), 3);
	assert_string_equal(out, "abc");
}

/* Undo log_escape(.., LOG_ESC_REVERSIBLE): the test's own reader. */
static size_t unescape(const char *s, unsigned char *out)
{
	size_t n = 0;
	unsigned int v;

	while (*s) {
		if (*s != '\\') {
			out[n++] = (unsigned char)*s++;
			continue;
		}
		s++;
		switch (*s) {
		case 'n': out[n++] = '\n'; s++; break;
		case 't': out[n++] = '\t'; s++; break;
		case 'r': out[n++] = '\r'; s++; break;
		case '\\': out[n++] = '\\'; s++; break;
		case 'x':
			assert_int_equal(sscanf(s + 1, "%2x", &v), 1);
			out[n++] = (unsigned char)v;
			s += 3;
			break;
		default:
			fail_msg("unknown escape \\%c", *s);
		}
	}
	return n;
}

static void test_reversible(void **state)
{
	unsigned char in[15], back[64];
	char out[LOG_COMM_LEN];
	unsigned int round, i;

	(void)state;
	srand(9);
	for (round = 0; round < 20000; round++) {
		for (i = 0; i < sizeof(in); i++)
			in[i] = (unsigned char)(1 + rand() % 255);  /* a comm holds no NUL */
		/* 15 bytes, each 4 escaped at most, fit LOG_COMM_LEN: nothing is cut. */
		log_escape(out, sizeof(out), (const char *)in, sizeof(in), LOG_ESC_REVERSIBLE);
		for (i = 0; out[i]; i++)
			assert_true((unsigned char)out[i] >= 0x20 && out[i] != 0x7f);
		assert_int_equal(unescape(out, back), sizeof(in));
		assert_memory_equal(back, in, sizeof(in));
	}
}

/* A process named to look like a second line stays on the first. */
static void test_forged_line(void **state)
{
	char comm[LOG_COMM_LEN];
	size_t len;
	char *s;

	(void)state;
	log_escape(comm, sizeof(comm), "x\nerror: root ok", 16, LOG_ESC_REVERSIBLE);
	pr_info("exit %d (%s): its map stays", 42, comm);
	/* Even a call site that passes a raw string cannot break the line. */
	pr_warn("archive %s: left in place", "perf-1.map\nperfmapd: error: forged\r\x1b[2K");
	pr_info("%s", "caf\xc3\xa9 \xff");
	s = logged(&len);
	assert_int_equal(tu_count_char(s, len, '\n'), 3);
	assert_string_equal(s,
		"perfmapd: exit 42 (x\\nerror: root ok): its map stays\n"
		"perfmapd: warning: archive perf-1.map\\nperfmapd: error: forged\\r\\x1b[2K: left in place\n"
		"perfmapd: caf\xc3\xa9 \\xff\n");
	free(s);
}

static void log_kind_a(int i)
{
	pr_info("scan: perf-%d.map has no process", i);
}

static void test_flood_bounded(void **state)
{
	size_t len;
	char *s;
	int i;

	(void)state;
	for (i = 0; i < LOG_BURST + 500; i++)
		log_kind_a(i);
	/* Another kind of line is not held back by the flood. */
	pr_warn("copy 1 -> 2: refused");
	s = logged(&len);
	assert_int_equal(tu_count_char(s, len, '\n'), LOG_BURST + 1);
	assert_non_null(strstr(s, "perfmapd: warning: copy 1 -> 2: refused\n"));
	free(s);
	/* A second on: the summary, then LOG_PER_S lines more. */
	fake_now += 1000000000;
	log_flush(false);
	for (i = 0; i < LOG_PER_S + 50; i++)
		log_kind_a(100000 + i);
	log_flush(true);
	s = logged(&len);
	assert_non_null(strstr(s, "perfmapd: 500 similar lines suppressed in 1.0 s, the last: "
				  "scan: perf-1499.map has no process\n"));
	assert_non_null(strstr(s, "perfmapd: 50 similar lines suppressed in 0.0 s, the last: "
				  "scan: perf-100149.map has no process\n"));
	assert_int_equal(tu_count_char(s, len, '\n'), LOG_BURST + 1 + 1 + LOG_PER_S + 1);
	free(s);
}

/*
 * Two formats 512 bytes apart: a table of 64 slots indexed by the address
 * (in 8-byte units) would put them in one slot, as it did 33 of the agent's.
 */
static char turns[2][512] __attribute__((aligned(512))) = { "scan: perf-%d.map has no process",
							    "exit %d: its map stays" };

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
static void log_turn(int which, int i)
{
	pr_info(turns[which], i);
}
#pragma GCC diagnostic pop

/* Two kinds taking turns, 100,000 lines: each has its own bucket, and neither refills the other's. */
static void test_flood_bounded_with_kinds_taking_turns(void **state)
{
	size_t len;
	char *s;
	int i;

	(void)state;
	for (i = 0; i < 50000; i++) {
		log_turn(0, i);
		log_turn(1, i);
	}
	s = logged(&len);
	assert_int_equal(tu_count_char(s, len, '\n'), 2 * LOG_BURST);
	free(s);
	log_flush(true);
	s = logged(&len);
	/* One summary each, from the flush. */
	assert_int_equal(tu_count_char(s, len, '\n'), 2 * LOG_BURST + 2);
	assert_non_null(strstr(s, "perfmapd: 49000 similar lines suppressed in 0.0 s, the last: "
				  "scan: perf-49999.map has no process\n"));
	assert_non_null(strstr(s, "perfmapd: 49000 similar lines suppressed in 0.0 s, the last: "
				  "exit 49999: its map stays\n"));
	free(s);
}

static uint64_t clock_readings[2];
static int clock_reads;

/* The archiving thread read the clock just before the loop's thread, and logs just after it. */
static uint64_t two_threads_clock(void)
{
	return clock_readings[clock_reads++ % 2];
}

/* A reading older than the last refills nothing: no underflow into a full bucket. */
static void test_flood_bound_holds_with_an_older_clock_reading(void **state)
{
	size_t len;
	char *s;
	int i;

	(void)state;
	for (i = 0; i < LOG_BURST; i++)
		log_kind_a(i);
	clock_readings[0] = fake_now + 1000;
	clock_readings[1] = fake_now;
	log_clock = two_threads_clock;
	for (i = 0; i < 10000; i++)
		log_kind_a(LOG_BURST + i);
	log_clock = fake_clock;
	s = logged(&len);
	assert_int_equal(tu_count_char(s, len, '\n'), LOG_BURST);
	free(s);
}

static void test_debug_unbounded(void **state)
{
	size_t len;
	char *s;
	int i;

	(void)state;
	for (i = 0; i < LOG_BURST + 10; i++)
		pr_debug("event %d", i);
	s = logged(&len);
	assert_int_equal(tu_count_char(s, len, '\n'), LOG_BURST + 10);
	free(s);
}

static void test_first_time(void **state)
{
	(void)state;
	assert_true(log_first_time(8, 1234, "perf-77.map"));
	assert_false(log_first_time(8, 1234, "perf-77.map"));
	/* Another name, inode or device is another trap. */
	assert_true(log_first_time(8, 1234, "perf-78.map"));
	assert_true(log_first_time(8, 1235, "perf-77.map"));
	assert_true(log_first_time(9, 1234, "perf-77.map"));
	assert_false(log_first_time(8, 1234, "perf-78.map"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
		T(test_control_bytes),
		T(test_utf8),
		T(test_cut_between_escapes),
		T(test_reversible),
		T(test_forged_line),
		T(test_flood_bounded),
		T(test_flood_bounded_with_kinds_taking_turns),
		T(test_flood_bound_holds_with_an_older_clock_reading),
		T(test_invisible_characters),
		T(test_debug_unbounded),
		T(test_first_time),
#undef T
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

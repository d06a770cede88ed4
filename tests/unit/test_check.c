/* Consumer verdicts: each quirk against what perf, samply, blazesym and bcc do with it. */
#include <string.h>

#include "perfmap.h"
#include "testutil.h"

enum { PERF, SAMPLY, BLAZESYM, BCC };

static struct perfmap_report rep;

static void check_str(const char *map, uint64_t max_size)
{
	PERFMAP_OPTS(perfmap_reader_opts, opts, .max_size = max_size);
	struct perfmap_reader *r = perfmap_reader__from_mem(map, strlen(map), &opts);

	assert_non_null(r);
	assert_int_equal(perfmap_check(r, &rep), 0);
	perfmap_reader__free(r);
}

static const struct perfmap_verdict *v(int c)
{
	return &rep.verdict[c];
}

/* ok flags for perf, samply, blazesym, bcc, in that order. */
static void expect_ok(int perf, int samply, int blazesym, int bcc)
{
	int want[4] = { perf, samply, blazesym, bcc }, c;

	for (c = 0; c < 4; c++) {
		if (v(c)->ok != want[c])
			print_error("%s: ok=%d, want %d (%s)\n",
				    perfmap_consumer_str(c), v(c)->ok, want[c], v(c)->reason);
		assert_int_equal(v(c)->ok, want[c]);
		/* A verdict that is not ok always says why. */
		assert_true(v(c)->ok == !v(c)->reason[0]);
	}
}

static void test_canonical_reads_everywhere(void **state)
{
	(void)state;
	check_str("1000 40 py::alpha\n2000 40 py::beta\n00001A00 40 UPPER_PAD\n", 0);
	expect_ok(1, 1, 1, 1);
	assert_int_equal(rep.read.entries, 3);
}

static void test_hex_prefix(void **state)
{
	(void)state;
	/* strtoull and samply's trim_start_matches("0x") take it; blazesym does not. */
	check_str("0x1000 40 py::alpha\n", 0);
	expect_ok(1, 1, 0, 1);
	assert_true(v(BLAZESYM)->file_lost);
	assert_int_equal(v(BLAZESYM)->lineno, 1);
}

static void test_tab(void **state)
{
	(void)state;
	/* samply splits on ' ' only; bcc wants a space right after each number. */
	check_str("1000\t40\tpy::alpha\n2000 40 py::beta\n", 0);
	expect_ok(1, 0, 1, 0);
	assert_int_equal(v(SAMPLY)->lost, 1);
	assert_int_equal(v(BCC)->lost, 1);
	assert_int_equal(v(SAMPLY)->lineno, 1);
}

static void test_blanks(void **state)
{
	(void)state;
	/* Two blanks before the name: perf skips one byte, samply and blazesym split once. */
	check_str("1000 40  py::alpha\n", 0);
	expect_ok(0, 0, 0, 1);
	assert_int_equal(v(PERF)->misread, 1);
	assert_int_equal(v(SAMPLY)->misread, 1);
	assert_int_equal(v(BLAZESYM)->misread, 1);
	assert_non_null(strstr(v(PERF)->reason, "\" py::alpha\""));

	/* Two blanks before the size: strtoull skips them, the splitters do not. */
	check_str("1000  40 py::alpha\n", 0);
	expect_ok(1, 0, 0, 1);
	assert_int_equal(v(SAMPLY)->lost, 1);
	assert_true(v(BLAZESYM)->file_lost);

	check_str(" 1000 40 py::alpha\n", 0);
	expect_ok(1, 0, 0, 1);
}

static void test_crlf(void **state)
{
	(void)state;
	/* perf and bcc keep the '\r' in the name; Rust's lines() and blazesym drop it. */
	check_str("1000 40 py::alpha\r\n", 0);
	expect_ok(0, 1, 1, 0);
	assert_int_equal(v(PERF)->misread, 1);
	assert_int_equal(v(BCC)->misread, 1);
	assert_non_null(strstr(v(PERF)->reason, "py::alpha\\r"));
	assert_non_null(strstr(v(PERF)->reason, "CRLF"));
}

static void test_bad_utf8(void **state)
{
	(void)state;
	/* read_to_string() and str::from_utf8 give up on the file; C does not care. */
	check_str("1000 40 py::ok_one\n2000 40 py::caf\xe9\n", 0);
	expect_ok(1, 0, 0, 1);
	assert_true(v(SAMPLY)->file_lost);
	assert_true(v(BLAZESYM)->file_lost);
	assert_int_equal(v(SAMPLY)->lineno, 2);
	assert_int_equal(rep.read.rejected[PERFMAP_REJECT_BAD_UTF8], 1);
}

static void test_short_name(void **state)
{
	(void)state;
	check_str("1000 40 ab\n", 0);
	expect_ok(0, 1, 1, 1);
	assert_int_equal(v(PERF)->lost, 1);
}

static void test_incomplete_last_line(void **state)
{
	(void)state;
	/* Everyone reads a line still being written; perf even chops a byte. */
	check_str("1000 40 py::alpha\n2000 40 py::be", 0);
	expect_ok(0, 0, 0, 0);
	assert_int_equal(v(PERF)->junk, 1);
	assert_int_equal(v(SAMPLY)->junk, 1);
	assert_int_equal(v(BCC)->junk, 1);
	assert_int_equal(v(PERF)->lineno, 2);
	assert_non_null(strstr(v(PERF)->reason, "incomplete last line"));
}

static void test_garbage(void **state)
{
	(void)state;
	/* perf makes a symbol of anything; blazesym fails; samply and bcc skip it. */
	check_str("1000 40 py::alpha\nhello world\n", 0);
	expect_ok(0, 1, 0, 1);
	assert_int_equal(v(PERF)->junk, 1);
	assert_true(v(BLAZESYM)->file_lost);

	check_str("0 40 py::at_zero\n", 0);
	expect_ok(0, 0, 0, 1);  /* bcc alone rejects start 0 */
}

static void test_nested_entries(void **state)
{
	(void)state;
	/*
	 * A later entry inside an earlier one: blazesym only looks at the
	 * symbols with the greatest start <= addr, so past the inner one's end
	 * it finds nothing; bcc steps back to the outer one.
	 */
	check_str("1000 100 py::outer\n1040 10 py::inner\n", 0);
	expect_ok(0, 1, 0, 1);
	assert_int_equal(v(PERF)->missed, 2);
	assert_int_equal(v(BLAZESYM)->missed, 1);
	assert_non_null(strstr(v(BLAZESYM)->reason, "0x1050: not resolved"));

	/* A later outer entry replaced the inner one: both pick the inner. */
	check_str("1040 10 py::inner\n1000 100 py::outer\n", 0);
	expect_ok(0, 1, 0, 0);
	assert_non_null(strstr(v(BCC)->reason, "resolved to another entry"));

	/* Later and higher: the greatest-start lookups agree with later-wins. */
	check_str("1000 100 py::aaa\n1080 100 py::bbb\n", 0);
	expect_ok(0, 1, 1, 1);
}

static void test_equal_starts(void **state)
{
	(void)state;
	/* std::sort keeps no order among equal starts: bcc may answer either. */
	check_str("1000 100 py::first\n1000 80 py::second\n", 0);
	assert_false(v(BCC)->ok);
	assert_non_null(strstr(v(BCC)->reason, "depends on sort order"));
	/* blazesym takes the smallest: right here, as the smaller came later... */
	assert_true(v(BLAZESYM)->ok);
	/* ...wrong when the later one is the larger. */
	check_str("1000 80 py::first\n1000 100 py::second\n", 0);
	assert_false(v(BLAZESYM)->ok);
	assert_int_equal(v(BLAZESYM)->missed, 1);
	/* Exact twins are the same answer whatever the order. */
	check_str("1000 100 py::twin\n1000 100 py::twin\n", 0);
	expect_ok(1, 1, 1, 1);
	assert_int_equal(rep.table.duplicates, 1);
}

static void test_nul_in_name(void **state)
{
	static const char map[] = "1000 40 py::before\0after\n";
	PERFMAP_OPTS(perfmap_reader_opts, opts);
	struct perfmap_reader *r = perfmap_reader__from_mem(map, sizeof(map) - 1, &opts);

	(void)state;
	/* perf and bcc hold names as C strings; Rust strings keep the NUL. */
	assert_int_equal(perfmap_check(r, &rep), 0);
	perfmap_reader__free(r);
	expect_ok(0, 1, 1, 0);
	assert_int_equal(v(PERF)->misread, 1);
	assert_non_null(strstr(v(PERF)->reason, "\"py::before\""));
}

static void test_samply_u32_size(void **state)
{
	(void)state;
	check_str("1000 100000000 py::big\n", 1ull << 40);
	expect_ok(1, 0, 1, 1);
	assert_int_equal(v(SAMPLY)->misread, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_canonical_reads_everywhere),
		cmocka_unit_test(test_hex_prefix),
		cmocka_unit_test(test_tab),
		cmocka_unit_test(test_blanks),
		cmocka_unit_test(test_crlf),
		cmocka_unit_test(test_bad_utf8),
		cmocka_unit_test(test_short_name),
		cmocka_unit_test(test_incomplete_last_line),
		cmocka_unit_test(test_garbage),
		cmocka_unit_test(test_nested_entries),
		cmocka_unit_test(test_equal_starts),
		cmocka_unit_test(test_nul_in_name),
		cmocka_unit_test(test_samply_u32_size),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

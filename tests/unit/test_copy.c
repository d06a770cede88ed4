/* perfmap_copy_file(): whole canonical lines of another map, bounded, and never through a trap. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perfmap.h"
#include "perfmap_tools.h"
#include "testutil.h"

static char *dir;
static char src[4096];

static int setup(void **state)
{
	(void)state;
	dir = tu_mkdtemp();
	if (!dir)
		return -1;
	setenv("PERFMAP_DIR", dir, 1);
	snprintf(src, sizeof(src), "%s/perf-1.map", dir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	perfmap_fini();
	tu_rmdir(dir);
	return 0;
}

static char *own_map(size_t *len)
{
	return tu_read(tu_map_path(dir, getpid()), len);
}

static void test_copies_well_formed_lines(void **state)
{
	static const char parent[] =
		"7f0000001000 40 py::first\n"
		"garbage that is no entry\n"
		"0x00007F0000001040 0x20 HOTSPOT_STYLE\r\n"
		"\n"
		"7f0000001060\t10\tpy::tabbed\n"
		"7f0000001070 0 zero_size\n"
		"7f0000001080 10 py::half_writ";
	size_t len;
	char *buf;

	(void)state;
	tu_write(src, parent, sizeof(parent) - 1);
	assert_int_equal(perfmap_write_entry((void *)0x5000, 0x10, "own_entry"), 0);
	assert_int_equal(perfmap_copy_file(src), 0);
	buf = own_map(&len);
	/* Appended after what was there, canonical, the torn tail left out. */
	assert_string_equal(buf,
			    "5000 10 own_entry\n"
			    "7f0000001000 40 py::first\n"
			    "7f0000001040 20 HOTSPOT_STYLE\n"
			    "7f0000001060 10 py::tabbed\n");
	free(buf);
}

static void test_large_map_streamed(void **state)
{
	enum { N = 200000 };
	FILE *f;
	size_t len, i;
	char *buf;

	(void)state;
	f = fopen(src, "w");
	assert_non_null(f);
	for (i = 0; i < N; i++)
		fprintf(f, "%zx 10 py::function_number_%zu:/srv/app/module.py\n",
			0x7f0000000000 + i * 16, i);
	/* One line over the reader's 64 KiB bound: dropped, the rest copied. */
	fprintf(f, "7e0000000000 10 ");
	for (i = 0; i < 70000; i++)
		fputc('z', f);
	fprintf(f, "\n7e0000001000 10 py::after_the_long_one\n");
	fclose(f);

	assert_int_equal(perfmap_copy_file(src), 0);
	buf = own_map(&len);
	assert_int_equal(tu_count_char(buf, len, '\n'), N + 1);
	assert_non_null(strstr(buf, "py::function_number_199999:"));
	assert_non_null(strstr(buf, "7e0000001000 10 py::after_the_long_one\n"));
	assert_null(strstr(buf, "zzz"));
	free(buf);
}

static void test_traps_refused(void **state)
{
	char target[4096];
	size_t len = 0;
	char *buf;

	(void)state;
	snprintf(target, sizeof(target), "%s/target", dir);
	tu_write(target, "1000 10 from_target\n", 20);

	errno = 0;
	assert_int_equal(perfmap_copy_file(src), -1);
	assert_int_equal(errno, ENOENT);

	assert_int_equal(symlink(target, src), 0);
	errno = 0;
	assert_int_equal(perfmap_copy_file(src), -1);
	assert_int_equal(errno, ELOOP);
	unlink(src);

	assert_int_equal(link(target, src), 0);
	errno = 0;
	assert_int_equal(perfmap_copy_file(src), -1);
	assert_int_equal(errno, EMLINK);
	unlink(src);

	alarm(10);
	assert_int_equal(mkfifo(src, 0600), 0);
	errno = 0;
	assert_int_equal(perfmap_copy_file(src), -1);
	assert_int_equal(errno, EINVAL);
	alarm(0);
	unlink(src);

	errno = 0;
	assert_int_equal(perfmap_copy_file(dir), -1);
	assert_int_equal(errno, EINVAL);

	/* Copying our own map into itself would double it. */
	assert_int_equal(perfmap_write_entry((void *)0x5000, 0x10, "own_entry"), 0);
	errno = 0;
	assert_int_equal(perfmap_copy_file(tu_map_path(dir, getpid())), -1);
	assert_int_equal(errno, EINVAL);

	buf = own_map(&len);
	assert_string_equal(buf, "5000 10 own_entry\n");
	free(buf);
}

/*
 * What a mirror writes of a map in a namespace: its entries in canonical
 * form, never the text around them, and never more bytes than it read.
 */
static void test_canonical_lines_are_entries_only(void **state)
{
	char buf[] = "0x7F00 0X10  jit::a\r\n"
		     "TOP-SECRET text that is no entry\n"
		     "\n"
		     "0 10 zero_start\n"
		     "7f20\t8\tname\twith\ttabs\n"
		     "7f30 8 bad\xff utf8\n"
		     "7f40 8 ctl\x01" "byte\n"
		     "7f50 8 partial";
	uint64_t dropped = 0;
	size_t n;

	(void)state;
	n = perfmap__canonical_lines(buf, sizeof(buf) - 1, &dropped);
	buf[n] = '\0';
	assert_string_equal(buf, "7f00 10 jit::a\n"
				 "7f20 8 name?with?tabs\n"
				 "7f40 8 ctl?byte\n");
	/* The text, the zero start and the invalid UTF-8; not the empty line; the partial is the caller's. */
	assert_int_equal(dropped, 3);
}

/* A name past the writer's bound is cut as the writer cuts it, on a character boundary. */
static void test_canonical_lines_cut_long_names(void **state)
{
	size_t len = 8 + PERFMAP_NAME_MAX + 100, n;
	char *buf = malloc(len + 1);
	uint64_t dropped = 0;

	(void)state;
	assert_non_null(buf);
	memcpy(buf, "1000 10 ", 8);
	memset(buf + 8, 'x', len - 9);
	buf[len - 1] = '\n';
	n = perfmap__canonical_lines(buf, len, &dropped);
	assert_int_equal(n, 8 + PERFMAP_NAME_MAX + 1);
	assert_int_equal(buf[n - 1], '\n');
	assert_int_equal(dropped, 0);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_copies_well_formed_lines, setup, teardown),
		cmocka_unit_test_setup_teardown(test_large_map_streamed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_traps_refused, setup, teardown),
		cmocka_unit_test(test_canonical_lines_are_entries_only),
		cmocka_unit_test(test_canonical_lines_cut_long_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

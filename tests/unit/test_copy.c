/* perfmap_copy_file(): whole canonical lines of another map, bounded, and never through a trap. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perfmap.h"
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_copies_well_formed_lines, setup, teardown),
		cmocka_unit_test_setup_teardown(test_large_map_streamed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_traps_refused, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* perfmap_open_map(): every trap a world-writable /tmp can hold is refused, and nothing hangs. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perfmap.h"
#include "testutil.h"

static char *dir;
static char path[4096], other[4096];

static int setup(void **state)
{
	(void)state;
	dir = tu_mkdtemp();
	snprintf(path, sizeof(path), "%s/perf-4242.map", dir);
	snprintf(other, sizeof(other), "%s/secret", dir);
	tu_write(other, "secret\n", 7);
	return dir ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	tu_rmdir(dir);
	return 0;
}

static void test_regular_file_opens_read_only(void **state)
{
	char buf[32] = { 0 };
	int fd;

	(void)state;
	tu_write(path, "1000 10 py::ok\n", 15);
	fd = perfmap_open_map(path, NULL);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, buf, sizeof(buf) - 1), 15);
	assert_string_equal(buf, "1000 10 py::ok\n");
	assert_int_equal(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);
}

static void test_traps_refused(void **state)
{
	PERFMAP_OPTS(perfmap_open_opts, owner_opts, .check_owner = true,
		     .owner = geteuid() + 1);
	PERFMAP_OPTS(perfmap_open_opts, size_opts, .max_bytes = 4);

	(void)state;
	assert_int_equal(perfmap_open_map(path, NULL), -ENOENT);

	assert_int_equal(symlink(other, path), 0);
	assert_int_equal(perfmap_open_map(path, NULL), -ELOOP);
	assert_string_equal(perfmap_open_strerror(-ELOOP), "is a symlink, refused");
	unlink(path);

	assert_int_equal(symlink("/nonexistent", path), 0);
	assert_int_equal(perfmap_open_map(path, NULL), -ELOOP);
	unlink(path);

	assert_int_equal(link(other, path), 0);
	assert_int_equal(perfmap_open_map(path, NULL), -EMLINK);
	unlink(path);

	alarm(10);  /* a FIFO with no writer would block a plain open() forever */
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(perfmap_open_map(path, NULL), -EINVAL);
	alarm(0);
	unlink(path);

	assert_int_equal(mkdir(path, 0700), 0);
	assert_int_equal(perfmap_open_map(path, NULL), -EINVAL);
	rmdir(path);

	assert_int_equal(perfmap_open_map("/dev/null", NULL), -EINVAL);

	tu_write(path, "1000 10 py::ok\n", 15);
	assert_int_equal(perfmap_open_map(path, &owner_opts), -EPERM);
	assert_int_equal(perfmap_open_map(path, &size_opts), -EFBIG);
	assert_string_equal(perfmap_open_strerror(-EMLINK),
			    "has more than one hard link, refused");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_regular_file_opens_read_only, setup, teardown),
		cmocka_unit_test_setup_teardown(test_traps_refused, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

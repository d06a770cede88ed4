/* perfmap__replace(): in-place replacement never leaves a writer appending to a file gone from its path. */
#include <errno.h>
#include <fcntl.h>
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
static char path[4096];
static pid_t late_writer;

static int setup(void **state)
{
	(void)state;
	dir = tu_mkdtemp();
	snprintf(path, sizeof(path), "%s/perf-777.map", dir);
	tu_write(path, "1000 10 original\n", 17);
	return dir ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	tu_rmdir(dir);
	return 0;
}

static int fill_new(int src_fd, int out_fd, void *ctx)
{
	(void)src_fd;
	(void)ctx;
	return write(out_fd, "2000 10 replaced\n", 17) == 17 ? 0 : -EIO;
}

static void test_replaces_when_nobody_writes(void **state)
{
	struct perfmap_replace_result res;
	size_t len;
	char *buf;
	int fd;

	(void)state;
	fd = perfmap_open_map(path, NULL);
	assert_true(fd >= 0);
	assert_int_equal(perfmap__replace(path, fd, fill_new, NULL, &res), 0);
	assert_true(res.guarded);
	close(fd);
	buf = tu_read(path, &len);
	assert_string_equal(buf, "2000 10 replaced\n");
	free(buf);
}

/*
 * While the new contents are being written, a process opens the map to
 * append (as a Ruby YJIT flush or a reused pid would). Its open() waits on
 * the lease; the replacement must step back so that, once released, it
 * appends to the file that is still at the path.
 */
static int fill_with_late_writer(int src_fd, int out_fd, void *ctx)
{
	(void)ctx;
	late_writer = fork();
	if (!late_writer) {
		int fd = open(path, O_WRONLY | O_APPEND);

		_exit(fd >= 0 && write(fd, "3000 10 late_line\n", 18) == 18 ? 0 : 1);
	}
	/* Give the child time to reach the lease break and block there. */
	for (int i = 0; i < 200 && fcntl(src_fd, F_GETLEASE) == F_RDLCK; i++)
		usleep(10000);
	return fill_new(src_fd, out_fd, NULL);
}

static void test_steps_back_for_a_late_writer(void **state)
{
	struct perfmap_replace_result res;
	struct stat st_before, st_after;
	size_t len;
	char *buf;
	int fd, err;

	(void)state;
	alarm(60);
	assert_int_equal(stat(path, &st_before), 0);
	fd = perfmap_open_map(path, NULL);
	assert_true(fd >= 0);
	err = perfmap__replace(path, fd, fill_with_late_writer, NULL, &res);
	close(fd);
	assert_int_equal(err, -EBUSY);
	assert_non_null(res.why);
	assert_int_equal(tu_wait(late_writer), 0);
	alarm(0);

	assert_int_equal(stat(path, &st_after), 0);
	assert_int_equal(st_after.st_ino, st_before.st_ino);
	buf = tu_read(path, &len);
	assert_string_equal(buf, "1000 10 original\n3000 10 late_line\n");
	free(buf);
}

static void test_refuses_a_present_writer(void **state)
{
	struct perfmap_replace_result res;
	int wfd, fd;

	(void)state;
	wfd = open(path, O_WRONLY | O_APPEND);
	assert_true(wfd >= 0);
	/* The holder is another process: ours is not counted as a writer. */
	if (!fork()) {
		sleep(30);
		_exit(0);
	}
	close(wfd);
	fd = perfmap_open_map(path, NULL);
	assert_true(fd >= 0);
	assert_int_equal(perfmap__replace(path, fd, fill_new, NULL, &res), -EBUSY);
	assert_int_equal(res.writers.count, 1);
	close(fd);
	kill(res.writers.pid[0], SIGKILL);
	tu_wait(res.writers.pid[0]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_replaces_when_nobody_writes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_steps_back_for_a_late_writer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refuses_a_present_writer, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* archive: maps moved aside, compacted into the archive, and the quota that evicts the oldest. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "archive.h"
#include "log.h"
#include "testutil.h"

static char *top, maps[4096], arch[4096];
static int maps_fd;
static struct archive *ar;

static struct archive *open_archive(uint64_t max_bytes)
{
	const struct archive_config cfg = {
		.map_dir = maps, .map_dir_fd = maps_fd, .dir = arch,
		.max_bytes = max_bytes, .max_map_bytes = 1 << 20,
	};

	return archive__open(&cfg);
}

static int setup(void **state)
{
	(void)state;
	top = tu_mkdtemp();
	if (!top)
		return -1;
	snprintf(maps, sizeof(maps), "%s/maps", top);
	snprintf(arch, sizeof(arch), "%s/a/b/archive", top);
	if (mkdir(maps, 0700))
		return -1;
	maps_fd = open(maps, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return maps_fd >= 0 ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	archive__free(ar);
	ar = NULL;
	close(maps_fd);
	tu_rmdir(top);
	return 0;
}

/* A map of @n entries at @pid's path, last written @age seconds ago. */
static void make_map(pid_t pid, int n, time_t age, struct stat *st)
{
	struct timespec t[2] = { { time(NULL) - age, 0 }, { time(NULL) - age, 0 } };
	char buf[64 * 32], *p = buf;
	int i;

	for (i = 0; i < n; i++)
		p += sprintf(p, "%x 10 fn_%d_%d\n", 0x1000 + i * 16, (int)pid, i);
	tu_write(tu_map_path(maps, pid), buf, p - buf);
	assert_int_equal(utimensat(AT_FDCWD, tu_map_path(maps, pid), t, 0), 0);
	assert_int_equal(stat(tu_map_path(maps, pid), st), 0);
}

static void append(const char *path, const char *text, size_t len)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	close(fd);
}

static int count_in(const char *dir, const char *prefix)
{
	struct dirent *de;
	DIR *d = opendir(dir);
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)))
		n += !strncmp(de->d_name, prefix, strlen(prefix));
	closedir(d);
	return n;
}

static bool archived(pid_t pid)
{
	char prefix[32];

	snprintf(prefix, sizeof(prefix), "perf-%d-", (int)pid);
	return count_in(arch, prefix) == 1;
}

static void test_moves_compacts_and_leaves_nothing_staged(void **state)
{
	struct archive_stats as;
	uint64_t files, bytes;
	struct stat st;

	(void)state;
	ar = open_archive(1 << 20);
	assert_non_null(ar);
	make_map(100, 8, 0, &st);
	assert_int_equal(archive__move(ar, 100, 4242, ARCHIVE_EXIT, st.st_dev, st.st_ino, UINT64_MAX), 0);
	archive__flush(ar);
	assert_int_equal(access(tu_map_path(maps, 100), F_OK), -1);
	assert_true(archived(100));
	assert_int_equal(count_in(maps, ".perfmapd."), 0);
	archive__stats(ar, &as);
	assert_int_equal(as.archived, 1);
	archive__usage(ar, &files, &bytes);
	assert_int_equal(files, 1);
	assert_true(bytes > 0);
	/* The archive directory is ours alone. */
	assert_int_equal(stat(arch, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
}

static void test_refuses_another_file_and_a_drop_deletes(void **state)
{
	struct stat st, other;

	(void)state;
	ar = open_archive(1 << 20);
	make_map(101, 4, 0, &st);
	make_map(102, 4, 0, &other);
	/* Not the file the caller judged: left in place. */
	assert_int_equal(archive__move(ar, 101, 1, ARCHIVE_EXEC, other.st_dev, other.st_ino, UINT64_MAX),
			 -ESTALE);
	assert_int_equal(access(tu_map_path(maps, 101), F_OK), 0);
	assert_int_equal(archive__move(ar, 101, 1, ARCHIVE_DROP, st.st_dev, st.st_ino, UINT64_MAX), 0);
	archive__flush(ar);
	assert_int_equal(access(tu_map_path(maps, 101), F_OK), -1);
	assert_false(archived(101));
	assert_int_equal(count_in(maps, ".perfmapd."), 0);
}

static void test_a_map_written_since_it_was_judged_stays(void **state)
{
	struct stat st;

	(void)state;
	ar = open_archive(1 << 20);
	make_map(104, 4, 0, &st);
	/* A line more than when it was judged: the move was for the file as it was. */
	append(tu_map_path(maps, 104), "2000 10 new_line\n", 17);
	assert_int_equal(archive__move(ar, 104, 1, ARCHIVE_DROP, st.st_dev, st.st_ino,
				       (uint64_t)st.st_size), -ESTALE);
	assert_int_equal(access(tu_map_path(maps, 104), F_OK), 0);
	assert_int_equal(archive__move(ar, 104, 1, ARCHIVE_DROP, st.st_dev, st.st_ino,
				       (uint64_t)st.st_size + 17), 0);
	assert_int_equal(access(tu_map_path(maps, 104), F_OK), -1);
}

static void test_a_writer_keeps_its_map(void **state)
{
	struct stat st;
	int fd;

	(void)state;
	ar = open_archive(1 << 20);
	make_map(103, 4, 0, &st);
	fd = open(tu_map_path(maps, 103), O_WRONLY | O_APPEND | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(archive__move(ar, 103, 1, ARCHIVE_EXIT, st.st_dev, st.st_ino, UINT64_MAX), -EBUSY);
	assert_int_equal(access(tu_map_path(maps, 103), F_OK), 0);
	close(fd);
	assert_int_equal(archive__move(ar, 103, 1, ARCHIVE_EXIT, st.st_dev, st.st_ino, UINT64_MAX), 0);
}

static void test_quota_evicts_the_maps_written_longest_ago(void **state)
{
	struct archive_stats as;
	uint64_t files, bytes, one;
	struct stat st;
	pid_t pid;

	(void)state;
	/* Room for about three of these maps. */
	make_map(1, 30, 0, &st);
	one = st.st_size;
	unlink(tu_map_path(maps, 1));
	ar = open_archive(3 * one + one / 2);
	for (pid = 200; pid < 206; pid++) {
		/* Written 600, 500, ... 100 seconds ago, archived in that order. */
		make_map(pid, 30, 600 - (pid - 200) * 100, &st);
		assert_int_equal(archive__move(ar, pid, 7, ARCHIVE_EXIT, st.st_dev, st.st_ino, UINT64_MAX), 0);
		archive__flush(ar);
	}
	archive__usage(ar, &files, &bytes);
	assert_int_equal(files, 3);
	assert_true(bytes <= 3 * one + one / 2);
	for (pid = 200; pid < 203; pid++)
		assert_false(archived(pid));
	for (pid = 203; pid < 206; pid++)
		assert_true(archived(pid));
	archive__stats(ar, &as);
	assert_int_equal(as.evicted, 3);
	assert_int_equal(as.archived, 6);
}

static void test_a_staged_map_is_finished_at_the_next_start(void **state)
{
	char staged[4096 + 64];

	(void)state;
	ar = open_archive(1 << 20);
	snprintf(staged, sizeof(staged), "%s/.perfmapd.perf-300-99.map", maps);
	tu_write(staged, "1000 10 left_by_a_crash\n", 24);
	archive__finish_staged(ar, ".perfmapd.perf-300-99.map");
	archive__flush(ar);
	assert_int_equal(access(staged, F_OK), -1);
	assert_true(archived(300));
}

static void test_refuses_an_archive_others_can_write(void **state)
{
	(void)state;
	assert_int_equal(mkdir(arch, 0777), -1);  /* parents missing */
	ar = open_archive(1 << 20);
	archive__free(ar);
	ar = NULL;
	assert_int_equal(chmod(arch, 0777), 0);
	errno = 0;
	assert_null(open_archive(1 << 20));
	assert_int_equal(errno, EPERM);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
		T(test_moves_compacts_and_leaves_nothing_staged),
		T(test_refuses_another_file_and_a_drop_deletes),
		T(test_a_map_written_since_it_was_judged_stays),
		T(test_a_writer_keeps_its_map),
		T(test_quota_evicts_the_maps_written_longest_ago),
		T(test_a_staged_map_is_finished_at_the_next_start),
		T(test_refuses_an_archive_others_can_write),
#undef T
	};

	log_max_level = LOG_ERROR;
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* archive: maps moved aside, compacted into the archive, the journal of staged maps, and the fair quota. */
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
#include "archive_file.h"
#include "archive_journal.h"
#include "archive_quota.h"
#include "log.h"
#include "testutil.h"

static char *top, maps[4096], arch[4096];
static int maps_fd;
static struct archive *ar;

static struct archive_config config(uint64_t max_bytes)
{
	return (struct archive_config){
		.map_dir = maps, .map_dir_fd = maps_fd, .dir = arch,
		.max_bytes = max_bytes, .max_map_bytes = 1 << 20,
	};
}

static struct archive *open_archive(uint64_t max_bytes)
{
	const struct archive_config cfg = config(max_bytes);

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

static void test_quota_evicts_the_maps_archived_longest_ago(void **state)
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

/* Call archive__finish_staged() for every staged-looking name, as the start's scan does. */
static void finish_all_staged(void)
{
	struct dirent *de;
	DIR *d = opendir(maps);

	assert_non_null(d);
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, ARCHIVE_STAGE_PREFIX, strlen(ARCHIVE_STAGE_PREFIX)))
			archive__finish_staged(ar, de->d_name);
	closedir(d);
}

/* The one staged name in the map directory. */
static void staged_name(char *buf, size_t len)
{
	struct dirent *de;
	DIR *d = opendir(maps);

	assert_non_null(d);
	buf[0] = '\0';
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, ARCHIVE_STAGE_PREFIX, strlen(ARCHIVE_STAGE_PREFIX)))
			snprintf(buf, len, "%s/%s", maps, de->d_name);
	closedir(d);
	assert_true(buf[0]);
}

/* Records in the journal (the archive's .staged-* directory). */
static int journal_records(void)
{
	char path[4096 + 300];
	struct dirent *de;
	DIR *d = opendir(arch);
	int n = -1;

	assert_non_null(d);
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, ".staged-", 8)) {
			snprintf(path, sizeof(path), "%s/%s", arch, de->d_name);
			n = count_in(path, ".perfmapd.");
		}
	closedir(d);
	return n;
}

static int open_fds(void)
{
	return count_in("/proc/self/fd", "");
}

static void move_map(pid_t pid, int entries, int expect)
{
	struct stat st;

	make_map(pid, entries, 0, &st);
	assert_int_equal(archive__move(ar, pid, 7, ARCHIVE_EXIT, st.st_dev, st.st_ino, UINT64_MAX),
			 expect);
}

static void test_a_staged_map_is_finished_at_the_next_start(void **state)
{
	pid_t pid;

	(void)state;
	ar = open_archive(1 << 20);
	archive__pause(ar, true);
	for (pid = 300; pid < 303; pid++)
		move_map(pid, 4, 0);
	/* Stopped with three maps queued: they stay staged, and recorded. */
	archive__free(ar);
	ar = NULL;
	assert_int_equal(count_in(maps, ".perfmapd."), 3);
	assert_int_equal(journal_records(), 3);
	ar = open_archive(1 << 20);
	finish_all_staged();
	archive__flush(ar);
	for (pid = 300; pid < 303; pid++)
		assert_true(archived(pid));
	assert_int_equal(count_in(maps, ".perfmapd."), 0);
	assert_int_equal(journal_records(), 0);
}

static void test_a_planted_staged_file_is_left_alone(void **state)
{
	char planted[4096 + 64], other[4096 + 64], arc[4096 + 64], *text;
	struct archive_stats as;
	size_t len;

	(void)state;
	ar = open_archive(1 << 20);
	move_map(310, 4, 0);
	archive__flush(ar);
	assert_true(archived(310));
	/* Named like the archive it would replace, and like a fresh staged name. */
	snprintf(planted, sizeof(planted), "%s/.perfmapd.perf-310-7.map", maps);
	snprintf(other, sizeof(other), "%s/.perfmapd.0123456789abcdef0123456789abcdef.map", maps);
	tu_write(planted, "1000 10 planted_lines\n", 22);
	tu_write(other, "1000 10 planted_lines\n", 22);
	archive__free(ar);
	ar = open_archive(1 << 20);
	finish_all_staged();
	archive__flush(ar);
	assert_int_equal(access(planted, F_OK), 0);
	assert_int_equal(access(other, F_OK), 0);
	archive__stats(ar, &as);
	assert_int_equal(as.staged_refused, 2);
	assert_int_equal(as.archived, 0);
	snprintf(arc, sizeof(arc), "%s/perf-310-7.map", arch);
	text = tu_read(arc, &len);
	assert_non_null(text);
	assert_non_null(strstr(text, "fn_310_0"));
	assert_null(strstr(text, "planted"));
	free(text);
}

static void test_squatted_staged_names_do_not_stop_a_move(void **state)
{
	char path[4096 + 64];
	struct stat st;

	(void)state;
	ar = open_archive(1 << 20);
	/* Every name the staged map had before: the victim's pid and start ticks read from /proc. */
	snprintf(path, sizeof(path), "%s/.perfmapd.perf-315-7.map", maps);
	tu_write(path, "1000 10 squatter\n", 17);
	snprintf(path, sizeof(path), "%s/.perfmapd.perf-315-7-exec1.map", maps);
	tu_write(path, "1000 10 squatter\n", 17);
	make_map(315, 4, 0, &st);
	assert_int_equal(archive__move(ar, 315, 7, ARCHIVE_EXIT, st.st_dev, st.st_ino, UINT64_MAX), 0);
	archive__flush(ar);
	assert_true(archived(315));
	assert_int_equal(access(tu_map_path(maps, 315), F_OK), -1);
	assert_int_equal(count_in(maps, ".perfmapd."), 2);
}

static void test_a_staged_map_replaced_by_its_owner_is_refused(void **state)
{
	char staged[4096 + 300], elsewhere[4096 + 64];
	struct archive_stats as;

	(void)state;
	ar = open_archive(1 << 20);
	archive__pause(ar, true);
	move_map(320, 4, 0);
	staged_name(staged, sizeof(staged));
	/*
	 * Another file at the staged name: not the one recorded. (The first is
	 * kept elsewhere, or the new file may get its inode number back: the
	 * same owner's file, which the owner could as well have written to.)
	 */
	snprintf(elsewhere, sizeof(elsewhere), "%s/kept", maps);
	assert_int_equal(rename(staged, elsewhere), 0);
	tu_write(staged, "1000 10 swapped_in\n", 19);
	archive__pause(ar, false);
	archive__flush(ar);
	archive__stats(ar, &as);
	assert_int_equal(as.staged_refused, 1);
	assert_int_equal(as.archived, 0);
	assert_false(archived(320));
	assert_int_equal(access(staged, F_OK), 0);
	assert_int_equal(journal_records(), 0);
}

static void test_an_archive_is_never_replaced(void **state)
{
	(void)state;
	ar = open_archive(1 << 20);
	/* Two maps of one pid and start: the same archive name. */
	move_map(330, 4, 0);
	archive__flush(ar);
	move_map(330, 6, 0);
	archive__flush(ar);
	assert_int_equal(count_in(arch, "perf-330-7"), 2);
	assert_int_equal(count_in(arch, "perf-330-7-dup2.map"), 1);
}

static void test_the_queue_is_bounded_and_holds_no_fd(void **state)
{
	struct archive_config cfg = config(1 << 20);
	struct archive_stats as;
	int fds;

	(void)state;
	cfg.max_queue = 2;
	ar = archive__open(&cfg);
	archive__pause(ar, true);
	fds = open_fds();
	move_map(340, 4, 0);
	move_map(341, 4, 0);
	/* Full: not moved, the caller tries again later. */
	move_map(342, 4, -EAGAIN);
	assert_int_equal(access(tu_map_path(maps, 342), F_OK), 0);
	assert_int_equal(open_fds(), fds);
	archive__stats(ar, &as);
	assert_int_equal(as.deferred, 1);
	archive__pause(ar, false);
	archive__flush(ar);
	move_map(342, 4, 0);
	archive__flush(ar);
	assert_true(archived(340) && archived(341) && archived(342));
}

/* Another uid's map at a new holder's path goes, held open for writing and past a full queue. */
static void test_a_squatted_map_moves_while_written_and_past_a_full_queue(void **state)
{
	struct archive_config cfg = config(1 << 20);
	struct archive_stats as;
	struct stat st;
	int fd;

	(void)state;
	cfg.max_queue = 1;
	ar = archive__open(&cfg);
	archive__pause(ar, true);
	move_map(360, 4, 0);
	move_map(361, 4, -EAGAIN);
	make_map(362, 4, 0, &st);
	fd = open(tu_map_path(maps, 362), O_WRONLY | O_APPEND | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(archive__move(ar, 362, 1, ARCHIVE_STALE, st.st_dev, st.st_ino, UINT64_MAX),
			 -EAGAIN);
	assert_int_equal(archive__move_squatted(ar, 362, st.st_dev, st.st_ino), 0);
	assert_int_equal(access(tu_map_path(maps, 362), F_OK), -1);
	/* Its writer's fd is not torn: what it writes goes to the staged file. */
	assert_int_equal(write(fd, "2000 10 late\n", 13), 13);
	close(fd);
	archive__stats(ar, &as);
	assert_int_equal(as.queued_over_max, 1);
	archive__pause(ar, false);
	archive__flush(ar);
	assert_true(archived(360) && archived(362));
	assert_false(archived(361));
}

static void test_a_map_too_large_to_compact_is_stored_as_it_is(void **state)
{
	struct archive_config cfg = config(1 << 20);
	struct archive_stats as;
	char path[4096 + 64], *text;
	size_t len;

	(void)state;
	cfg.max_table_bytes = 4096;
	ar = archive__open(&cfg);
	move_map(350, 60, 0);
	archive__flush(ar);
	archive__stats(ar, &as);
	assert_int_equal(as.uncompacted, 1);
	assert_int_equal(as.archived, 1);
	snprintf(path, sizeof(path), "%s/perf-350-7.map", arch);
	text = tu_read(path, &len);
	assert_non_null(text);
	assert_int_equal(tu_count_char(text, len, '\n'), 60);
	free(text);
	assert_int_equal(count_in(maps, ".perfmapd."), 0);
}

static void test_a_map_grown_past_the_bound_is_not_left_staged(void **state)
{
	struct archive_config cfg = config(1 << 20);
	struct archive_stats as;
	char path[4096 + 64];
	struct stat st;

	(void)state;
	cfg.max_map_bytes = 256;
	ar = archive__open(&cfg);
	move_map(360, 60, 0);
	archive__flush(ar);
	archive__stats(ar, &as);
	assert_int_equal(as.archived, 1);
	assert_int_equal(as.uncompacted, 1);
	assert_int_equal(as.failed, 0);
	assert_int_equal(count_in(maps, ".perfmapd."), 0);
	snprintf(path, sizeof(path), "%s/perf-360-7.map", arch);
	assert_int_equal(stat(path, &st), 0);
	assert_true(st.st_size > 0 && st.st_size <= 256);
}

static void test_quota_plan_takes_from_the_largest_user_first(void **state)
{
	struct archived_file v[] = {
		{ "perf-1-1.map", 132 << 20, { 100, 0 }, 1000 },
		{ "perf-2-1.map", 132 << 20, { 101, 0 }, 1000 },
		{ "perf-3-1.map", 1 << 20, { 50, 0 }, 0 },
		{ "perf-4-1.map", 1 << 20, { 102, 0 }, 2000 },
	};
	struct archived_file one[] = {
		{ "perf-6-1.map", 10, { 300, 0 }, 0 },
		{ "perf-5-1.map", 10, { 200, 0 }, 0 },
		{ "perf-7-1.map", 10, { 100, 0 }, 0 },
	};
	size_t out[4], n;

	(void)state;
	/* uid 1000 holds the most: its oldest goes, though uid 0's map is older. */
	n = quota__plan(v, 4, 256ull << 20, out);
	assert_int_equal(n, 1);
	assert_string_equal(v[out[0]].name, "perf-1-1.map");
	/* Both of uid 1000's before anyone else's, once it still holds the most. */
	n = quota__plan(v, 4, 3ull << 20, out);
	assert_int_equal(n, 2);
	assert_int_equal(v[out[0]].uid, 1000);
	assert_int_equal(v[out[1]].uid, 1000);
	/* One user: the oldest first. */
	n = quota__plan(one, 3, 15, out);
	assert_int_equal(n, 2);
	assert_string_equal(one[out[0]].name, "perf-7-1.map");
	assert_string_equal(one[out[1]].name, "perf-5-1.map");
	assert_int_equal(quota__plan(one, 3, 30, out), 0);
}

/* A map of @pid's owned by @uid, with an mtime in 2035. */
static void make_attackers_map(pid_t pid, uid_t uid, struct stat *st)
{
	const struct timespec t[2] = { { 2051222400, 0 }, { 2051222400, 0 } };

	make_map(pid, 60, 0, st);
	assert_int_equal(chown(tu_map_path(maps, pid), uid, uid), 0);
	assert_int_equal(utimensat(AT_FDCWD, tu_map_path(maps, pid), t, 0), 0);
	assert_int_equal(stat(tu_map_path(maps, pid), st), 0);
}

static void test_a_users_future_mtimes_evict_only_their_own(void **state)
{
	char path[4096 + 64];
	struct stat st;
	pid_t pid;

	(void)state;
	if (geteuid()) {
		skip();  /* files of another uid */
		return;
	}
	ar = open_archive(2200);  /* two of these maps (1070 bytes each), not a third map more */
	for (pid = 400; pid < 402; pid++) {
		make_attackers_map(pid, 65534, &st);
		assert_int_equal(archive__move(ar, pid, 7, ARCHIVE_EXIT, st.st_dev, st.st_ino,
					       UINT64_MAX), 0);
		archive__flush(ar);
		/* Owned by the map's uid, dated by the agent's clock. */
		snprintf(path, sizeof(path), "%s/perf-%d-7.map", arch, (int)pid);
		assert_int_equal(stat(path, &st), 0);
		assert_int_equal(st.st_uid, 65534);
		assert_true(st.st_mtime <= time(NULL) + 1);
	}
	assert_true(archived(400) && archived(401));
	/* Another user's map, written long ago by its mtime: over the quota now. */
	make_map(402, 8, 3600, &st);
	assert_int_equal(archive__move(ar, 402, 7, ARCHIVE_EXIT, st.st_dev, st.st_ino, UINT64_MAX), 0);
	archive__flush(ar);
	assert_true(archived(402));
	assert_false(archived(400));
	assert_true(archived(401));
}

/* A part of a map an agent killed while compacting left: removed at the start, unless open. */
static void test_a_temporary_file_left_by_a_crash_is_removed_at_the_start(void **state)
{
	char left[4096 + 64], open_one[4096 + 64], kept[4096 + 64];
	int fd;

	(void)state;
	ar = open_archive(1 << 20);
	archive__free(ar);
	snprintf(left, sizeof(left), "%s/" ARCHIVE_TMP_PREFIX "AbC123", arch);
	snprintf(open_one, sizeof(open_one), "%s/" ARCHIVE_TMP_PREFIX "XyZ789", arch);
	snprintf(kept, sizeof(kept), "%s/perf-302-99.map", arch);
	tu_write(left, "1000 10 half_a_li", 17);
	tu_write(open_one, "1000 10 being_written\n", 22);
	tu_write(kept, "1000 10 archived\n", 17);
	fd = open(open_one, O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	ar = open_archive(1 << 20);
	assert_int_equal(access(left, F_OK), -1);
	assert_int_equal(access(open_one, F_OK), 0);
	assert_int_equal(access(kept, F_OK), 0);
	close(fd);
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
		T(test_quota_evicts_the_maps_archived_longest_ago),
		T(test_a_staged_map_is_finished_at_the_next_start),
		T(test_a_planted_staged_file_is_left_alone),
		T(test_squatted_staged_names_do_not_stop_a_move),
		T(test_a_staged_map_replaced_by_its_owner_is_refused),
		T(test_an_archive_is_never_replaced),
		T(test_the_queue_is_bounded_and_holds_no_fd),
		T(test_a_squatted_map_moves_while_written_and_past_a_full_queue),
		T(test_a_map_too_large_to_compact_is_stored_as_it_is),
		T(test_a_map_grown_past_the_bound_is_not_left_staged),
		T(test_quota_plan_takes_from_the_largest_user_first),
		T(test_a_users_future_mtimes_evict_only_their_own),
		T(test_a_temporary_file_left_by_a_crash_is_removed_at_the_start),
		T(test_refuses_an_archive_others_can_write),
#undef T
	};

	log_max_level = getenv("TEST_LOG") ? LOG_DEBUG : LOG_ERROR;
	return cmocka_run_group_tests(tests, NULL, NULL);
}

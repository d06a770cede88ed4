/*
 * mapwatch: the index of which pids have a map follows the directory, says
 * "absent" only when it knows, bounds when each inode appeared by the
 * queue's order, and recovers from a lost queue or a lost watch.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "in/mapwatch.h"
#include "testutil.h"

static char *dir;
static int dirfd_;
static struct mapwatch *mw;

/* What the index told its caller. */
static int told_pid = -1, told_count;
static bool told_exists;

static void told(void *ctx, pid_t pid, bool exists)
{
	(void)ctx;
	told_pid = pid;
	told_exists = exists;
	told_count++;
}

static bool drain(void)
{
	return mapwatch__drain(mw, told, NULL);
}

static int setup(void **state)
{
	(void)state;
	told_pid = -1;
	told_count = 0;
	dir = tu_mkdtemp();
	if (!dir)
		return -1;
	dirfd_ = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	mw = mapwatch__open(dir, dirfd_);
	return mw && dirfd_ >= 0 ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	mapwatch__free(mw);
	close(dirfd_);
	tu_rmdir(dir);
	return 0;
}

static const char *path_of(pid_t pid)
{
	return tu_map_path(dir, pid);
}

static void make_map(pid_t pid)
{
	tu_write(path_of(pid), "1000 10 f\n", 10);
}

static void stat_map(pid_t pid, struct stat *st)
{
	assert_int_equal(lstat(path_of(pid), st), 0);
}

static void test_unknown_until_listed(void **state)
{
	(void)state;
	/* Before a listing the index knows nothing: everything may exist. */
	assert_string_equal(mapwatch__state(mw), "listing");
	assert_true(mapwatch__may_exist(mw, 4242, 1));
	assert_true(mapwatch__has(mw, 4242));
	mapwatch__synced(mw, clock_boot_ns());
	assert_string_equal(mapwatch__state(mw), "exact");
	assert_false(mapwatch__has(mw, 4242));
}

static void test_follows_create_and_delete(void **state)
{
	uint64_t before;

	(void)state;
	mapwatch__synced(mw, clock_boot_ns());
	before = clock_boot_ns();
	make_map(4242);
	/* A change not read yet: an event after the last read must go to disk. */
	assert_true(mapwatch__may_exist(mw, 4242, clock_boot_ns()));
	drain();
	assert_true(mapwatch__has(mw, 4242));
	assert_true(mapwatch__may_exist(mw, 4242, before));
	assert_int_equal(told_pid, 4242);
	assert_true(told_exists);
	assert_false(mapwatch__may_exist(mw, 4243, before));

	assert_int_equal(unlink(path_of(4242)), 0);
	drain();
	assert_false(mapwatch__has(mw, 4242));
	assert_false(told_exists);
}

static void test_event_after_read_goes_to_disk(void **state)
{
	uint64_t ts;

	(void)state;
	mapwatch__synced(mw, clock_boot_ns());
	drain();
	/* An event stamped after the last read: its map may not be read yet. */
	ts = clock_boot_ns();
	assert_true(mapwatch__may_exist(mw, 777, ts));
	/* Unknown time (from a /proc scan): always the disk. */
	assert_true(mapwatch__may_exist(mw, 777, 0));
	drain();
	assert_false(mapwatch__may_exist(mw, 777, ts));
}

static void test_other_names_ignored(void **state)
{
	char path[4096];

	(void)state;
	mapwatch__synced(mw, clock_boot_ns());
	snprintf(path, sizeof(path), "%s/perf-12.map.tmp", dir);
	tu_write(path, "x\n", 2);
	snprintf(path, sizeof(path), "%s/perf-x.map", dir);
	tu_write(path, "x\n", 2);
	snprintf(path, sizeof(path), "%s/perf-012.map", dir);
	tu_write(path, "x\n", 2);
	drain();
	assert_int_equal(told_count, 0);
	assert_false(mapwatch__has(mw, 12));
}

/* The inode's birth lies between the read that found the queue empty and the one that read it. */
static void test_birth_is_bounded_by_the_reads_around_it(void **state)
{
	uint64_t t_empty, t_made, t_read;
	struct stat st;
	struct span born;

	(void)state;
	mapwatch__synced(mw, clock_boot_ns());
	drain();
	t_empty = clock_boot_ns();
	drain();  /* empty: the queue's last quiet read is now after t_empty */
	t_made = clock_boot_ns();
	make_map(31);
	drain();
	t_read = clock_boot_ns();
	stat_map(31, &st);
	born = mapwatch__born(mw, 31, st.st_dev, st.st_ino);
	assert_true(born.lo >= t_empty);
	assert_true(born.lo <= t_made);
	assert_true(born.hi <= t_read);
	assert_true(born.hi >= t_made);
	/* So an event before t_empty is surely before it: the kernel's order, not file times. */
	assert_true(span_before(span_at(t_empty - 1), born));
}

static void test_birth_of_an_inode_not_read_yet(void **state)
{
	uint64_t t_quiet;
	struct stat st;
	struct span born;

	(void)state;
	make_map(32);
	mapwatch__synced(mw, clock_boot_ns());
	drain();
	t_quiet = clock_boot_ns();
	/*
	 * Replaced after the queue was emptied: not the inode the index knows,
	 * though the file system may give it the same number.
	 */
	assert_int_equal(unlink(path_of(32)), 0);
	make_map(32);
	stat_map(32, &st);
	born = mapwatch__born(mw, 32, st.st_dev, st.st_ino);
	assert_true(born.lo <= t_quiet && born.hi == UINT64_MAX);
	assert_true(span_before(span_at(born.lo - 1), born));
}

static void test_made_by_the_agent_keeps_the_narrower_span(void **state)
{
	struct span made, born;
	struct stat st;

	(void)state;
	mapwatch__synced(mw, clock_boot_ns());
	drain();
	made.lo = clock_boot_ns();
	make_map(33);
	made.hi = clock_boot_ns();
	stat_map(33, &st);
	mapwatch__made(mw, 33, st.st_dev, st.st_ino, made);
	drain();  /* the queue's own, wider, span for the same inode */
	born = mapwatch__born(mw, 33, st.st_dev, st.st_ino);
	assert_true(born.lo >= made.lo && born.hi <= made.hi);
}

static void test_listing_knows_no_lower_bound(void **state)
{
	struct stat st;
	struct span born;

	(void)state;
	make_map(34);
	/* A watch that starts now knows nothing of how the file came. */
	mapwatch__free(mw);
	mw = mapwatch__open(dir, dirfd_);
	assert_non_null(mw);
	stat_map(34, &st);
	mapwatch__listed(mw, 34, &st);
	born = mapwatch__born(mw, 34, st.st_dev, st.st_ino);
	assert_int_equal(born.lo, 0);
	assert_true(born.hi <= clock_boot_ns());
}

/* Lost changes cost a listing, never a wrong "absent". */
static void test_overflow_resets_until_listed(void **state)
{
	char path[4096];
	struct stat st;
	int i, fd, q = 0;
	FILE *f;

	(void)state;
	f = fopen("/proc/sys/fs/inotify/max_queued_events", "re");
	if (!f || fscanf(f, "%d", &q) != 1)
		skip();
	fclose(f);
	mapwatch__synced(mw, clock_boot_ns());
	drain();
	/* More changes than the queue holds; the map among them is lost. */
	for (i = 0; i <= q + 16; i++) {
		snprintf(path, sizeof(path), "%s/junk.%d", dir, i);
		fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
		assert_true(fd >= 0);
		close(fd);
	}
	make_map(35);
	assert_true(drain());
	assert_string_equal(mapwatch__state(mw), "listing");
	assert_int_equal(mapwatch__overflows(mw), 1);
	assert_true(mapwatch__has(mw, 35));
	assert_true(mapwatch__may_exist(mw, 36, 1));
	stat_map(35, &st);
	assert_int_equal(mapwatch__born(mw, 35, st.st_dev, st.st_ino).hi, UINT64_MAX);
	/* The listing makes it exact again. */
	mapwatch__listed(mw, 35, &st);
	mapwatch__synced(mw, clock_boot_ns());
	assert_string_equal(mapwatch__state(mw), "exact");
	assert_false(mapwatch__has(mw, 36));
	assert_true(mapwatch__has(mw, 35));
}

/* A full index leaves maps out and says nothing is absent, until it empties by half and is listed again. */
static void test_a_full_index_goes_to_disk_until_relisted(void **state)
{
	struct stat st;
	pid_t pid;

	(void)state;
	mapwatch__limit(mw, 4);
	mapwatch__synced(mw, clock_boot_ns());
	for (pid = 40; pid < 46; pid++)
		make_map(pid);
	assert_false(drain());
	/* Six maps, four held: the two left out must not look absent, nor any other. */
	assert_string_equal(mapwatch__state(mw), "listing");
	assert_int_equal(mapwatch__full(mw), 1);
	assert_true(mapwatch__has(mw, 44));
	assert_true(mapwatch__has(mw, 45));
	assert_true(mapwatch__may_exist(mw, 99, 1));
	/* A listing that finds them all again cannot make it exact. */
	for (pid = 40; pid < 46; pid++) {
		stat_map(pid, &st);
		mapwatch__listed(mw, pid, &st);
	}
	mapwatch__synced(mw, clock_boot_ns());
	assert_string_equal(mapwatch__state(mw), "listing");
	assert_int_equal(mapwatch__full(mw), 1);  /* counted once per time it fills */
	/* Emptied to one held: a listing is asked for, and makes it exact. */
	for (pid = 40; pid < 45; pid++)
		assert_int_equal(unlink(path_of(pid)), 0);
	assert_true(drain());
	assert_int_equal(mapwatch__overflows(mw), 0);
	stat_map(45, &st);
	mapwatch__listed(mw, 45, &st);
	mapwatch__synced(mw, clock_boot_ns());
	assert_string_equal(mapwatch__state(mw), "exact");
	assert_true(mapwatch__has(mw, 45));
	assert_false(mapwatch__has(mw, 44));
}

static void test_lost_watch_is_blind_for_good(void **state)
{
	(void)state;
	mapwatch__synced(mw, clock_boot_ns());
	make_map(37);
	drain();
	assert_true(mapwatch__has(mw, 37));
	/*
	 * The directory goes. The agent holds it open, so inotify says nothing
	 * (IN_DELETE_SELF comes when the last reference goes): the tick's
	 * check finds it.
	 */
	tu_rmdir(dir);
	dir = tu_mkdtemp();
	drain();
	mapwatch__check(mw);
	assert_string_equal(mapwatch__state(mw), "off");
	assert_true(mapwatch__may_exist(mw, 38, 1));
	assert_true(mapwatch__has(mw, 38));
	/* No listing brings it back: nothing is reported any more. */
	mapwatch__synced(mw, clock_boot_ns());
	assert_string_equal(mapwatch__state(mw), "off");
	assert_true(mapwatch__has(mw, 38));
}

static void add_pid(pid_t pid, void *ctx)
{
	int *seen = ctx;

	if (pid > 0 && pid < 64)
		seen[pid]++;
}

/* After lost process events the index itself says which pids have a map. */
static void test_for_each_tells_the_indexed_pids(void **state)
{
	int seen[64] = { 0 };

	(void)state;
	mapwatch__synced(mw, clock_boot_ns());
	make_map(40);
	make_map(41);
	make_map(42);
	unlink(path_of(41));
	drain();
	mapwatch__for_each(mw, add_pid, seen);
	assert_int_equal(seen[40], 1);
	assert_int_equal(seen[41], 0);
	assert_int_equal(seen[42], 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
		T(test_unknown_until_listed),
		T(test_follows_create_and_delete),
		T(test_event_after_read_goes_to_disk),
		T(test_other_names_ignored),
		T(test_birth_is_bounded_by_the_reads_around_it),
		T(test_birth_of_an_inode_not_read_yet),
		T(test_made_by_the_agent_keeps_the_narrower_span),
		T(test_listing_knows_no_lower_bound),
		T(test_overflow_resets_until_listed),
		T(test_a_full_index_goes_to_disk_until_relisted),
		T(test_lost_watch_is_blind_for_good),
		T(test_for_each_tells_the_indexed_pids),
#undef T
	};

	log_max_level = LOG_ERROR;
	return cmocka_run_group_tests(tests, NULL, NULL);
}

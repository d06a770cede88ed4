/* archive: maps moved aside, compacted into the archive, the journal of staged maps, the fair quota, jitdumps with their maps. */
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
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "archive/archive.h"
#include "archive/archive_file.h"
#include "archive/archive_journal.h"
#include "archive/archive_quota.h"
#include "lib/log.h"
#include "perfmap_tools.h"
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

/* What the archived map of @pid (started at 7) costs the quota: its blocks, or its size if more. */
static uint64_t cost_of(pid_t pid)
{
	char path[4096 + 64];
	struct stat st;

	snprintf(path, sizeof(path), "%s/perf-%d-7.map", arch, (int)pid);
	assert_int_equal(stat(path, &st), 0);
	return archive_quota__cost(&st);
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

/* Archive the map of @pid, @n entries written @age seconds ago, and wait for it. */
static void archive_map(pid_t pid, int n, time_t age)
{
	struct stat st;

	make_map(pid, n, age, &st);
	assert_int_equal(archive__move(ar, pid, 7, ARCHIVE_EXIT, st.st_dev, st.st_ino, UINT64_MAX), 0);
	archive__flush(ar);
}

static void test_quota_evicts_the_maps_archived_longest_ago(void **state)
{
	struct archive_stats as;
	uint64_t files, bytes, one;
	pid_t pid;

	(void)state;
	/* What one map costs, archived; then room for three and a half, from the next start. */
	ar = open_archive(1 << 20);
	archive_map(200, 30, 600);
	one = cost_of(200);
	archive__free(ar);
	ar = open_archive(3 * one + one / 2);
	for (pid = 201; pid < 206; pid++) {
		/* Written 500, 400, ... 100 seconds ago, archived in that order. */
		archive_map(pid, 30, 600 - (pid - 200) * 100);
	}
	archive__usage(ar, &files, &bytes);
	assert_int_equal(files, 3);
	assert_int_equal(bytes, 3 * one);
	for (pid = 200; pid < 203; pid++)
		assert_false(archived(pid));
	for (pid = 203; pid < 206; pid++)
		assert_true(archived(pid));
	archive__stats(ar, &as);
	assert_int_equal(as.evicted, 3);
	assert_int_equal(as.archived, 5);
}

/* A map costs its blocks; the index counts without listing, and is loaded again at the next start. */
static void test_usage_counts_blocks_from_the_index(void **state)
{
	char path[4096 + 64];
	uint64_t files, bytes, one;

	(void)state;
	ar = open_archive(1 << 20);
	archive_map(210, 1, 0);  /* one line: tens of bytes, a block on disk */
	one = cost_of(210);
	assert_true(one >= 512);
	archive__usage(ar, &files, &bytes);
	assert_int_equal(files, 1);
	assert_int_equal(bytes, one);
	/* A file put there behind the agent's back: no listing sees it while the agent runs... */
	snprintf(path, sizeof(path), "%s/perf-211-7.map", arch);
	tu_write(path, "1000 10 f\n", 10);
	archive_map(212, 1, 0);
	archive__usage(ar, &files, &bytes);
	assert_int_equal(files, 2);
	/* ...the next start's does. */
	archive__free(ar);
	ar = open_archive(1 << 20);
	archive__usage(ar, &files, &bytes);
	assert_int_equal(files, 3);
	assert_int_equal(bytes, one + cost_of(211) + cost_of(212));
}

/* Past its file bound, a uid loses its own oldest: a million one-line maps are not a million inodes. */
static void test_a_uids_file_bound_evicts_its_oldest(void **state)
{
	struct archive_config cfg = config(1 << 30);
	struct archive_stats as;
	uint64_t files, bytes;
	pid_t pid;

	(void)state;
	cfg.max_files_per_uid = 3;
	ar = archive__open(&cfg);
	for (pid = 220; pid < 225; pid++)
		archive_map(pid, 2, 0);
	assert_false(archived(220) || archived(221));
	assert_true(archived(222) && archived(223) && archived(224));
	archive__usage(ar, &files, &bytes);
	assert_int_equal(files, 3);
	archive__stats(ar, &as);
	assert_int_equal(as.evicted, 2);
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

/* The journal's directory (the archive's .staged-*), open. */
static int journal_fd(void)
{
	char path[4096 + 300];
	struct dirent *de;
	DIR *d = opendir(arch);
	int fd = -1;

	assert_non_null(d);
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, ".staged-", 8)) {
			snprintf(path, sizeof(path), "%s/%s", arch, de->d_name);
			fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		}
	closedir(d);
	assert_true(fd >= 0);
	return fd;
}

/*
 * The startup's listing runs after the processes' scan, which moves aside
 * the maps of dead processes whose pids were taken: this run's own staged
 * maps, queued already. Finished again, the second store found the map
 * gone and said "its map is not archived" for a map that was.
 */
static void test_this_runs_staged_maps_are_not_finished_twice(void **state)
{
	char staged[4096 + 300];
	struct archive_stats as;

	(void)state;
	ar = open_archive(1 << 20);
	archive__pause(ar, true);
	move_map(335, 4, 0);
	finish_all_staged();
	archive__pause(ar, false);
	archive__flush(ar);
	assert_true(archived(335));
	archive__stats(ar, &as);
	assert_int_equal(as.archived, 1);
	assert_int_equal(as.failed, 0);
	assert_int_equal(as.staged_refused, 0);

	/* Stored and its record gone after the listing read its name: not refused as planted either. */
	archive__pause(ar, true);
	move_map(336, 4, 0);
	staged_name(staged, sizeof(staged));
	archive__pause(ar, false);
	archive__flush(ar);
	archive__finish_staged(ar, strrchr(staged, '/') + 1);
	archive__stats(ar, &as);
	assert_int_equal(as.staged_refused, 0);
	assert_int_equal(as.archived, 2);
}

/* A record an agent wrote before runs were recorded: an earlier run's, finished. */
static void test_an_older_agents_record_is_finished(void **state)
{
	char staged[4096 + 300], rec_path[4096 + 400], line[256];
	struct staged_rec rec;
	int jfd, n;

	(void)state;
	ar = open_archive(1 << 20);
	archive__pause(ar, true);
	move_map(337, 4, 0);
	archive__free(ar);
	ar = NULL;
	staged_name(staged, sizeof(staged));
	jfd = journal_fd();
	assert_int_equal(archive_journal__get(jfd, strrchr(staged, '/') + 1, &rec), 0);
	assert_true(rec.run != 0);
	n = snprintf(line, sizeof(line), "v1 %s %llu %llu %u %u\n", rec.name,
		     (unsigned long long)rec.dev, (unsigned long long)rec.ino,
		     (unsigned int)rec.uid, (unsigned int)rec.gid);
	snprintf(rec_path, sizeof(rec_path), "/proc/self/fd/%d/%s", jfd, rec.staged);
	tu_write(rec_path, line, (size_t)n);
	assert_int_equal(archive_journal__get(jfd, rec.staged, &rec), 0);
	assert_int_equal(rec.run, 0);
	close(jfd);
	ar = open_archive(1 << 20);
	finish_all_staged();
	archive__flush(ar);
	assert_true(archived(337));
	assert_int_equal(count_in(maps, ".perfmapd."), 0);
}

/*
 * Killed after the archived map's link, before the staged map's removal:
 * the next start finds it archived by its mark and removes the staged map,
 * rather than archiving the same entries a second time (perf-<pid>-7-dup2,
 * charged to its owner's quota twice: with the archive full, the copy
 * evicted another of the owner's maps).
 */
static void test_a_map_archived_before_a_kill_is_not_archived_twice(void **state)
{
	char staged[4096 + 300], path[4096 + 200], mark[128];
	struct archive_file_res res;
	struct archive_stats as;
	struct staged_rec rec;
	struct stat st;
	int jfd, afd;

	(void)state;
	ar = open_archive(1 << 20);
	archive__pause(ar, true);
	move_map(340, 4, 0);
	staged_name(staged, sizeof(staged));
	jfd = journal_fd();
	assert_int_equal(archive_journal__get(jfd, strrchr(staged, '/') + 1, &rec), 0);
	close(jfd);
	/* What the worker had done when the kill came: the archived map written, marked and linked. */
	afd = open(arch, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(afd >= 0);
	{
		struct archive_file_req rq = {
			.dir = arch, .dir_fd = afd, .name = rec.name, .staged = rec.staged,
			.uid = rec.uid, .gid = rec.gid, .max_map_bytes = 1 << 20,
			.max_table_bytes = ARCHIVE_TABLE_MAX_BYTES,
		};

		rq.src_fd = open(staged, O_RDONLY | O_CLOEXEC);
		assert_true(rq.src_fd >= 0);
		assert_int_equal(fstat(rq.src_fd, &st), 0);
		rq.src_size = (uint64_t)st.st_size;
		assert_int_equal(archive_file__write(&rq, &res), 0);
		close(rq.src_fd);
	}
	snprintf(path, sizeof(path), "%s/%s", arch, res.name);
	if (getxattr(path, ARCHIVE_STAGED_XATTR, mark, sizeof(mark)) < 0) {
		close(afd);
		skip();  /* a file system without user.* attributes: archived twice, as before */
	}
	archive__free(ar);
	ar = NULL;
	assert_int_equal(count_in(maps, ".perfmapd."), 1);
	ar = open_archive(1 << 20);
	finish_all_staged();
	archive__flush(ar);
	assert_int_equal(count_in(arch, "perf-340-"), 1);
	assert_int_equal(count_in(maps, ".perfmapd."), 0);
	assert_int_equal(journal_records(), 0);
	archive__stats(ar, &as);
	assert_int_equal(as.archived, 1);
	/* Another staged map of the same name (pid and start) is not taken for it: the mark names one. */
	move_map(340, 6, 0);
	archive__flush(ar);
	assert_int_equal(count_in(arch, "perf-340-7-dup2.map"), 1);
	assert_int_equal(archive_file__find(afd, "perf-340-7.map", ".perfmapd.00000000000000000000000000000000.map",
					    mark, sizeof(mark)), -ENOENT);
	close(afd);
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
	cfg.max_queue = 8;  /* a uid's share: 2 */
	ar = archive__open(&cfg);
	archive__pause(ar, true);
	fds = open_fds();
	move_map(340, 4, 0);
	move_map(341, 4, 0);
	/* The uid's share full: not moved, the caller tries again later. */
	move_map(342, 4, -EAGAIN);
	assert_int_equal(access(tu_map_path(maps, 342), F_OK), 0);
	assert_int_equal(open_fds(), fds);
	archive__stats(ar, &as);
	assert_int_equal(as.deferred, 1);
	assert_int_equal(as.deferred_share, 1);
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

/* A map of @pid's owned by @uid, moved; expect @expect. */
static void move_map_of(pid_t pid, uid_t uid, int expect)
{
	struct stat st;

	make_map(pid, 4, 0, &st);
	assert_int_equal(chown(tu_map_path(maps, pid), uid, uid), 0);
	assert_int_equal(archive__move(ar, pid, 7, ARCHIVE_EXIT, st.st_dev, st.st_ino, UINT64_MAX),
			 expect);
}

/* One uid's maps fill its quarter of the queue, never the queue: another's still move. */
static void test_one_uids_full_share_does_not_stop_anothers(void **state)
{
	struct archive_config cfg = config(1 << 20);
	struct archive_stats as;
	pid_t pid;

	(void)state;
	if (geteuid()) {
		skip();  /* files of other uids */
		return;
	}
	cfg.max_queue = 8;
	ar = archive__open(&cfg);
	archive__pause(ar, true);
	for (pid = 350; pid < 352; pid++)
		move_map_of(pid, 65534, 0);
	for (pid = 352; pid < 360; pid++)
		move_map_of(pid, 65534, -EAGAIN);
	/* uid 65534's flood left room: three other users' maps move, two each. */
	for (pid = 360; pid < 366; pid++)
		move_map_of(pid, 1000 + (pid - 360) / 2, 0);
	/* Eight in all: the whole queue is full now, for a fifth user too. */
	move_map_of(366, 1003, -EAGAIN);
	archive__stats(ar, &as);
	assert_int_equal(as.deferred, 9);
	assert_int_equal(as.deferred_share, 8);
	archive__pause(ar, false);
	archive__flush(ar);
	/* Its share free again: the flood's next maps move. */
	move_map_of(352, 65534, 0);
	archive__flush(ar);
	assert_true(archived(350) && archived(352) && archived(360) && archived(365));
	assert_false(archived(366));
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

/* Take victims from @q within @max_bytes and @max_files, as the worker does; their names in @out. */
static size_t plan(struct archive_quota *q, uint64_t max_bytes, uint64_t max_files, char out[][32])
{
	const struct archived_file *f;
	size_t n = 0;

	while ((f = archive_quota__victim(q, max_bytes, max_files))) {
		snprintf(out[n++], 32, "%s", f->name);
		archive_quota__drop(q, f);
	}
	return n;
}

static struct archive_quota *quota_of(const struct archived_file *v, size_t n)
{
	struct archive_quota *q = archive_quota__new();
	size_t i;

	assert_non_null(q);
	for (i = 0; i < n; i++)
		assert_int_equal(archive_quota__add(q, v[i].name, v[i].cost, v[i].at, v[i].uid), 0);
	return q;
}

static void test_quota_victims_come_from_the_largest_user_first(void **state)
{
	const struct archived_file v[] = {
		{ "perf-3-1.map", 1 << 20, { 50, 0 }, 0, NULL },
		{ "perf-1-1.map", 132 << 20, { 100, 0 }, 1000, NULL },
		{ "perf-2-1.map", 132 << 20, { 101, 0 }, 1000, NULL },
		{ "perf-4-1.map", 1 << 20, { 102, 0 }, 2000, NULL },
	};
	const struct archived_file one[] = {
		{ "perf-7-1.map", 10, { 100, 0 }, 0, NULL },
		{ "perf-5-1.map", 10, { 200, 0 }, 0, NULL },
		{ "perf-6-1.map", 10, { 300, 0 }, 0, NULL },
	};
	char out[8][32];
	uint64_t files, bytes;
	struct archive_quota *q;
	size_t n;

	(void)state;
	/* uid 1000 holds the most: its oldest goes, though uid 0's map is older. */
	q = quota_of(v, 4);
	n = plan(q, 256ull << 20, 0, out);
	assert_int_equal(n, 1);
	assert_string_equal(out[0], "perf-1-1.map");
	/* Then its other, before anyone else's, while it still holds the most. */
	n = plan(q, 3ull << 20, 0, out);
	assert_int_equal(n, 1);
	assert_string_equal(out[0], "perf-2-1.map");
	archive_quota__usage(q, &files, &bytes);
	assert_int_equal(files, 2);
	assert_int_equal(bytes, 2 << 20);
	archive_quota__free(q);
	/* One user: the oldest first. */
	q = quota_of(one, 3);
	n = plan(q, 15, 0, out);
	assert_int_equal(n, 2);
	assert_string_equal(out[0], "perf-7-1.map");
	assert_string_equal(out[1], "perf-5-1.map");
	assert_int_equal(plan(q, 30, 0, out), 0);
	archive_quota__free(q);
	/* A file bound: the uid past it loses its oldest, whatever the bytes. */
	q = quota_of(v, 4);
	n = plan(q, 0, 1, out);
	assert_int_equal(n, 1);
	assert_string_equal(out[0], "perf-1-1.map");
	archive_quota__free(q);
	archive_quota__free(NULL);
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
	uint64_t one;
	pid_t pid;

	(void)state;
	if (geteuid()) {
		skip();  /* files of another uid */
		return;
	}
	/* What one of these maps costs, archived; then room for two and a half, from the next start. */
	ar = open_archive(1 << 20);
	make_attackers_map(399, 65534, &st);
	assert_int_equal(archive__move(ar, 399, 7, ARCHIVE_EXIT, st.st_dev, st.st_ino, UINT64_MAX), 0);
	archive__flush(ar);
	one = cost_of(399);
	snprintf(path, sizeof(path), "%s/perf-399-7.map", arch);
	assert_int_equal(unlink(path), 0);
	archive__free(ar);
	ar = open_archive(2 * one + one / 2);
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
	/* Readable or searchable by others is refused too: users could reach the maps chowned to them. */
	assert_int_equal(chmod(arch, 0755), 0);
	errno = 0;
	assert_null(open_archive(1 << 20));
	assert_int_equal(errno, EPERM);
	assert_int_equal(chmod(arch, 0701), 0);
	assert_null(open_archive(1 << 20));
	assert_int_equal(chmod(arch, 0700), 0);
	ar = open_archive(1 << 20);
	assert_non_null(ar);
}

/* As `perfmapctl restore` does: archived map @from back at @pid's path, marked; false where xattrs cannot be set. */
static bool restore_as_perfmapctl(pid_t pid, const char *from, struct stat *st)
{
	char path[4096 + 128];
	size_t len;
	char *data;
	int fd;
	bool ok;

	snprintf(path, sizeof(path), "%s/%s", arch, from);
	data = tu_read(path, &len);
	assert_non_null(data);
	tu_write(tu_map_path(maps, pid), data, len);
	free(data);
	fd = open(tu_map_path(maps, pid), O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	ok = !fsetxattr(fd, PERFMAP_RESTORED_XATTR, from, strlen(from), 0);
	close(fd);
	assert_int_equal(stat(tu_map_path(maps, pid), st), 0);
	return ok;
}

static void test_a_restored_map_is_deleted_not_archived_again(void **state)
{
	char path[4096 + 64];
	struct archive_stats as;
	struct stat st;

	(void)state;
	ar = open_archive(1 << 20);
	make_map(110, 4, 0, &st);
	assert_int_equal(archive__move(ar, 110, 7, ARCHIVE_EXIT, st.st_dev, st.st_ino, UINT64_MAX), 0);
	archive__flush(ar);
	assert_true(archived(110));
	if (!restore_as_perfmapctl(110, "perf-110-7.map", &st))
		skip();  /* a file system without user.* attributes */
	/* Its retention over, as any exited map: deleted, the archive unchanged. */
	assert_int_equal(archive__move(ar, 110, 0, ARCHIVE_EXIT, st.st_dev, st.st_ino, UINT64_MAX), 0);
	archive__flush(ar);
	assert_int_equal(access(tu_map_path(maps, 110), F_OK), -1);
	assert_int_equal(count_in(arch, "perf-110-"), 1);
	assert_int_equal(count_in(maps, ".perfmapd."), 0);
	archive__stats(ar, &as);
	assert_int_equal(as.restored_dropped, 1);
	assert_int_equal(as.archived, 1);

	/* Written since it was put back: new lines, archived as any map. */
	restore_as_perfmapctl(110, "perf-110-7.map", &st);
	append(tu_map_path(maps, 110), "9000 10 later_fn\n", 17);
	assert_int_equal(stat(tu_map_path(maps, 110), &st), 0);
	assert_int_equal(archive__move(ar, 110, 0, ARCHIVE_EXIT, st.st_dev, st.st_ino, UINT64_MAX), 0);
	archive__flush(ar);
	assert_int_equal(count_in(arch, "perf-110-"), 2);

	/* The archived map it came from is gone (the quota took it): archived again. */
	restore_as_perfmapctl(110, "perf-110-7.map", &st);
	snprintf(path, sizeof(path), "%s/perf-110-7.map", arch);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(archive__move(ar, 110, 0, ARCHIVE_EXIT, st.st_dev, st.st_ino, UINT64_MAX), 0);
	archive__flush(ar);
	assert_int_equal(count_in(arch, "perf-110-"), 2);
	archive__stats(ar, &as);
	assert_int_equal(as.restored_dropped, 1);
	assert_int_equal(as.archived, 3);
}

/* ---- jitdumps in the map directory, archived with their maps ---- */

static const char *dump_path(const char *dir, pid_t pid)
{
	static char path[4096 + 4096];

	snprintf(path, sizeof(path), "%s/jit-%d.dump", dir, (int)pid);
	return path;
}

/* @len bytes of a binary dump (NULs and all) at @path; what was written in @out (@len bytes). */
static void make_dump_at(const char *path, size_t len, char *out)
{
	size_t i;

	for (i = 0; i < len; i++)
		out[i] = (char)(i * 7 + (i >> 8));
	memcpy(out, "DTiJ", 4);  /* the magic, as a little-endian host writes it */
	tu_write(path, out, len);
	assert_int_equal(chmod(path, 0600), 0);
}

static char dump_data[64 << 10];

static void make_dump(pid_t pid, size_t len)
{
	make_dump_at(dump_path(maps, pid), len, dump_data);
}

/* The archived file @name holds the @len bytes of dump_data. */
static bool archived_as(const char *name, size_t len)
{
	char path[4096 + 128];
	size_t got;
	char *text;
	bool same;

	snprintf(path, sizeof(path), "%s/%s", arch, name);
	text = tu_read(path, &got);
	if (!text)
		return false;
	same = got == len && !memcmp(text, dump_data, len);
	free(text);
	return same;
}

static uint64_t cost_of_file(const char *name)
{
	char path[4096 + 128];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", arch, name);
	assert_int_equal(stat(path, &st), 0);
	return archive_quota__cost(&st);
}

/* Archive @pid's map (started at 7) with its jitdump of @len bytes beside it, and wait. */
static void archive_map_and_dump(pid_t pid, size_t len, time_t age)
{
	struct stat st;

	make_map(pid, 30, age, &st);
	make_dump(pid, len);
	assert_int_equal(archive__move(ar, pid, 7, ARCHIVE_EXIT, st.st_dev, st.st_ino, UINT64_MAX), 0);
	archive__flush(ar);
}

static void test_a_dump_in_the_map_dir_goes_with_its_map(void **state)
{
	struct archive_stats as;
	uint64_t files, bytes;
	char path[4096 + 64];
	struct stat st;

	(void)state;
	ar = open_archive(1 << 20);
	archive_map_and_dump(500, 20000, 0);
	assert_int_equal(access(tu_map_path(maps, 500), F_OK), -1);
	assert_int_equal(access(dump_path(maps, 500), F_OK), -1);
	assert_true(archived(500));
	/* Beside its map's archived name, byte for byte: a dump is binary, nothing to compact. */
	assert_true(archived_as("jit-500-7.dump", 20000));
	snprintf(path, sizeof(path), "%s/jit-500-7.dump", arch);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_uid, geteuid());
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(count_in(maps, ".perfmapd."), 0);
	assert_int_equal(journal_records(), 0);
	archive__stats(ar, &as);
	assert_int_equal(as.archived, 1);
	assert_int_equal(as.jitdumps_stored, 1);
	/* In the quota: one entry, its bytes the map's and the dump's. */
	archive__usage(ar, &files, &bytes);
	assert_int_equal(files, 1);
	assert_int_equal(bytes, cost_of(500) + cost_of_file("jit-500-7.dump"));
	/* The same, counted from the listing at the next start. */
	archive__free(ar);
	ar = open_archive(1 << 20);
	archive__usage(ar, &files, &bytes);
	assert_int_equal(files, 1);
	assert_int_equal(bytes, cost_of(500) + cost_of_file("jit-500-7.dump"));

	/* Only an exit's: an exec'd image's map, a stale one or a drop leaves the dump. */
	make_map(501, 4, 0, &st);
	make_dump(501, 100);
	assert_int_equal(archive__move(ar, 501, 7, ARCHIVE_EXEC, st.st_dev, st.st_ino, UINT64_MAX), 0);
	make_map(502, 4, 0, &st);
	make_dump(502, 100);
	assert_int_equal(archive__move(ar, 502, 7, ARCHIVE_STALE, st.st_dev, st.st_ino, UINT64_MAX), 0);
	make_map(503, 4, 0, &st);
	make_dump(503, 100);
	assert_int_equal(archive__move(ar, 503, 7, ARCHIVE_DROP, st.st_dev, st.st_ino, UINT64_MAX), 0);
	/* Nor a container's (tagged): its dump is named by the pid it has in its namespace. */
	make_map(504, 4, 0, &st);
	make_dump(504, 100);
	assert_int_equal(archive__move_tagged(ar, 504, 7, ARCHIVE_EXIT, st.st_dev, st.st_ino,
					      UINT64_MAX, "c0123456789ab"), 0);
	archive__flush(ar);
	assert_int_equal(access(dump_path(maps, 501), F_OK), 0);
	assert_int_equal(access(dump_path(maps, 502), F_OK), 0);
	assert_int_equal(access(dump_path(maps, 503), F_OK), 0);
	assert_int_equal(access(dump_path(maps, 504), F_OK), 0);
	assert_int_equal(count_in(arch, "jit-"), 1);
}

/* A pid's second map of the same start gets "-dup2": its dump the same, beside it. */
static void test_a_dump_is_named_beside_its_maps_archived_name(void **state)
{
	(void)state;
	ar = open_archive(1 << 20);
	archive_map_and_dump(505, 1000, 0);
	archive_map_and_dump(505, 2000, 0);
	assert_int_equal(count_in(arch, "perf-505-7-dup2.map"), 1);
	assert_true(archived_as("jit-505-7-dup2.dump", 2000));
	assert_int_equal(count_in(arch, "jit-505-7"), 2);
}

static void test_the_quota_evicts_a_dump_with_its_map(void **state)
{
	struct archive_stats as;
	uint64_t files, bytes, pair;
	pid_t pid;

	(void)state;
	/* What a map and its dump cost, archived; then room for two and a half, from the next start. */
	ar = open_archive(1 << 20);
	archive_map_and_dump(510, 20000, 600);
	pair = cost_of(510) + cost_of_file("jit-510-7.dump");
	archive__free(ar);
	ar = open_archive(2 * pair + pair / 2);
	for (pid = 511; pid < 513; pid++)
		archive_map_and_dump(pid, 20000, 600 - (pid - 510) * 100);
	/* The oldest pair went, both of its files; the others stay, both of theirs. */
	assert_false(archived(510));
	assert_int_equal(count_in(arch, "jit-510-"), 0);
	for (pid = 511; pid < 513; pid++) {
		assert_true(archived(pid));
		assert_int_equal(cost_of(pid) + cost_of_file(pid == 511 ? "jit-511-7.dump" : "jit-512-7.dump"),
				 pair);
	}
	archive__stats(ar, &as);
	assert_int_equal(as.evicted, 1);
	assert_int_equal(as.jitdumps_evicted, 1);
	assert_int_equal(as.jitdumps_stored, 2);
	archive__usage(ar, &files, &bytes);
	assert_int_equal(files, 2);
	assert_int_equal(bytes, 2 * pair);
}

static void test_a_dump_is_refused_as_a_map_would_be(void **state)
{
	struct archive_config cfg = config(1 << 20);
	char target[4096 + 64], link2[4096 + 64], *text;
	struct archive_stats as;
	struct stat st, before;
	size_t len;
	int fd;

	(void)state;
	cfg.max_dump_bytes = 4096;
	ar = archive__open(&cfg);
	/* A symlink at the name: neither it nor its target moves. */
	snprintf(target, sizeof(target), "%s/precious", top);
	tu_write(target, "precious", 8);
	make_map(520, 4, 0, &st);
	assert_int_equal(symlink(target, dump_path(maps, 520)), 0);
	assert_int_equal(archive__move(ar, 520, 7, ARCHIVE_EXIT, st.st_dev, st.st_ino, UINT64_MAX), 0);
	/* Hard-linked: another name for the same file, elsewhere. */
	make_map(521, 4, 0, &st);
	make_dump(521, 100);
	snprintf(link2, sizeof(link2), "%s/jit-link", top);
	assert_int_equal(link(dump_path(maps, 521), link2), 0);
	assert_int_equal(archive__move(ar, 521, 7, ARCHIVE_EXIT, st.st_dev, st.st_ino, UINT64_MAX), 0);
	/* Not a regular file. */
	make_map(522, 4, 0, &st);
	assert_int_equal(mkfifo(dump_path(maps, 522), 0600), 0);
	assert_int_equal(archive__move(ar, 522, 7, ARCHIVE_EXIT, st.st_dev, st.st_ino, UINT64_MAX), 0);
	/* Open for writing (a process at the pid again, a child writing on): the lease says no. */
	make_map(523, 4, 0, &st);
	make_dump(523, 100);
	fd = open(dump_path(maps, 523), O_WRONLY | O_APPEND | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(archive__move(ar, 523, 7, ARCHIVE_EXIT, st.st_dev, st.st_ino, UINT64_MAX), 0);
	close(fd);
	/* Larger than the bound: left, counted. */
	make_map(524, 4, 0, &st);
	make_dump(524, 5000);
	assert_int_equal(archive__move(ar, 524, 7, ARCHIVE_EXIT, st.st_dev, st.st_ino, UINT64_MAX), 0);
	archive__flush(ar);
	/* Every map archived; every dump where it was, as it was. */
	assert_true(archived(520) && archived(521) && archived(522) && archived(523) && archived(524));
	assert_int_equal(lstat(dump_path(maps, 520), &before), 0);
	assert_true(S_ISLNK(before.st_mode));
	text = tu_read(target, &len);
	assert_true(text && len == 8 && !memcmp(text, "precious", 8));
	free(text);
	assert_int_equal(stat(dump_path(maps, 521), &before), 0);
	assert_int_equal(before.st_nlink, 2);
	assert_int_equal(lstat(dump_path(maps, 522), &before), 0);
	assert_true(S_ISFIFO(before.st_mode));
	assert_int_equal(access(dump_path(maps, 523), F_OK), 0);
	assert_int_equal(stat(dump_path(maps, 524), &before), 0);
	assert_int_equal(before.st_size, 5000);
	assert_int_equal(count_in(arch, "jit-"), 0);
	assert_int_equal(count_in(maps, ".perfmapd."), 0);
	archive__stats(ar, &as);
	assert_int_equal(as.jitdumps_refused, 3);
	assert_int_equal(as.jitdumps_busy, 1);
	assert_int_equal(as.jitdumps_too_large, 1);
	assert_int_equal(as.jitdumps_stored, 0);
	assert_int_equal(as.archived, 5);

	/* Another uid's dump beside the map: not the map owner's, left. */
	if (geteuid())
		return;
	make_map(525, 4, 0, &st);
	make_dump(525, 100);
	assert_int_equal(chown(dump_path(maps, 525), 65534, 65534), 0);
	assert_int_equal(archive__move(ar, 525, 7, ARCHIVE_EXIT, st.st_dev, st.st_ino, UINT64_MAX), 0);
	archive__flush(ar);
	assert_true(archived(525));
	assert_int_equal(stat(dump_path(maps, 525), &before), 0);
	assert_int_equal(before.st_uid, 65534);
	archive__stats(ar, &as);
	assert_int_equal(as.jitdumps_refused, 4);
	assert_int_equal(count_in(arch, "jit-"), 0);
}

/* A dump outside the map directory, and another pid's in it, are never touched. */
static void test_a_dump_elsewhere_is_untouched(void **state)
{
	char elsewhere[4096 + 64], data[512];
	struct stat st, before, after;
	size_t len;
	char *text;

	(void)state;
	ar = open_archive(1 << 20);
	snprintf(elsewhere, sizeof(elsewhere), "%s/cwd", top);
	assert_int_equal(mkdir(elsewhere, 0700), 0);
	make_dump_at(dump_path(elsewhere, 530), sizeof(data), data);
	make_dump(531, 300);
	assert_int_equal(stat(dump_path(elsewhere, 530), &before), 0);
	make_map(530, 4, 0, &st);
	assert_int_equal(archive__move(ar, 530, 7, ARCHIVE_EXIT, st.st_dev, st.st_ino, UINT64_MAX), 0);
	archive__flush(ar);
	assert_true(archived(530));
	assert_int_equal(stat(dump_path(elsewhere, 530), &after), 0);
	assert_int_equal(after.st_ino, before.st_ino);
	text = tu_read(dump_path(elsewhere, 530), &len);
	assert_true(text && len == sizeof(data) && !memcmp(text, data, len));
	free(text);
	assert_int_equal(access(dump_path(maps, 531), F_OK), 0);
	assert_int_equal(count_in(arch, "jit-"), 0);
}

/* Staged with its map when the agent stopped: journaled, finished at the next start. */
static void test_a_staged_dump_is_finished_at_the_next_start(void **state)
{
	uint64_t files, bytes;
	struct stat st;

	(void)state;
	ar = open_archive(1 << 20);
	archive__pause(ar, true);
	make_map(540, 4, 0, &st);
	make_dump(540, 3000);
	assert_int_equal(archive__move(ar, 540, 7, ARCHIVE_EXIT, st.st_dev, st.st_ino, UINT64_MAX), 0);
	assert_int_equal(access(dump_path(maps, 540), F_OK), -1);
	archive__free(ar);
	ar = NULL;
	assert_int_equal(count_in(maps, ".perfmapd."), 2);
	assert_int_equal(journal_records(), 2);
	ar = open_archive(1 << 20);
	finish_all_staged();
	archive__flush(ar);
	assert_true(archived(540));
	assert_true(archived_as("jit-540-7.dump", 3000));
	assert_int_equal(count_in(maps, ".perfmapd."), 0);
	assert_int_equal(journal_records(), 0);
	/* Counted with its map from the next start's listing. */
	archive__free(ar);
	ar = open_archive(1 << 20);
	archive__usage(ar, &files, &bytes);
	assert_int_equal(files, 1);
	assert_int_equal(bytes, cost_of(540) + cost_of_file("jit-540-7.dump"));
}

/* As `perfmapctl restore` puts a dump back beside its map: a copy, marked; false without xattrs. */
static bool restore_dump_as_perfmapctl(pid_t pid, const char *from)
{
	char path[4096 + 128];
	size_t len;
	char *data;
	bool ok;

	snprintf(path, sizeof(path), "%s/%s", arch, from);
	data = tu_read(path, &len);
	assert_non_null(data);
	tu_write(dump_path(maps, pid), data, len);
	free(data);
	ok = !setxattr(dump_path(maps, pid), PERFMAP_RESTORED_XATTR, from, strlen(from), 0);
	return ok;
}

static void test_a_restored_dump_is_deleted_not_archived_again(void **state)
{
	struct archive_stats as;
	struct stat st;

	(void)state;
	ar = open_archive(1 << 20);
	archive_map_and_dump(550, 4000, 0);
	assert_true(archived_as("jit-550-7.dump", 4000));
	if (!restore_as_perfmapctl(550, "perf-550-7.map", &st) ||
	    !restore_dump_as_perfmapctl(550, "jit-550-7.dump"))
		skip();  /* a file system without user.* attributes */
	assert_int_equal(archive__move(ar, 550, 0, ARCHIVE_EXIT, st.st_dev, st.st_ino, UINT64_MAX), 0);
	archive__flush(ar);
	assert_int_equal(access(tu_map_path(maps, 550), F_OK), -1);
	assert_int_equal(access(dump_path(maps, 550), F_OK), -1);
	assert_int_equal(count_in(arch, "perf-550-"), 1);
	assert_int_equal(count_in(arch, "jit-550-"), 1);
	archive__stats(ar, &as);
	assert_int_equal(as.restored_dropped, 1);
	assert_int_equal(as.jitdumps_restored_dropped, 1);
	assert_int_equal(as.jitdumps_stored, 1);

	/* The map written since, the dump not: the map archived again, the dump deleted. */
	restore_as_perfmapctl(550, "perf-550-7.map", &st);
	restore_dump_as_perfmapctl(550, "jit-550-7.dump");
	append(tu_map_path(maps, 550), "9000 10 later_fn\n", 17);
	assert_int_equal(stat(tu_map_path(maps, 550), &st), 0);
	assert_int_equal(archive__move(ar, 550, 0, ARCHIVE_EXIT, st.st_dev, st.st_ino, UINT64_MAX), 0);
	archive__flush(ar);
	assert_int_equal(count_in(arch, "perf-550-"), 2);
	assert_int_equal(count_in(arch, "jit-550-"), 1);
	assert_int_equal(access(dump_path(maps, 550), F_OK), -1);
	archive__stats(ar, &as);
	assert_int_equal(as.jitdumps_restored_dropped, 2);
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
		T(test_this_runs_staged_maps_are_not_finished_twice),
		T(test_an_older_agents_record_is_finished),
		T(test_a_map_archived_before_a_kill_is_not_archived_twice),
		T(test_an_archive_is_never_replaced),
		T(test_the_queue_is_bounded_and_holds_no_fd),
		T(test_a_squatted_map_moves_while_written_and_past_a_full_queue),
		T(test_a_map_too_large_to_compact_is_stored_as_it_is),
		T(test_a_map_grown_past_the_bound_is_not_left_staged),
		T(test_quota_victims_come_from_the_largest_user_first),
		T(test_usage_counts_blocks_from_the_index),
		T(test_a_uids_file_bound_evicts_its_oldest),
		T(test_one_uids_full_share_does_not_stop_anothers),
		T(test_a_users_future_mtimes_evict_only_their_own),
		T(test_a_temporary_file_left_by_a_crash_is_removed_at_the_start),
		T(test_refuses_an_archive_others_can_write),
		T(test_a_restored_map_is_deleted_not_archived_again),
		T(test_a_dump_in_the_map_dir_goes_with_its_map),
		T(test_a_dump_is_named_beside_its_maps_archived_name),
		T(test_the_quota_evicts_a_dump_with_its_map),
		T(test_a_dump_is_refused_as_a_map_would_be),
		T(test_a_dump_elsewhere_is_untouched),
		T(test_a_staged_dump_is_finished_at_the_next_start),
		T(test_a_restored_dump_is_deleted_not_archived_again),
#undef T
	};

	log_max_level = getenv("TEST_LOG") ? LOG_DEBUG : LOG_ERROR;
	return cmocka_run_group_tests(tests, NULL, NULL);
}

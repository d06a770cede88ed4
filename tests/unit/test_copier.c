/*
 * copier and mapfile: a child's copy made by a worker thread, holes and
 * all; a copy settled before it shows never shows; the queue's bounds.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/copier.h"
#include "lib/log.h"
#include "perfmap.h"
#include "lib/procfs.h"
#include "testutil.h"

#define PARENT 4000001          /* only a name: the parent's map is read, never its process */
#define SPARSE_SIZE (64 << 20)
/*
 * The entries name memory this process (the child) has mapped, at JIT_BASE:
 * a copy leaves out what the child did not inherit.
 */
#define JIT_BASE 0x300000000000ul  /* above ASan's shadow, below any mmap()'s choice */
#define JIT_PAGES 16
#define HEAD "300000001000 10 first\n300000002000 10 second\n"
#define TAIL "300000003000 10 past_the_hole\n"

static char *dir;
static int dir_fd;
static struct copier *C;
static struct map_info parent_map;
static struct copy_req rq;

/* What copier__drain() handed back. */
static struct {
	int calls, err;
	uint64_t ticket;
	struct copy_result res;
} done;

static void on_done(void *ctx, pid_t child, uint64_t ticket, enum copy_op op, int err,
		    const struct copy_result *res)
{
	(void)ctx;
	(void)op;
	assert_int_equal(child, getpid());
	done.calls++;
	done.err = err;
	done.ticket = ticket;
	done.res = *res;
}

static void open_copier(unsigned int threads, unsigned int per_uid)
{
	const struct copier_config cfg = {
		.map_dir_fd = dir_fd, .max_map_bytes = 1ull << 30, .threads = threads,
		.queue_max = 16, .queue_per_uid = per_uid,
	};

	C = copier__open(&cfg);
	assert_non_null(C);
}

/* The parent's map at its path, and the request for a copy of it to us (the child). */
static void make_parent(bool sparse)
{
	const char *path = tu_map_path(dir, PARENT);
	struct proc_info self;
	struct stat st;
	int fd;

	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, HEAD, strlen(HEAD)), (ssize_t)strlen(HEAD));
	if (sparse)
		assert_int_equal(ftruncate(fd, SPARSE_SIZE - strlen(TAIL)), 0);
	assert_int_equal(write(fd, TAIL, strlen(TAIL)), (ssize_t)strlen(TAIL));
	assert_int_equal(fstat(fd, &st), 0);
	close(fd);
	parent_map = (struct map_info){ .dev = st.st_dev, .ino = st.st_ino, .size = st.st_size,
					.disk_bytes = (uint64_t)st.st_blocks * 512, .uid = st.st_uid };
	assert_int_equal(procfs_read(getpid(), &self), 0);
	rq = (struct copy_req){ .parent = PARENT, .child = getpid(),
				.child_start_ticks = self.start_ticks, .uid = getuid(),
				.gid = getgid(), .parent_map = &parent_map };
}

/* Wait (10 s at most) until the workers announce a copy, and drain it. */
static void wait_done(void)
{
	struct pollfd pfd = { .fd = copier__fd(C), .events = POLLIN };
	int i;

	for (i = 0; i < 100 && !done.calls; i++) {
		poll(&pfd, 1, 100);
		copier__drain(C, on_done, NULL);
	}
	assert_int_equal(done.calls, 1);
}

static int setup(void **state)
{
	(void)state;
	memset(&done, 0, sizeof(done));
	dir = tu_mkdtemp();
	if (!dir)
		return -1;
	dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return dir_fd >= 0 ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	copier__free(C);
	C = NULL;
	close(dir_fd);
	tu_rmdir(dir);
	return 0;
}

static void test_sparse_parent_is_copied_without_its_holes(void **state)
{
	char child[4096], buf[64];
	struct stat st;
	int fd;

	(void)state;
	make_parent(true);
	snprintf(child, sizeof(child), "%s", tu_map_path(dir, getpid()));
	/* What the policy charges: the blocks on disk, not 64 MB. */
	assert_true(parent_map.disk_bytes < (1 << 20));
	open_copier(1, 4);
	assert_int_equal(copier__submit(C, &rq, COPY_OP_CREATE, 7), 0);
	wait_done();
	assert_int_equal(done.err, 0);
	assert_true(done.ticket == 7);
	assert_int_equal(done.res.kind, COPY_CREATED);
	assert_int_equal(done.res.entries, 3);
	/* Written: the data, not the hole. */
	assert_true(done.res.bytes >= strlen(HEAD) + strlen(TAIL));
	assert_true(done.res.bytes < (1 << 20));
	assert_int_equal(stat(child, &st), 0);
	assert_int_equal(st.st_size, SPARSE_SIZE);
	assert_true((uint64_t)st.st_blocks * 512 < (1 << 20));
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_true(done.res.map.ino == st.st_ino);
	/* Byte for byte where the parent wrote. */
	fd = open(child, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, buf, strlen(HEAD), 0), (ssize_t)strlen(HEAD));
	assert_memory_equal(buf, HEAD, strlen(HEAD));
	assert_int_equal(pread(fd, buf, strlen(TAIL), SPARSE_SIZE - strlen(TAIL)),
			 (ssize_t)strlen(TAIL));
	assert_memory_equal(buf, TAIL, strlen(TAIL));
	close(fd);
}

/*
 * A stretch ending in more than PERFMAP_LINE_MAX bytes without a newline is
 * not scanned back to its last one: its lines are given up, and the copy
 * ends with the stretch before (a dense map without newlines is not read
 * whole in the event loop to find where its lines end).
 */
static void test_a_stretch_ending_in_a_long_run_is_not_scanned_whole(void **state)
{
	static char run[3 * PERFMAP_LINE_MAX];
	struct stat st;
	int fd;

	(void)state;
	make_parent(true);
	memset(run, 'x', sizeof(run));
	fd = open(tu_map_path(dir, PARENT), O_WRONLY | O_APPEND | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, run, sizeof(run)), (ssize_t)sizeof(run));
	assert_int_equal(fstat(fd, &st), 0);
	close(fd);
	parent_map.size = st.st_size;
	parent_map.disk_bytes = (uint64_t)st.st_blocks * 512;
	open_copier(1, 4);
	assert_int_equal(copier__submit(C, &rq, COPY_OP_CREATE, 8), 0);
	wait_done();
	assert_int_equal(done.err, 0);
	assert_int_equal(done.res.entries, 2);
	assert_int_equal(stat(tu_map_path(dir, getpid()), &st), 0);
	assert_int_equal(st.st_size, strlen(HEAD));
}

static void test_append_reads_only_the_parents_data(void **state)
{
	const char *own = "300000005000 10 own\n";
	size_t len;
	char *text;

	(void)state;
	make_parent(true);
	tu_write(tu_map_path(dir, getpid()), own, strlen(own));
	open_copier(1, 4);
	assert_int_equal(copier__submit(C, &rq, COPY_OP_APPEND, 8), 0);
	wait_done();
	assert_int_equal(done.err, 0);
	assert_int_equal(done.res.kind, COPY_APPENDED);
	/*
	 * The tail's line begins in the hole (NULs first): no reader takes it
	 * from the parent's map, and it is not taken into the child's either.
	 */
	assert_int_equal(done.res.entries, 2);
	text = tu_read(tu_map_path(dir, getpid()), &len);
	assert_non_null(text);
	/* The runtime's own line, then the parent's two, no NULs. */
	assert_int_equal(len, strlen(text));
	assert_int_equal(tu_count_char(text, len, '\n'), 3);
	assert_true(!strncmp(text, own, strlen(own)));
	assert_non_null(strstr(text, "300000002000 10 second\n"));
	assert_true(done.res.bytes == len - strlen(own));
	free(text);
}

static void test_copy_settled_while_queued_never_shows(void **state)
{
	struct copy_result res = { 0 };

	(void)state;
	make_parent(false);
	/* No worker: the copies wait in the queue. */
	open_copier(0, 2);
	assert_int_equal(copier__submit(C, &rq, COPY_OP_CREATE, 1), 0);
	assert_int_equal(copier__submit(C, &rq, COPY_OP_CREATE, 2), 0);
	/* A uid's share of the queue is bounded. */
	assert_int_equal(copier__submit(C, &rq, COPY_OP_CREATE, 3), -EAGAIN);
	assert_int_equal(copier__settle(C, 1, &res), -ECANCELED);
	assert_int_equal(copier__settle(C, 2, &res), -ECANCELED);
	/* Settled twice, or never queued: nothing of it will show either. */
	assert_int_equal(copier__settle(C, 2, &res), -ECANCELED);
	assert_int_equal(access(tu_map_path(dir, getpid()), F_OK), -1);
	copier__drain(C, on_done, NULL);
	assert_int_equal(done.calls, 0);
}

static void test_copy_past_its_data_bound_stops_unshown(void **state)
{
	(void)state;
	make_parent(false);
	/* The parent's map grew past what the policy charged for. */
	rq.max_data = 8;
	open_copier(1, 4);
	assert_int_equal(copier__submit(C, &rq, COPY_OP_CREATE, 9), 0);
	wait_done();
	assert_int_equal(done.err, -EFBIG);
	assert_int_equal(access(tu_map_path(dir, getpid()), F_OK), -1);
}

static void test_copy_of_a_replaced_parent_map_is_refused(void **state)
{
	(void)state;
	make_parent(false);
	/* Judged one file; another is at the path by now. */
	parent_map.ino++;
	open_copier(1, 4);
	assert_int_equal(copier__submit(C, &rq, COPY_OP_CREATE, 10), 0);
	wait_done();
	assert_int_equal(done.err, -EAGAIN);
	assert_int_equal(access(tu_map_path(dir, getpid()), F_OK), -1);
}

/* A parent's map of @mb MiB of lines, all data. */
static void make_dense_parent(int mb)
{
	static char chunk[1 << 20];
	size_t i, n = strlen(HEAD);
	int fd, k;

	for (i = 0; i + n <= sizeof(chunk); i += n)
		memcpy(chunk + i, HEAD, n);
	make_parent(false);
	fd = open(tu_map_path(dir, PARENT), O_WRONLY | O_TRUNC | O_CLOEXEC);
	assert_true(fd >= 0);
	for (k = 0; k < mb; k++)
		assert_int_equal(write(fd, chunk, i), (ssize_t)i);
	close(fd);
	make_parent(false);  /* the request for the file as it is now */
}

static void test_settling_a_running_copy_shows_all_or_nothing(void **state)
{
	struct copy_result res;
	struct stat st;
	int round, err;

	(void)state;
	make_dense_parent(16);
	/* Settled at different moments of the copy: stopped and absent, or whole. */
	for (round = 0; round < 4; round++) {
		unlink(tu_map_path(dir, getpid()));
		open_copier(1, 4);
		assert_int_equal(copier__submit(C, &rq, COPY_OP_CREATE, 20 + round), 0);
		/* The last round settles a finished copy: it is there, whole. */
		if (round == 3) {
			struct pollfd pfd = { .fd = copier__fd(C), .events = POLLIN };

			assert_int_equal(poll(&pfd, 1, 30000), 1);
		} else {
			usleep(round * 20000);
		}
		res = (struct copy_result){ 0 };
		err = copier__settle(C, 20 + round, &res);
		/* Stopped while being made: nothing shows, and its cost so far comes back, drained. */
		if (err == -EINPROGRESS) {
			done.calls = 0;
			wait_done();
			assert_int_equal(done.ticket, 20 + round);
			assert_true(done.err != 0);
			assert_true(done.res.bytes <= parent_map.size);
		}
		copier__free(C);  /* the workers done: whatever was to show has */
		C = NULL;
		if (err == -ECANCELED || err == -EINPROGRESS) {
			assert_int_equal(access(tu_map_path(dir, getpid()), F_OK), -1);
			continue;
		}
		assert_int_equal(err, 0);
		assert_int_equal(stat(tu_map_path(dir, getpid()), &st), 0);
		assert_int_equal(st.st_size, parent_map.size);
		assert_true(res.map.ino == st.st_ino);
	}
}

/* A freed region's entry and a MADV_DONTFORK region's: the child has neither. */
static void test_entries_of_memory_not_inherited_are_left_out(void **state)
{
	const char *extra = "310000000000 10 freed_code\n300000004000 10 dontfork_code\n";
	long page = sysconf(_SC_PAGESIZE);
	size_t len;
	char *text;
	int fd;

	(void)state;
	make_parent(false);
	fd = open(tu_map_path(dir, PARENT), O_WRONLY | O_APPEND | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, extra, strlen(extra)), (ssize_t)strlen(extra));
	close(fd);
	/* As fork leaves it in the child: the page is not there. */
	assert_int_equal(munmap((void *)(JIT_BASE + 4 * page), page), 0);
	parent_map.size += strlen(extra);
	parent_map.disk_bytes += strlen(extra);
	open_copier(1, 4);
	assert_int_equal(copier__submit(C, &rq, COPY_OP_CREATE, 9), 0);
	wait_done();
	assert_int_equal(done.err, 0);
	assert_int_equal(done.res.left_out, 2);
	assert_false(done.res.unfiltered);
	text = tu_read(tu_map_path(dir, getpid()), &len);
	assert_non_null(text);
	assert_string_equal(text, HEAD TAIL);
	free(text);
	assert_true(mmap((void *)(JIT_BASE + 4 * page), page, PROT_READ | PROT_EXEC,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED);
}

/* A run longer than the read buffer is no line: never judged or written in pieces. */
static void test_filtered_copy_never_writes_part_of_a_long_run(void **state)
{
	const char *tail = "310000000000 10 freed_code\n300000002000 10 after_the_run\n";
	size_t run = 600 << 10, len;
	char *text, *junk;
	int fd;

	(void)state;
	make_parent(false);
	fd = open(tu_map_path(dir, PARENT), O_WRONLY | O_APPEND | O_CLOEXEC);
	assert_true(fd >= 0);
	junk = malloc(run + 1);
	assert_non_null(junk);
	/* Hex digits and spaces: every piece of it would read as an entry. */
	memset(junk, ' ', run);
	memcpy(junk + (300 << 10), "300000001000 10 a_piece_of_the_run", 31);
	junk[run] = '\n';
	assert_int_equal(write(fd, junk, run + 1), (ssize_t)run + 1);
	assert_int_equal(write(fd, tail, strlen(tail)), (ssize_t)strlen(tail));
	free(junk);
	close(fd);
	parent_map.size += run + 1 + strlen(tail);
	parent_map.disk_bytes = parent_map.size;
	open_copier(1, 4);
	assert_int_equal(copier__submit(C, &rq, COPY_OP_CREATE, 10), 0);
	wait_done();
	assert_int_equal(done.err, 0);
	assert_int_equal(done.res.left_out, 1);
	text = tu_read(tu_map_path(dir, getpid()), &len);
	assert_non_null(text);
	assert_string_equal(text, HEAD TAIL "300000002000 10 after_the_run\n");
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
		T(test_sparse_parent_is_copied_without_its_holes),
		T(test_a_stretch_ending_in_a_long_run_is_not_scanned_whole),
		T(test_append_reads_only_the_parents_data),
		T(test_copy_settled_while_queued_never_shows),
		T(test_copy_past_its_data_bound_stops_unshown),
		T(test_copy_of_a_replaced_parent_map_is_refused),
		T(test_settling_a_running_copy_shows_all_or_nothing),
		T(test_entries_of_memory_not_inherited_are_left_out),
		T(test_filtered_copy_never_writes_part_of_a_long_run),
#undef T
	};

	log_max_level = LOG_ERROR;
	if (mmap((void *)JIT_BASE, JIT_PAGES * sysconf(_SC_PAGESIZE), PROT_READ | PROT_EXEC,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) != (void *)JIT_BASE) {
		perror("test_copier: mmap at JIT_BASE");
		return 1;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* perfmap_open_map(): every trap a world-writable /tmp can hold is refused, and nothing hangs. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
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

/*
 * The fallback reopen. Without /proc, perfmap_open_map() cannot reopen the
 * inode it checked through /proc/self/fd, so it opens the path a second
 * time, and must refuse what it finds there unless it is that same inode:
 * between the two opens, anyone who can write the directory may have put
 * something else at the path.
 *
 * A child with a mount namespace of its own, with an empty tmpfs on /proc,
 * opens the map under ptrace. When it tries /proc/self/fd, that is after its
 * checks and before its second open of the path, the tracer can put a trap at
 * the path: a hard link to a file of somebody else.
 */
struct fallback_result {
	int ret;	/* perfmap_open_map()'s */
	ino_t ino;	/* of the fd it returned */
	char opens[8];	/* 'p' per open of the path, 'f' per /proc/self/fd, in order */
};

static void child_open_without_proc(int out)
{
	struct fallback_result r = { 0 };
	struct stat st;

	/* Private first, so the tmpfs cannot propagate to everybody's /proc. */
	if ((unshare(CLONE_NEWNS) && unshare(CLONE_NEWUSER | CLONE_NEWNS)) ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	    mount("none", "/proc", "tmpfs", 0, NULL))
		_exit(77);
	if (ptrace(PTRACE_TRACEME, 0, NULL, NULL))
		_exit(78);
	raise(SIGSTOP);
	r.ret = perfmap_open_map(path, NULL);
	if (r.ret >= 0 && !fstat(r.ret, &st))
		r.ino = st.st_ino;
	_exit(write(out, &r, sizeof(r)) == (ssize_t)sizeof(r) ? 0 : 1);
}

/* The NUL-terminated string at @addr in @pid, cut to @size. */
static void peek_string(pid_t pid, unsigned long addr, char *buf, size_t size)
{
	size_t i = 0;
	long word;

	while (i + sizeof(word) < size) {
		errno = 0;
		word = ptrace(PTRACE_PEEKDATA, pid, (void *)(addr + i), NULL);
		if (errno)
			break;
		memcpy(buf + i, &word, sizeof(word));
		if (memchr(&word, '\0', sizeof(word)))
			return;
		i += sizeof(word);
	}
	buf[i] = '\0';
}

/*
 * Run the child, note its opens of the path and of /proc/self/fd, and
 * rename @trap to the path at its first /proc/self/fd open if @trap is set.
 * Skips if namespaces or ptrace are not allowed here.
 */
static void open_without_proc(const char *trap, struct fallback_result *r)
{
	struct __ptrace_syscall_info info;
	struct fallback_result got;
	char arg[4096];
	size_t nopens = 0;
	int pipefd[2], status, sig = 0;
	unsigned long name;
	bool swapped = false, no_info = false;
	pid_t child;

	assert_int_equal(pipe(pipefd), 0);
	child = fork();
	assert_true(child >= 0);
	if (!child) {
		close(pipefd[0]);
		child_open_without_proc(pipefd[1]);
	}
	close(pipefd[1]);
	alarm(30);  /* a lost tracee fails the test instead of hanging it */
	/* Its SIGSTOP, or its exit if it could not set up. */
	assert_int_equal(waitpid(child, &status, 0), child);
	if (WIFEXITED(status)) {
		close(pipefd[0]);
		alarm(0);
		if (WEXITSTATUS(status) == 77 || WEXITSTATUS(status) == 78)
			skip();  /* no mount namespace or no ptrace for us */
		fail_msg("child exited with %d before opening", WEXITSTATUS(status));
	}
	assert_int_equal(ptrace(PTRACE_SETOPTIONS, child, NULL,
				PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL), 0);
	/* No asserts until it is reaped: a failed one would leave it stopped. */
	for (;;) {
		if (ptrace(PTRACE_SYSCALL, child, NULL, (void *)(long)sig) ||
		    waitpid(child, &status, 0) != child)
			break;
		sig = 0;
		if (WIFEXITED(status) || WIFSIGNALED(status))
			break;
		if (WSTOPSIG(status) != (SIGTRAP | 0x80)) {
			sig = WSTOPSIG(status);  /* the child's own: pass it on */
			continue;
		}
		if (ptrace(PTRACE_GET_SYSCALL_INFO, child, (void *)sizeof(info), &info) <= 0) {
			no_info = true;  /* before Linux 5.3 */
			kill(child, SIGKILL);
			continue;
		}
		if (info.op != PTRACE_SYSCALL_INFO_ENTRY)
			continue;
		if (info.entry.nr == SYS_openat)
			name = info.entry.args[1];
#ifdef SYS_open
		else if (info.entry.nr == SYS_open)
			name = info.entry.args[0];
#endif
		else
			continue;
		peek_string(child, name, arg, sizeof(arg));
		if (!strncmp(arg, "/proc/self/fd/", 14)) {
			if (trap && !swapped && rename(trap, path) == 0)
				swapped = true;
			if (nopens < sizeof(r->opens) - 1)
				r->opens[nopens++] = 'f';
		} else if (!strcmp(arg, path) && nopens < sizeof(r->opens) - 1) {
			r->opens[nopens++] = 'p';
		}
	}
	r->opens[nopens] = '\0';
	if (!WIFEXITED(status) && !WIFSIGNALED(status)) {
		kill(child, SIGKILL);
		waitpid(child, &status, 0);
	}
	alarm(0);
	if (no_info) {
		close(pipefd[0]);
		skip();
	}
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(read(pipefd[0], &got, sizeof(got)), sizeof(got));
	close(pipefd[0]);
	r->ret = got.ret;
	r->ino = got.ino;
	assert_int_equal(swapped, trap != NULL);
}

/* Without /proc, the path opened again: the file checked is the file returned. */
static void test_fallback_reopen_same_file(void **state)
{
	struct fallback_result r = { 0 };
	struct stat st;

	(void)state;
	tu_write(path, "1000 10 py::ok\n", 15);
	assert_int_equal(stat(path, &st), 0);
	open_without_proc(NULL, &r);
	/* Checked through an O_PATH open, /proc missing, then the path again. */
	assert_string_equal(r.opens, "pfp");
	assert_true(r.ret >= 0);
	assert_int_equal(r.ino, st.st_ino);
}

/* Without /proc, a file swapped in at the path before the second open is refused. */
static void test_fallback_reopen_swap_refused(void **state)
{
	char trap[4096];
	struct fallback_result r = { 0 };

	(void)state;
	tu_write(path, "1000 10 py::ok\n", 15);
	/* A second link to the secret: refused outright had it been there first. */
	snprintf(trap, sizeof(trap), "%s/trap", dir);
	assert_int_equal(link(other, trap), 0);
	open_without_proc(trap, &r);
	assert_string_equal(r.opens, "pfp");
	assert_int_equal(r.ret, -EAGAIN);
	assert_string_equal(perfmap_open_strerror(r.ret), "changed while being opened, refused");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_regular_file_opens_read_only, setup, teardown),
		cmocka_unit_test_setup_teardown(test_traps_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fallback_reopen_same_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fallback_reopen_swap_refused, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

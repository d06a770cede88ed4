/* Helpers shared by the cmocka unit tests: temporary directories, files, children. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

/*
 * Every directory tu_mkdtemp() made is removed on every way out of a test
 * program, not only by the teardown's tu_rmdir(): at exit(), and on the
 * signals that end a test early (its alarm, a kill, ^C, an abort from ASan
 * or assert()). Killed tests once left 22 GB in /tmp. SIGKILL cannot be
 * caught: tests/run-unit.sh gives each program a TMPDIR of its own, which it
 * removes.
 *
 * A signal handler reads this list at any moment, so a slot is written once,
 * before it is counted, and never reused or freed (the paths stay reachable
 * for LeakSanitizer). Only the process that made a directory removes it: a
 * forked child inherits the list, the atexit handler and the signal handlers.
 */
#define TU_MAX_DIRS 256

static char *tu_dirs[TU_MAX_DIRS];
static pid_t tu_dir_owner[TU_MAX_DIRS];
static volatile sig_atomic_t tu_dir_live[TU_MAX_DIRS];
static int tu_ndirs;	/* atomic: slots below it are written */

/*
 * Remove @name under @dirfd, and everything below it, with system calls
 * alone: this runs in signal handlers, where nftw() (malloc, stdio) may not.
 */
static void rm_tree_at(int dirfd, const char *name, int depth)
{
	char buf[4096] __attribute__((aligned(8)));
	bool found;
	ssize_t n, off;
	int fd, pass;

	if (!unlinkat(dirfd, name, 0) || (errno != EISDIR && errno != EPERM) || depth > 32)
		return;
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	/* Tests chmod directories to provoke errors; undo before removing. */
	fchmod(fd, 0700);
	/*
	 * Another pass while one finds entries: entries may move in a
	 * directory being emptied, and a test's thread or child may still
	 * be adding some.
	 */
	for (pass = 0, found = true; found && pass < 16; pass++) {
		found = false;
		if (lseek(fd, 0, SEEK_SET) < 0)
			break;
		while ((n = getdents64(fd, buf, sizeof(buf))) > 0) {
			for (off = 0; off < n; ) {
				struct dirent64 *d = (struct dirent64 *)(buf + off);

				off += d->d_reclen;
				if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
					continue;
				found = true;
				rm_tree_at(fd, d->d_name, depth + 1);
			}
		}
	}
	close(fd);
	unlinkat(dirfd, name, AT_REMOVEDIR);
}

/* Async-signal-safe. Whether it removed anything. */
static bool tu_remove_own_dirs(void)
{
	int i, n = __atomic_load_n(&tu_ndirs, __ATOMIC_ACQUIRE);
	pid_t me = getpid();
	bool removed = false;

	for (i = 0; i < n; i++) {
		if (!tu_dir_live[i] || tu_dir_owner[i] != me)
			continue;
		rm_tree_at(AT_FDCWD, tu_dirs[i], 0);
		tu_dir_live[i] = 0;
		removed = true;
	}
	return removed;
}

static void tu_at_exit(void)
{
	tu_remove_own_dirs();
}

static const int tu_fatal_signals[] = { SIGALRM, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGABRT };

static void tu_on_fatal_signal(int sig)
{
	static const char msg[] = "testutil: ended by a signal; removed its test directories\n";
	int saved = errno;

	if (tu_remove_own_dirs()) {
		ssize_t unused = write(STDERR_FILENO, msg, sizeof(msg) - 1);

		(void)unused;
	}
	/* Die of the same signal, as without this handler, once it returns. */
	signal(sig, SIG_DFL);
	raise(sig);
	errno = saved;
}

static void tu_install_cleanup(void)
{
	static bool done;
	struct sigaction sa = { .sa_handler = tu_on_fatal_signal }, old;
	size_t i;

	if (done)
		return;
	done = true;
	atexit(tu_at_exit);
	/* One at a time: a second signal waits for the first's cleanup. */
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < sizeof(tu_fatal_signals) / sizeof(tu_fatal_signals[0]); i++)
		sigaddset(&sa.sa_mask, tu_fatal_signals[i]);
	for (i = 0; i < sizeof(tu_fatal_signals) / sizeof(tu_fatal_signals[0]); i++) {
		/* A handler of the test's own, or an ignored signal, stays as it is. */
		if (sigaction(tu_fatal_signals[i], NULL, &old) || old.sa_handler != SIG_DFL)
			continue;
		sigaction(tu_fatal_signals[i], &sa, NULL);
	}
}

char *tu_mkdtemp(void)
{
	const char *base = getenv("TMPDIR");
	char *dir, *copy;
	int slot;

	if (!base || !*base)
		base = "/tmp";
	tu_install_cleanup();
	if (asprintf(&dir, "%s/perfmap-test.XXXXXX", base) < 0)
		return NULL;
	if (!mkdtemp(dir)) {
		free(dir);
		return NULL;
	}
	/* Past TU_MAX_DIRS, only the teardown and run-unit.sh remove it. */
	slot = tu_ndirs;
	if (slot < TU_MAX_DIRS && (copy = strdup(dir))) {
		tu_dirs[slot] = copy;
		tu_dir_owner[slot] = getpid();
		tu_dir_live[slot] = 1;
		__atomic_store_n(&tu_ndirs, slot + 1, __ATOMIC_RELEASE);
	}
	return dir;
}

void tu_rmdir(char *dir)
{
	pid_t me = getpid();
	int i;

	if (!dir)
		return;
	rm_tree_at(AT_FDCWD, dir, 0);
	/* Removed: the handlers need not try again. */
	for (i = 0; i < tu_ndirs; i++)
		if (tu_dir_live[i] && tu_dir_owner[i] == me && !strcmp(tu_dirs[i], dir))
			tu_dir_live[i] = 0;
	free(dir);
}

char *tu_read(const char *path, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	ssize_t r;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 || !buf) {
		free(buf);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	for (;;) {
		if (n + 1 >= cap)
			buf = realloc(buf, cap *= 2);
		r = read(fd, buf + n, cap - n - 1);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = '\0';
	if (len)
		*len = n;
	return buf;
}

void tu_write(const char *path, const char *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
}

const char *tu_map_path(const char *dir, pid_t pid)
{
	static char path[4096];

	snprintf(path, sizeof(path), "%s/perf-%d.map", dir, (int)pid);
	return path;
}

bool tu_has_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	const char *p = text;

	while ((p = strstr(p, line))) {
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return true;
		p += n;
	}
	return false;
}

size_t tu_count_char(const char *s, size_t len, char c)
{
	size_t n = 0, i;

	for (i = 0; i < len; i++)
		n += s[i] == c;
	return n;
}

int tu_wait(pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

/*
 * A jitdump producer for perfmapctl jitdump's tests: writes OUT as a JIT
 * would, every record kind, a move, and a forked child's load written into
 * the parent's dump under the child's pid (as V8 and LLVM children do).
 * Prints "<pid> <child pid>".
 *
 *   jitdump_writer OUT all|torn|bad
 *     all   every kind, then JIT_CODE_CLOSE
 *     torn  the same without the close, ending in a torn load
 *     bad   a record of size 0 after the first two loads
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jdbuild.h"

static int put(int fd, struct jdb *b, size_t len)
{
	ssize_t n = write(fd, b->p, len);

	b->len = 0;
	return n == (ssize_t)len ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct jdb b = { 0 };
	uint32_t pid = (uint32_t)getpid();
	pid_t child;
	int fd, status, torn, bad;

	if (argc != 3) {
		fprintf(stderr, "usage: jitdump_writer OUT all|torn|bad\n");
		return 2;
	}
	torn = !strcmp(argv[2], "torn");
	bad = !strcmp(argv[2], "bad");
	fd = open(argv[1], O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0) {
		perror(argv[1]);
		return 2;
	}
	jdb_header(&b, pid);
	jdb_debug(&b, 0x7f0000010000, 3, "/app/jd_alpha.js");
	jdb_load(&b, pid, 0x7f0000010000, 0x100, "jd::alpha /app/jd_alpha.js:1");
	jdb_load(&b, pid, 0x7f0000010100, 0x80, "jd::beta /app/jd_alpha.js:20");
	if (bad) {
		jdb_u32(&b, 0);
		jdb_u32(&b, 0);
		jdb_u64(&b, 0);
	}
	jdb_load(&b, pid, 0x7f0000010200, 0x40, "jd::gamma /app/jd_alpha.js:40");
	jdb_move(&b, pid, 0x7f0000010200, 0x7f0000020000, 0x40);
	if (put(fd, &b, b.len))
		return 1;

	/* The child writes into the parent's dump, under its own pid, at the parent's addresses. */
	fflush(stdout);
	child = fork();
	if (child < 0)
		return 1;
	if (child == 0) {
		jdb_load(&b, (uint32_t)getpid(), 0x7f0000010000, 0x100, "jd::delta_in_child");
		_exit(put(fd, &b, b.len) ? 1 : 0);
	}
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status))
		return 1;

	jdb_unwind(&b);
	jdb_unknown(&b, 42, 16);
	jdb_load(&b, pid, 0x7f0000030000, 0, "jd::empty");
	if (torn) {
		jdb_load(&b, pid, 0x7f0000040000, 0x40, "jd::torn");
		if (put(fd, &b, b.len - 50))
			return 1;
	} else {
		jdb_close(&b);
		if (put(fd, &b, b.len))
			return 1;
	}
	jdb_free(&b);
	close(fd);
	printf("%u %u\n", pid, (unsigned int)child);
	return 0;
}

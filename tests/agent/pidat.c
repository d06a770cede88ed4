/*
 * pidat: run a command as a given pid. Writes PID-1 to
 * /proc/sys/kernel/ns_last_pid and forks; the child execs the command if it
 * got PID, and the attempt is repeated (another fork may have taken it).
 * Exit status: the command's, or 3 when PID could not be had.
 *
 *   pidat PID CMD [ARGS...]
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	char buf[32];
	int attempt, fd, status, n;
	pid_t want, pid;

	if (argc < 3) {
		fprintf(stderr, "usage: pidat PID CMD [ARGS...]\n");
		return 2;
	}
	want = (pid_t)atoi(argv[1]);
	for (attempt = 0; attempt < 200; attempt++) {
		fd = open("/proc/sys/kernel/ns_last_pid", O_RDWR | O_CLOEXEC);
		if (fd < 0) {
			perror("pidat: /proc/sys/kernel/ns_last_pid");
			return 2;
		}
		/* The kernel's own lock for ns_last_pid users, as CRIU takes it. */
		flock(fd, LOCK_EX);
		n = snprintf(buf, sizeof(buf), "%d", (int)want - 1);
		if (write(fd, buf, n) != n) {
			perror("pidat: write ns_last_pid");
			return 2;
		}
		pid = fork();
		if (pid == 0) {
			if (getpid() != want)
				_exit(99);
			execvp(argv[2], argv + 2);
			_exit(98);
		}
		flock(fd, LOCK_UN);
		close(fd);
		if (pid < 0)
			return 2;
		if (waitpid(pid, &status, 0) < 0)
			return 2;
		if (pid == want)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
		usleep(1000);
	}
	fprintf(stderr, "pidat: could not get pid %d\n", (int)want);
	return 3;
}

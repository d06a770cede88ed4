/*
 * loadgen: the loads the agent benchmark measures with and without perfmapd.
 *   loadgen fork N      N times fork(), child _exit(0), waitpid(): forks per second,
 *                       and the CPU time of loadgen and its children per fork in ns
 *   loadgen exec N      N times fork(), child execs itself as "loadgen true", waitpid():
 *                       the same figures per fork+exec+exit (every exec wakes the agent)
 *   loadgen syscall N   N getppid() calls: ns per call, by the clock and in CPU time
 *   loadgen mmapx N     N times mmap() a page of anonymous executable memory and
 *                       munmap() it, as a JIT does: ns per pair, clock and CPU time
 *   loadgen hold N      N children that sleep until loadgen's stdin closes
 *
 * Exit status 0; 1 when a fork, an exec or an mmap failed (a benchmark then has
 * no figure, rather than the figure of a load that did not run); 2 on usage.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double cpu_s(int who)
{
	struct rusage ru;

	getrusage(who, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* Did PID, just forked, exit 0? */
static int child_ok(pid_t pid)
{
	int status;

	if (pid < 0) {
		perror("loadgen: fork");
		return 0;
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "loadgen: child %d failed\n", (int)pid);
		return 0;
	}
	return 1;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	long n, i;
	double t0;
	char c;

	if (argc == 2 && !strcmp(argv[1], "true"))
		return 0;  /* the image "exec" runs */
	if (argc != 3)
		return 2;
	n = atol(argv[2]);
	t0 = now_s();
	if (!strcmp(argv[1], "fork")) {
		for (i = 0; i < n; i++) {
			pid_t pid = fork();

			if (pid == 0)
				_exit(0);
			if (!child_ok(pid))
				return 1;
		}
		printf("%.0f %.0f\n", n / (now_s() - t0),
		       (cpu_s(RUSAGE_SELF) + cpu_s(RUSAGE_CHILDREN)) * 1e9 / n);
	} else if (!strcmp(argv[1], "exec")) {
		for (i = 0; i < n; i++) {
			pid_t pid = fork();

			if (pid == 0) {
				execl("/proc/self/exe", "loadgen", "true", (char *)NULL);
				_exit(127);
			}
			if (!child_ok(pid))
				return 1;
		}
		printf("%.0f %.0f\n", n / (now_s() - t0),
		       (cpu_s(RUSAGE_SELF) + cpu_s(RUSAGE_CHILDREN)) * 1e9 / n);
	} else if (!strcmp(argv[1], "syscall")) {
		for (i = 0; i < n; i++)
			syscall(SYS_getppid);
		printf("%.2f %.2f\n", (now_s() - t0) * 1e9 / n, cpu_s(RUSAGE_SELF) * 1e9 / n);
	} else if (!strcmp(argv[1], "mmapx")) {
		for (i = 0; i < n; i++) {
			void *p = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
				       -1, 0);

			if (p == MAP_FAILED) {
				perror("loadgen: mmap");
				return 1;
			}
			munmap(p, 4096);
		}
		printf("%.2f %.2f\n", (now_s() - t0) * 1e9 / n, cpu_s(RUSAGE_SELF) * 1e9 / n);
	} else if (!strcmp(argv[1], "hold")) {
		/* Its own process group: the kill(0) below is for its children only. */
		setpgid(0, 0);
		for (i = 0; i < n; i++) {
			pid_t pid = fork();

			if (pid < 0) {
				/* Those forked go with it: PR_SET_PDEATHSIG. */
				perror("loadgen: fork");
				return 1;
			}
			if (pid == 0) {
				prctl(PR_SET_PDEATHSIG, SIGKILL);
				pause();
				_exit(0);
			}
		}
		printf("ready\n");
		fflush(stdout);
		while (read(0, &c, 1) > 0)
			;
		signal(SIGTERM, SIG_IGN);
		kill(0, SIGTERM);
		while (wait(NULL) > 0)
			;
	} else {
		return 2;
	}
	return 0;
}

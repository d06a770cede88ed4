/* make bench: a JIT in a container, appending perf-map lines that carry their write time. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "perfmap_tools.h"

/*
 *   mirror_writer INDEX RATE SECONDS LINGER
 *
 * Statically linked: the container's root holds nothing else. It waits for
 * SIGUSR1 (sent from the host to every container at once, so that all write
 * together), then appends RATE lines a second for SECONDS to
 * /tmp/perf-<its pid>.map, one write() per line as CPython does. Each name is
 * cbench_s<seq>_t<CLOCK_REALTIME ns just before the write>: the realtime
 * clock is the host's, so the host's meter subtracts it from the time it saw
 * the line. Then it writes /tmp/cbench.done ("lines N cpu_ns T", its CPU
 * time while writing) and stays LINGER seconds, or until SIGTERM, before it exits.
 *
 * It runs as the container's pid 1: SIGUSR1 and SIGTERM reach it only
 * because they are waited for (blocked and taken with sigtimedwait).
 */

static long long ns_of(const struct timespec *t)
{
	return t->tv_sec * 1000000000LL + t->tv_nsec;
}

static void ts_add(struct timespec *t, long long ns)
{
	ns += t->tv_nsec;
	t->tv_sec += ns / 1000000000LL;
	t->tv_nsec = ns % 1000000000LL;
}

/*
 * This process's CPU time so far. It began as the runtime's init (runc's, in
 * Go) before its exec of the writer, so only differences are the writer's.
 */
static long long cpu_ns(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
}

static int write_done(long lines, long long cpu)
{
	char buf[96];
	int fd, len;

	len = snprintf(buf, sizeof(buf), "lines %ld cpu_ns %lld\n", lines, cpu);
	/* Renamed into place: the host reads it whole or not at all. */
	fd = open("/tmp/cbench.done.tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || perfmap__write_all(fd, buf, (size_t)len) || close(fd))
		return -1;
	return rename("/tmp/cbench.done.tmp", "/tmp/cbench.done");
}

int main(int argc, char **argv)
{
	struct timespec wait = { .tv_sec = 600 }, next, now;
	long index, rate, seconds, linger, period, seq, lines;
	long long cpu0;
	char path[64], line[128];
	sigset_t set;
	int fd, len, sig;

	if (argc != 5) {
		fprintf(stderr, "usage: mirror_writer INDEX RATE SECONDS LINGER\n");
		return 2;
	}
	index = atol(argv[1]);
	rate = atol(argv[2]);
	seconds = atol(argv[3]);
	linger = atol(argv[4]);
	if (rate < 1 || rate > 100000 || seconds < 1 || linger < 0)
		return 2;
	period = 1000000000L / rate;
	lines = rate * seconds;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	/* Ten minutes at most: a bench that died leaves no writer waiting. */
	do
		sig = sigtimedwait(&set, NULL, &wait);
	while (sig < 0 && errno == EINTR);
	if (sig != SIGUSR1)
		return 1;

	cpu0 = cpu_ns();
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		perror(path);
		return 1;
	}
	/*
	 * Every container got its signal at the same moment: each starts at its
	 * own phase within the period, so that the lines of 100 writers arrive
	 * spread out, as independent processes' would, not in one burst.
	 */
	clock_gettime(CLOCK_MONOTONIC, &next);
	ts_add(&next, (index * 7919 % 1000) * (period / 1000));
	for (seq = 0; seq < lines; seq++) {
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
			;
		ts_add(&next, period);
		clock_gettime(CLOCK_REALTIME, &now);
		len = snprintf(line, sizeof(line), "%lx 40 cbench_s%ld_t%lld\n",
			       0x7f0000000000UL + ((unsigned long)index << 24) + (unsigned long)seq * 0x40,
			       seq, ns_of(&now));
		if (perfmap__write_all(fd, line, (size_t)len)) {
			perror(path);
			return 1;
		}
	}
	close(fd);
	if (write_done(lines, cpu_ns() - cpu0)) {
		perror("/tmp/cbench.done");
		return 1;
	}
	wait.tv_sec = linger;
	sigdelset(&set, SIGUSR1);
	while (linger && sigtimedwait(&set, NULL, &wait) < 0 && errno == EINTR)
		;
	return 0;
}

/* make bench: when each line of a perf map appears in the file watched, against its write time. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

/*
 *   mirror_meter [--once] --expect N [--deadline SECONDS] FILE...
 *
 * FILE is a map as mirror_writer writes it (names cbench_s<seq>_t<ns>):
 * the agent's host mirror, or, to measure the meter itself, the writer's
 * own file. Each line's lag is the CLOCK_REALTIME at which a read() here
 * returned it minus the time in its name. A FILE need not exist yet.
 *
 * inotify on each FILE's directory wakes the meter on every append (and on
 * the creation of a FILE), so the lag is the agent's, not a poll interval's;
 * a sweep of all files every 100 ms catches anything an event missed
 * (a queue overflow, a file made before its watch).
 *
 * It prints "ready" once watching, then, when every FILE holds N lines or at
 * the deadline, one line of key=value: lines, missing, gaps and dups (lines
 * whose seq is not the next one expected), bad (lines not of the writer's
 * form), torn (files ending in an incomplete line), lag_ms percentiles over
 * all lines, and first_ms, the lag of each file's first line (the agent
 * finding a new map). --once reads each FILE once and counts, without lags:
 * what the files hold at the end.
 */

#define SWEEP_NS 100000000LL

struct target {
	const char *path;
	const char *name;       /* within its directory, as inotify names it */
	int wd;
	int fd;
	char part[4096];        /* the incomplete last line read so far */
	size_t plen;
	long next_seq;
	long lines, gaps, dups, bad;
	long long first_lag;
};

static struct target *targets;
static int ntargets;
static long expect;
static int once;
static long long *lags;
static size_t nlags, cap_lags;

static long long now_ns(clockid_t clk)
{
	struct timespec t;

	clock_gettime(clk, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void record_lag(long long lag)
{
	if (nlags == cap_lags) {
		cap_lags = cap_lags ? 2 * cap_lags : 65536;
		lags = realloc(lags, cap_lags * sizeof(*lags));
		if (!lags) {
			perror("mirror_meter");
			exit(1);
		}
	}
	lags[nlags++] = lag;
}

static void take_line(struct target *t, const char *line, size_t len, long long seen)
{
	const char *p = memmem(line, len, "cbench_s", 8);
	long seq;
	long long at;

	if (!p || sscanf(p, "cbench_s%ld_t%lld", &seq, &at) != 2) {
		t->bad++;
		return;
	}
	if (seq < t->next_seq) {
		t->dups++;
		return;
	}
	if (seq > t->next_seq)
		t->gaps += seq - t->next_seq;
	t->next_seq = seq + 1;
	if (!once) {
		if (!t->lines)
			t->first_lag = seen - at;
		record_lag(seen - at);
	}
	t->lines++;
}

/* Reads what was appended since the last call; complete lines only count. */
static void drain(struct target *t)
{
	char buf[65536];
	long long seen;
	ssize_t n;
	char *s, *nl;

	if (t->fd < 0) {
		t->fd = open(t->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (t->fd < 0)
			return;
	}
	while ((n = read(t->fd, buf, sizeof(buf))) > 0) {
		seen = now_ns(CLOCK_REALTIME);
		s = buf;
		while ((nl = memchr(s, '\n', (size_t)(buf + n - s)))) {
			size_t len = (size_t)(nl - s);

			if (t->plen) {
				if (t->plen + len > sizeof(t->part))
					len = sizeof(t->part) - t->plen;
				memcpy(t->part + t->plen, s, len);
				take_line(t, t->part, t->plen + len, seen);
				t->plen = 0;
			} else {
				take_line(t, s, len, seen);
			}
			s = nl + 1;
		}
		if (s < buf + n) {
			size_t rest = (size_t)(buf + n - s);

			if (t->plen + rest > sizeof(t->part))
				rest = sizeof(t->part) - t->plen;
			memcpy(t->part + t->plen, s, rest);
			t->plen += rest;
		}
	}
}

static int all_done(void)
{
	int i;

	for (i = 0; i < ntargets; i++)
		if (targets[i].lines < expect)
			return 0;
	return 1;
}

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return x < y ? -1 : x > y;
}

/* The q-quantile, nearest rank, in ms. */
static double quantile_ms(const long long *v, size_t n, double q)
{
	size_t k;

	if (!n)
		return 0;
	k = (size_t)(q * (double)n + 0.999999);
	if (k < 1)
		k = 1;
	if (k > n)
		k = n;
	return (double)v[k - 1] / 1e6;
}

/* Adds a watch on FILE's directory; targets in one directory share it. */
static int watch(int ifd, struct target *t)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(t->path, '/');
	size_t len;

	if (!slash) {
		strcpy(dir, ".");
		t->name = t->path;
	} else {
		len = slash == t->path ? 1 : (size_t)(slash - t->path);
		if (len >= sizeof(dir))
			return -1;
		memcpy(dir, t->path, len);
		dir[len] = 0;
		t->name = slash + 1;
	}
	t->wd = inotify_add_watch(ifd, dir, IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE);
	if (t->wd < 0) {
		perror(dir);
		return -1;
	}
	return 0;
}

static void on_events(int ifd)
{
	char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
	const struct inotify_event *ev;
	ssize_t n;
	char *p;
	int i;

	while ((n = read(ifd, buf, sizeof(buf))) > 0) {
		for (p = buf; p < buf + n; p += sizeof(*ev) + ev->len) {
			ev = (const struct inotify_event *)p;
			if (ev->mask & IN_Q_OVERFLOW) {
				for (i = 0; i < ntargets; i++)
					drain(&targets[i]);
				continue;
			}
			if (!ev->len)
				continue;
			for (i = 0; i < ntargets; i++)
				if (targets[i].wd == ev->wd && !strcmp(targets[i].name, ev->name))
					drain(&targets[i]);
		}
	}
}

int main(int argc, char **argv)
{
	long long deadline_s = 60, deadline, next_sweep;
	long lines = 0, gaps = 0, dups = 0, bad = 0, torn = 0, missing = 0;
	long long *first;
	struct pollfd pfd;
	int i, ifd, nfirst = 0;

	while (argc > 1 && argv[1][0] == '-') {
		if (!strcmp(argv[1], "--once")) {
			once = 1;
			argv++, argc--;
		} else if (!strcmp(argv[1], "--expect") && argc > 2) {
			expect = atol(argv[2]);
			argv += 2, argc -= 2;
		} else if (!strcmp(argv[1], "--deadline") && argc > 2) {
			deadline_s = atoll(argv[2]);
			argv += 2, argc -= 2;
		} else {
			break;
		}
	}
	if (argc < 2 || expect < 1) {
		fprintf(stderr, "usage: mirror_meter [--once] --expect N [--deadline SECONDS] FILE...\n");
		return 2;
	}
	ntargets = argc - 1;
	targets = calloc((size_t)ntargets, sizeof(*targets));
	first = calloc((size_t)ntargets, sizeof(*first));
	if (!targets || !first)
		return 1;
	ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (ifd < 0) {
		perror("inotify_init1");
		return 1;
	}
	for (i = 0; i < ntargets; i++) {
		targets[i].path = argv[i + 1];
		targets[i].fd = -1;
		if (!once && watch(ifd, &targets[i]))
			return 1;
	}

	if (!once) {
		printf("ready\n");
		fflush(stdout);
	}
	deadline = now_ns(CLOCK_MONOTONIC) + deadline_s * 1000000000LL;
	next_sweep = 0;
	pfd.fd = ifd;
	pfd.events = POLLIN;
	while (!once) {
		long long now = now_ns(CLOCK_MONOTONIC);

		if (now >= next_sweep) {
			for (i = 0; i < ntargets; i++)
				if (targets[i].lines < expect)
					drain(&targets[i]);
			next_sweep = now + SWEEP_NS;
		}
		if (all_done() || now >= deadline)
			break;
		if (poll(&pfd, 1, (int)((next_sweep - now) / 1000000 + 1)) > 0)
			on_events(ifd);
	}
	if (once)
		for (i = 0; i < ntargets; i++)
			drain(&targets[i]);

	for (i = 0; i < ntargets; i++) {
		struct target *t = &targets[i];

		lines += t->lines;
		gaps += t->gaps;
		dups += t->dups;
		bad += t->bad;
		torn += t->plen ? 1 : 0;
		if (t->lines < expect)
			missing += expect - t->lines;
		if (t->lines)
			first[nfirst++] = t->first_lag;
	}
	printf("files=%d lines=%ld expected=%ld missing=%ld gaps=%ld dups=%ld bad=%ld torn=%ld",
	       ntargets, lines, expect * ntargets, missing, gaps, dups, bad, torn);
	if (!once) {
		qsort(lags, nlags, sizeof(*lags), cmp_ll);
		qsort(first, (size_t)nfirst, sizeof(*first), cmp_ll);
		printf(" lag_ms_p50=%.1f lag_ms_p99=%.1f lag_ms_max=%.1f first_ms_p50=%.1f first_ms_max=%.1f",
		       quantile_ms(lags, nlags, 0.50), quantile_ms(lags, nlags, 0.99),
		       quantile_ms(lags, nlags, 1.0), quantile_ms(first, (size_t)nfirst, 0.50),
		       quantile_ms(first, (size_t)nfirst, 1.0));
	}
	printf("\n");
	return 0;
}

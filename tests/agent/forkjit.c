/*
 * forkjit: a test JIT that forks. It generates machine code in anonymous
 * executable memory, names it in perf-<pid>.map the way a runtime does
 * (open O_APPEND|O_CREAT, one write per entry), then forks children that run
 * that code. Each child can wait for its own map to hold exactly what it
 * should and report how long that took after the fork.
 *
 *   forkjit [--dir DIR] [--entries N] [--children N] [--run-ms MS]
 *           [--wait-map-ms MS] [--child-writes none|own|copy] [--prefix P]
 *           [--startup-ms MS] [--fork-delay-ms MS] [--gap-ms MS] [--hold-ms MS] [--print-pids]
 *           [--report] [--serial] [--stop-first] [--check-own] [--child-append]
 *           [--sparse-mb N] [--latencies] [--child-hold-ms MS] [--uninherited]
 *           [--child-stop] [--exec CMD ARGS...]
 *
 * --stop-first stops the process (SIGSTOP) before anything else, so that a
 * test can let the agent act first; --check-own verifies at the end that the
 * process's own map is still at its path, beginning with its entries;
 * --child-append has each child append a line to its copy, as its runtime
 * would. --sparse-mb N makes the map sparse, as an attacker would: one more
 * entry written N MiB into the file, a hole before it (its children cannot
 * wait for a map, which holds NULs). --latencies prints each child's
 * fork-to-map latency with --report ("lat_us N"), for a caller's percentiles.
 * --child-hold-ms keeps each child alive that long, asleep (no CPU).
 * --child-stop stops each child (SIGSTOP) once it has reported, until the
 * test continues it: a test that looks at the children after they found
 * their maps holds them for as long as it looks, not for a guessed time.
 * --uninherited names three more regions after the others that the children
 * do not inherit (freed, MADV_DONTFORK, a shared memfd): a child's map must
 * hold the others only.
 *
 * Exit status: 0 when every child found its map complete (or none was asked
 * to look) and the checks asked for pass, 1 otherwise, 2 on usage or set-up
 * errors.
 *
 * --gap-ms spaces the forks out: with --serial and --report, a latency sample
 * taken over a while, as something else runs beside it.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jitloop.h"

#define SLOT 32  /* bytes of code per entry */

struct opts {
	const char *dir;
	const char *prefix;
	unsigned long entries, children, run_ms, wait_ms, startup_ms, fork_delay_ms, hold_ms;
	unsigned long sparse_mb, child_hold_ms;
	enum { WRITES_NONE, WRITES_OWN, WRITES_COPY } child_writes;
	int print_pids, report, serial, stop_first, check_own, child_append, latencies, child_stop;
	int uninherited;
	char **exec_argv;
	unsigned long gap_ms;
};

struct result {
	int pid;
	int ok;
	uint64_t latency_ns;
};

typedef uint64_t (*jit_fn)(uint64_t);

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_ms(unsigned long ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}


static char *map_path(const struct opts *o, int pid)
{
	static char path[4096];

	snprintf(path, sizeof(path), "%s/perf-%d.map", o->dir, pid);
	return path;
}

/* The map's text, canonical: what a copy of it must hold byte for byte. */
static char *build_map(const struct opts *o, unsigned char *code, size_t *len)
{
	size_t cap = o->entries * 64 + 1, n = 0, i;
	char *buf = malloc(cap);

	for (i = 0; buf && i < o->entries; i++)
		n += snprintf(buf + n, cap - n, "%lx %x %s_%zu\n",
			      (unsigned long)(uintptr_t)(code + i * SLOT), SLOT, o->prefix, i);
	*len = n;
	return buf;
}

/*
 * Like CPython: O_APPEND|O_CREAT, no O_TRUNC, one write per entry, and the
 * file kept open for the life of the process (the fd is returned).
 */
static int write_map(const char *path, const char *text, size_t len)
{
	const char *p = text, *nl;
	int fd;

	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -1;
	for (; p < text + len; p = nl + 1) {
		nl = memchr(p, '\n', text + len - p);
		if (write(fd, p, nl - p + 1) != nl - p + 1) {
			close(fd);
			return -1;
		}
	}
	return fd;
}

static int map_fd = -1;  /* the parent's own map, open as a runtime keeps it */

static int file_equals(const char *path, const char *want, size_t len)
{
	char *buf = malloc(len + 2);
	ssize_t n = -1;
	int fd, same = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd >= 0 && buf) {
		n = pread(fd, buf, len + 1, 0);
		same = n == (ssize_t)len && !memcmp(buf, want, len);
	}
	if (fd >= 0)
		close(fd);
	free(buf);
	return same;
}

/* Does the file at @path begin with @want? */
static int map_begins_with(const char *path, const char *want, size_t len)
{
	char *buf = malloc(len + 1);
	ssize_t n = -1;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd >= 0 && buf)
		n = pread(fd, buf, len, 0);
	if (fd >= 0)
		close(fd);
	n = n == (ssize_t)len && !memcmp(buf, want, len);
	free(buf);
	return (int)n;
}

/* Wait until our map holds @want exactly; the time since the fork, or 0. */
static uint64_t wait_for_map(const struct opts *o, const char *want, size_t len,
			     uint64_t t_fork)
{
	const char *path = map_path(o, getpid());
	uint64_t deadline = t_fork + o->wait_ms * 1000000ull, t;
	long nap_ns = 500000;
	struct pollfd pfd;
	char ev[4096];
	int ifd;

	/*
	 * Past fs.inotify.max_user_instances (128), poll instead: every 0.5 ms
	 * at first, backing off to 10 ms. Hundreds of children polling every
	 * 0.5 ms for seconds would take the CPU from the agent they wait for.
	 */
	ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (ifd >= 0 && inotify_add_watch(ifd, o->dir, IN_CREATE | IN_MOVED_TO |
					  IN_CLOSE_WRITE | IN_MODIFY) < 0) {
		close(ifd);
		ifd = -1;
	}
	pfd.fd = ifd;
	pfd.events = POLLIN;
	for (;;) {
		if (file_equals(path, want, len)) {
			t = now_ns() - t_fork;
			if (ifd >= 0)
				close(ifd);
			return t ? t : 1;
		}
		t = now_ns();
		if (t >= deadline)
			break;
		if (ifd < 0) {
			struct timespec ts = { 0, nap_ns };

			nanosleep(&ts, NULL);
			if (nap_ns < 10000000)
				nap_ns += nap_ns / 4;
		} else if (poll(&pfd, 1, (int)((deadline - t) / 1000000) + 1) > 0) {
			while (read(ifd, ev, sizeof(ev)) > 0)
				;
		}
	}
	if (ifd >= 0)
		close(ifd);
	return 0;
}

static void run_code(unsigned char *code, unsigned long entries, unsigned long ms)
{
	uint64_t end = now_ns() + ms * 1000000ull;
	unsigned long k = entries < 4 ? entries : 4, i = 0;
	volatile uint64_t sink = 0;

	while (now_ns() < end)
		sink += ((jit_fn)(code + (i++ % k) * SLOT))(2000000);
	(void)sink;
}

static void child(const struct opts *o, unsigned char *code, const char *map, size_t len,
		  uint64_t t_fork, int wfd)
{
	struct result r = { .pid = getpid(), .ok = 1 };
	char own[256], *want = (char *)map;
	size_t want_len = len, n;

	/* As CPython's child does: the parent's map is not ours to write. */
	close(map_fd);

	if (o->child_writes == WRITES_OWN) {
		/* The child's runtime names new code in its own map first. */
		n = snprintf(own, sizeof(own), "%lx %x %s_child_own\n",
			     (unsigned long)(uintptr_t)(code + o->entries * SLOT), SLOT, o->prefix);
		close(write_map(map_path(o, getpid()), own, n));
		want = malloc(n + len);
		memcpy(want, own, n);
		memcpy(want + n, map, len);
		want_len = n + len;
	} else if (o->child_writes == WRITES_COPY) {
		/* The runtime copies its parent's map itself (persist-after-fork). */
		close(write_map(map_path(o, getpid()), map, len));
	}
	if (o->wait_ms) {
		r.latency_ns = wait_for_map(o, want, want_len, t_fork);
		r.ok = r.latency_ns != 0;
	}
	/* The copy is the child's file: its runtime appends to it as to its own. */
	if (r.ok && o->child_append) {
		n = snprintf(own, sizeof(own), "%lx %x %s_child_%d\n",
			     (unsigned long)(uintptr_t)(code + o->entries * SLOT), SLOT, o->prefix,
			     (int)getpid());
		int fd = write_map(map_path(o, getpid()), own, n);

		if (fd < 0) {
			fprintf(stderr, "forkjit: child %d cannot append to %s: %s\n", (int)getpid(),
				map_path(o, getpid()), strerror(errno));
			r.ok = 0;
		} else {
			close(fd);
		}
	}
	if (write(wfd, &r, sizeof(r)) != sizeof(r))
		_exit(2);
	if (o->run_ms)
		run_code(code, o->entries, o->run_ms);
	if (o->child_stop)
		raise(SIGSTOP);
	sleep_ms(o->child_hold_ms);
	_exit(r.ok ? 0 : 1);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int collect(const struct opts *o, int fd, size_t *got, uint64_t *lat, size_t *ok)
{
	struct result r;

	if (read(fd, &r, sizeof(r)) != sizeof(r))
		return -1;
	(*got)++;
	if (r.ok)
		lat[(*ok)++] = r.latency_ns;
	else if (o->wait_ms)
		fprintf(stderr, "forkjit: child %d: %s does not hold the expected entries after %lu ms\n",
			r.pid, map_path(o, r.pid), o->wait_ms);
	return 0;
}

static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "entries", required_argument, NULL, 'e' },
		{ "children", required_argument, NULL, 'c' },
		{ "run-ms", required_argument, NULL, 'r' },
		{ "wait-map-ms", required_argument, NULL, 'w' },
		{ "child-writes", required_argument, NULL, 'W' },
		{ "prefix", required_argument, NULL, 'p' },
		{ "startup-ms", required_argument, NULL, 's' },
		{ "hold-ms", required_argument, NULL, 'H' },
		{ "gap-ms", required_argument, NULL, 'G' },
		{ "fork-delay-ms", required_argument, NULL, 'D' },
		{ "print-pids", no_argument, NULL, 'P' },
		{ "report", no_argument, NULL, 'R' },
		{ "serial", no_argument, NULL, 'S' },
		{ "stop-first", no_argument, NULL, 'T' },
		{ "check-own", no_argument, NULL, 'C' },
		{ "child-append", no_argument, NULL, 'A' },
		{ "sparse-mb", required_argument, NULL, 'M' },
		{ "latencies", no_argument, NULL, 'L' },
		{ "child-hold-ms", required_argument, NULL, 'K' },
		{ "exec", no_argument, NULL, 'x' },
		{ "uninherited", no_argument, NULL, 'U' },
		{ "child-stop", no_argument, NULL, 'Z' },
		{ 0 },
	};
	int opt;

	*o = (struct opts){ .dir = "/tmp", .prefix = "jit_fn", .entries = 16 };
	while ((opt = getopt_long(argc, argv, "+", longopts, NULL)) != -1) {
		switch (opt) {
		case 'd': o->dir = optarg; break;
		case 'e': o->entries = strtoul(optarg, NULL, 10); break;
		case 'c': o->children = strtoul(optarg, NULL, 10); break;
		case 'r': o->run_ms = strtoul(optarg, NULL, 10); break;
		case 'w': o->wait_ms = strtoul(optarg, NULL, 10); break;
		case 'p': o->prefix = optarg; break;
		case 's': o->startup_ms = strtoul(optarg, NULL, 10); break;
		case 'L': o->latencies = 1; break;
		case 'K': o->child_hold_ms = strtoul(optarg, NULL, 10); break;
		case 'M': o->sparse_mb = strtoul(optarg, NULL, 10); break;
		case 'H': o->hold_ms = strtoul(optarg, NULL, 10); break;
		case 'G': o->gap_ms = strtoul(optarg, NULL, 10); break;
		case 'D': o->fork_delay_ms = strtoul(optarg, NULL, 10); break;
		case 'P': o->print_pids = 1; break;
		case 'R': o->report = 1; break;
		case 'S': o->serial = 1; break;
		case 'T': o->stop_first = 1; break;
		case 'C': o->check_own = 1; break;
		case 'A': o->child_append = 1; break;
		case 'U': o->uninherited = 1; break;
		case 'Z': o->child_stop = 1; break;
		case 'W':
			if (!strcmp(optarg, "own"))
				o->child_writes = WRITES_OWN;
			else if (!strcmp(optarg, "copy"))
				o->child_writes = WRITES_COPY;
			else if (strcmp(optarg, "none"))
				return -1;
			break;
		case 'x':
			o->exec_argv = argv + optind;
			return optind < argc ? 0 : -1;
		default:
			return -1;
		}
	}
	return o->entries && !(o->sparse_mb && o->wait_ms) ? 0 : -1;
}

/* One entry naming [@p, @p + page) appended to the parent's map. */
static int name_region(void *p, const char *prefix, const char *what)
{
	char line[128];
	int n = snprintf(line, sizeof(line), "%lx %x %s_%s\n", (unsigned long)(uintptr_t)p, SLOT,
			 prefix, what);

	return write(map_fd, line, n) == n ? 0 : -1;
}

/*
 * Code named in the parent's map that its children do not inherit: a region
 * freed after it was named, one fork does not pass on (MADV_DONTFORK), and a
 * shared memfd (.NET's double mapping: inherited, but perf never looks it
 * up in a map). The children's maps must hold none of their entries.
 */
static int add_uninherited(const char *prefix)
{
	long page = sysconf(_SC_PAGESIZE);
	void *freed, *dontfork, *shared;
	int mfd;

	freed = mmap(NULL, page, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	dontfork = mmap(NULL, page, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	mfd = memfd_create("forkjit-doublemap", MFD_CLOEXEC);
	if (freed == MAP_FAILED || dontfork == MAP_FAILED || mfd < 0 || ftruncate(mfd, page))
		return -1;
	shared = mmap(NULL, page, PROT_READ | PROT_EXEC, MAP_SHARED, mfd, 0);
	if (shared == MAP_FAILED || madvise(dontfork, page, MADV_DONTFORK))
		return -1;
	if (name_region(freed, prefix, "freed") || name_region(dontfork, prefix, "dontfork") ||
	    name_region(shared, prefix, "memfd"))
		return -1;
	return munmap(freed, page);
}

/* One more entry @mb MiB into the map, past a hole: the file's size, not its blocks. */
static int make_sparse(int fd, unsigned long mb, const unsigned char *code)
{
	char line[64];
	int n = snprintf(line, sizeof(line), "%lx %x sparse_tail\n",
			 (unsigned long)(uintptr_t)code, SLOT);

	/* The fd is O_APPEND, where pwrite() appends: extend, then append. */
	if (ftruncate(fd, (off_t)(mb << 20) - n))
		return -1;
	return write(fd, line, n) == n ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct opts o;
	unsigned char *code;
	uint64_t *lat, t_fork;
	size_t len, code_len, i, ok = 0, got = 0;
	char *map;
	int pfd[2], status, failed = 0;

	if (parse(argc, argv, &o)) {
		fprintf(stderr, "forkjit: bad arguments (see the comment at the top of forkjit.c)\n");
		return 2;
	}
	if (o.stop_first)
		raise(SIGSTOP);
	sleep_ms(o.startup_ms);  /* a runtime's start-up before its first compiled code */
	code_len = (o.entries + 1) * SLOT;
	code = mmap(NULL, code_len, PROT_READ | PROT_WRITE | PROT_EXEC,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (code == MAP_FAILED) {
		perror("forkjit: mmap");
		return 2;
	}
	memset(code, 0xc3, code_len);
	for (i = 0; i < o.entries && i < 4; i++)
		emit_loop(code + i * SLOT);
	__builtin___clear_cache((char *)code, (char *)code + code_len);
	map = build_map(&o, code, &len);
	map_fd = map ? write_map(map_path(&o, getpid()), map, len) : -1;
	if (map_fd < 0) {
		fprintf(stderr, "forkjit: %s: %s\n", map_path(&o, getpid()), strerror(errno));
		return 2;
	}
	if (o.sparse_mb && make_sparse(map_fd, o.sparse_mb, code)) {
		fprintf(stderr, "forkjit: %s: cannot make it sparse: %s\n", map_path(&o, getpid()),
			strerror(errno));
		return 2;
	}
	if (o.uninherited && add_uninherited(o.prefix)) {
		fprintf(stderr, "forkjit: uninherited regions: %s\n", strerror(errno));
		return 2;
	}
	if (o.exec_argv) {
		execvp(o.exec_argv[0], o.exec_argv);
		fprintf(stderr, "forkjit: exec %s: %s\n", o.exec_argv[0], strerror(errno));
		return 2;
	}
	sleep_ms(o.fork_delay_ms);  /* the map long written before the first fork */
	if (pipe(pfd))
		return 2;
	lat = calloc(o.children + 1, sizeof(*lat));
	for (i = 0; i < o.children; i++) {
		pid_t pid;

		t_fork = now_ns();
		pid = fork();
		if (pid < 0) {
			perror("forkjit: fork");
			return 2;
		}
		if (!pid) {
			close(pfd[0]);
			child(&o, code, map, len, t_fork, pfd[1]);
		}
		if (o.print_pids) {
			printf("child %d\n", (int)pid);
			fflush(stdout);
		}
		/* One fork at a time: the latency of one copy, without a queue. */
		if (o.serial)
			collect(&o, pfd[0], &got, lat, &ok);
		if (o.gap_ms && i + 1 < o.children)
			sleep_ms(o.gap_ms);
	}
	close(pfd[1]);
	while (got < o.children)
		if (collect(&o, pfd[0], &got, lat, &ok))
			break;
	while (wait(&status) > 0)
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			failed++;
	if (o.report && o.wait_ms) {
		qsort(lat, ok, sizeof(*lat), cmp_u64);
		printf("complete %zu/%lu\n", ok, o.children);
		for (i = 0; o.latencies && i < ok; i++)
			printf("lat_us %.1f\n", lat[i] / 1e3);
		if (ok)
			printf("latency_us p50 %.1f p99 %.1f max %.1f\n", lat[ok / 2] / 1e3,
			       lat[(ok * 99) / 100 < ok ? (ok * 99) / 100 : ok - 1] / 1e3,
			       lat[ok - 1] / 1e3);
	}
	sleep_ms(o.hold_ms);
	free(lat);
	if (o.check_own && !map_begins_with(map_path(&o, getpid()), map, len)) {
		fprintf(stderr, "forkjit: %d: %s no longer begins with its own %lu entries\n",
			(int)getpid(), map_path(&o, getpid()), o.entries);
		failed++;
	}
	return failed || (o.wait_ms && ok != o.children) ? 1 : 0;
}

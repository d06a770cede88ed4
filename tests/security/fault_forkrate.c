/*
 * fault_forkrate: the load perfmapd holds. A JIT parent writes its map, then
 * forks as fast as it can (or at --rate forks per second) for --seconds;
 * each child sleeps --wait-ms (a worker's life), then looks whether its own
 * map holds the parent's entries byte for byte. One that does not yet looks
 * again, 10 ms later, then twice as long each time up to 200 ms, until
 * --give-up-ms after its fork: a loaded agent is late, and lateness is the
 * benchmark's to measure (make bench), not a test's. The children never
 * poll fast: thousands of them looking every millisecond would take the CPU
 * the agent needs, and measure themselves.
 *
 *   fault_forkrate --dir DIR [--entries N] [--seconds S] [--rate R]
 *                  [--wait-ms MS] [--give-up-ms MS] [--prefix P]
 *
 * Prints one line: "forks N rate R missing M late L" (M: children whose map
 * was not there, complete, --give-up-ms after their fork; L: of the others,
 * those that found it only after --wait-ms).
 * Exit status: 0 when no child missed its map, 1 otherwise, 2 on set-up errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_CHILDREN 200000
#define SLOT 32

struct opts {
	const char *dir, *prefix;
	unsigned long entries, seconds, rate, wait_ms, give_up_ms;
};

struct slot {
	uint32_t done;     /* 1: found, 2: missing, 3: found after --wait-ms */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { ns / 1000000000, ns % 1000000000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void map_path(const struct opts *o, int pid, char *buf, size_t len)
{
	snprintf(buf, len, "%s/perf-%d.map", o->dir, pid);
}

/* Does our map hold exactly @want? */
static int map_equals(const char *path, const char *want, size_t len, char *buf)
{
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return 0;
	n = pread(fd, buf, len + 1, 0);
	close(fd);
	return n == (ssize_t)len && !memcmp(buf, want, len);
}

static void child(const struct opts *o, const char *map, size_t len, uint64_t t_fork,
		  struct slot *s)
{
	uint64_t deadline = t_fork + o->wait_ms * 1000000ull, t = now_ns();
	char path[4096], *buf = malloc(len + 1);

	uint64_t give_up = t_fork + o->give_up_ms * 1000000ull, pause = 10000000ull;

	if (t < deadline)
		sleep_ns(deadline - t);
	map_path(o, getpid(), path, sizeof(path));
	s->done = 2;
	if (buf && map_equals(path, map, len, buf))
		s->done = 1;
	while (buf && s->done == 2 && now_ns() < give_up) {
		sleep_ns(pause);
		pause = pause * 2 < 200000000ull ? pause * 2 : 200000000ull;
		if (map_equals(path, map, len, buf))
			s->done = 3;
	}
	_exit(s->done == 2 ? 1 : 0);
}

static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "entries", required_argument, NULL, 'e' },
		{ "seconds", required_argument, NULL, 's' },
		{ "rate", required_argument, NULL, 'r' },
		{ "wait-ms", required_argument, NULL, 'w' },
		{ "give-up-ms", required_argument, NULL, 'g' },
		{ "prefix", required_argument, NULL, 'p' },
		{ 0 },
	};
	int opt;

	*o = (struct opts){ .dir = NULL, .prefix = "rate", .entries = 1000, .seconds = 10,
			    .wait_ms = 1000, .give_up_ms = 60000 };
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case 'd': o->dir = optarg; break;
		case 'e': o->entries = strtoul(optarg, NULL, 10); break;
		case 's': o->seconds = strtoul(optarg, NULL, 10); break;
		case 'r': o->rate = strtoul(optarg, NULL, 10); break;
		case 'w': o->wait_ms = strtoul(optarg, NULL, 10); break;
		case 'g': o->give_up_ms = strtoul(optarg, NULL, 10); break;
		case 'p': o->prefix = optarg; break;
		default: return -1;
		}
	}
	return o->dir && o->entries ? 0 : -1;
}

/*
 * The map, written as a runtime writes it: one line per write, naming code
 * in memory the process really maps (the agent weighs a map's entries
 * against the process's mappings).
 */
static char *write_map(const struct opts *o, size_t *len)
{
	size_t cap = o->entries * 64, n = 0, i, at;
	char *map = malloc(cap), path[4096];
	unsigned char *code;
	int fd;

	code = mmap(NULL, o->entries * SLOT, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!map || code == MAP_FAILED)
		return NULL;
	for (i = 0; i < o->entries; i++)
		n += snprintf(map + n, cap - n, "%lx %x %s_%zu\n",
			      (unsigned long)(uintptr_t)(code + i * SLOT), SLOT, o->prefix, i);
	map_path(o, getpid(), path, sizeof(path));
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return NULL;
	for (at = 0; at < n;) {
		size_t l = (size_t)((char *)memchr(map + at, '\n', n - at) - (map + at)) + 1;

		if (write(fd, map + at, l) != (ssize_t)l)
			return NULL;
		at += l;
	}
	*len = n;
	return map;  /* the fd stays open, as a runtime keeps it */
}

int main(int argc, char **argv)
{
	struct opts o;
	struct slot *slots;
	uint64_t t0, end, gap;
	size_t len, n = 0, i, missing = 0, late = 0;
	char *map;

	if (parse(argc, argv, &o)) {
		fprintf(stderr, "fault_forkrate: bad arguments (see the comment at the top)\n");
		return 2;
	}
	slots = mmap(NULL, MAX_CHILDREN * sizeof(*slots), PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	map = write_map(&o, &len);
	if (slots == MAP_FAILED || !map) {
		perror("fault_forkrate: set-up");
		return 2;
	}
	gap = o.rate ? 1000000000ull / o.rate : 0;
	t0 = now_ns();
	end = t0 + o.seconds * 1000000000ull;
	while (n < MAX_CHILDREN) {
		uint64_t t = now_ns();
		pid_t pid;

		if (t >= end)
			break;
		if (gap && t < t0 + n * gap) {
			sleep_ns(t0 + n * gap - t);
			continue;
		}
		pid = fork();
		if (pid < 0) {
			/* Out of processes for now: wait for one to end. */
			waitpid(-1, NULL, 0);
			continue;
		}
		if (!pid)
			child(&o, map, len, t, &slots[n]);
		n++;
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
	}
	while (wait(NULL) > 0)
		;
	for (i = 0; i < n; i++) {
		missing += slots[i].done != 1 && slots[i].done != 3;
		late += slots[i].done == 3;
	}
	printf("forks %zu rate %.0f missing %zu late %zu\n", n, n / (double)o.seconds, missing, late);
	return missing ? 1 : 0;
}

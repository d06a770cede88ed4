/*
 * jitdump_gen: the jitdump benchmark's producer (tests/bench/jitdump_bench.sh).
 * It writes jit-<pid>.dump in DIR as a live runtime does: the header, then
 * the marker (the dump mapped PROT_READ|PROT_EXEC, which the kernel reports
 * to perf and to perfmapd), then one write() per JIT_CODE_LOAD, each stamped
 * with CLOCK_MONOTONIC (what perf record -k mono and perf inject -j expect),
 * each function a 64-byte slot of one anonymous executable region.
 *
 *   jitdump_gen dump DIR N MS    N loads, then every function run for MS ms
 *                                (samples for perf record); "dump PATH N"
 *   jitdump_gen pace DIR N RATE P  P loads at once, then "ready PID PATH"; at
 *                                a line on stdin, N loads at RATE a second, then
 *                                "appended N MS"; exits when stdin closes
 *   jitdump_gen steady DIR RATE  "ready PID PATH"; loads at RATE a second
 *                                until stdin closes
 *   jitdump_gen lag DIR MAPDIR N MS  "ready PID PATH"; at a line on stdin, N
 *                                loads one at a time: each waits for its line in
 *                                MAPDIR/perf-<pid>.map, then a random pause of
 *                                0..MS ms (MS the agent's tick: the appends fall
 *                                at every phase of it alike); "lag_us U" for
 *                                each, then "done"
 *
 * Exit status 0; 1 when a write fails or a line never comes (10 s); 2 on usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../agent/jitloop.h"
#include "../unit/jdbuild.h"

#define SLOT 64
#define SLOTS (256u << 10)      /* the agent keeps 256 Ki live functions of a dump */
#define LINE_WAIT_NS (10 * 1000000000ull)

static unsigned char *region;
static unsigned int next_slot;
static int fd;
static uint32_t self;
static struct jdb b;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t t)
{
	struct timespec ts = { .tv_sec = (time_t)(t / 1000000000ull),
			       .tv_nsec = (long)(t % 1000000000ull) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* One JIT_CODE_LOAD of the next slot, named fn_<k> (or @name), in one write(). */
static void load(const char *name)
{
	char buf[64];
	uint64_t t = now_ns(), addr;

	if (next_slot == SLOTS) {
		fprintf(stderr, "jitdump_gen: more than %u functions\n", SLOTS);
		exit(1);
	}
	addr = (uint64_t)(uintptr_t)(region + (size_t)next_slot * SLOT);
	if (!name) {
		snprintf(buf, sizeof(buf), "fn_%u", next_slot);
		name = buf;
	}
	b.len = 0;
	jdb_load(&b, self, addr, SLOT, name);
	memcpy(b.p + 8, &t, 8);
	/* code_index: perf inject -j names each function's ELF by it, so it must be unique. */
	memcpy(b.p + 48, &(uint64_t){ next_slot++ }, 8);
	if (write(fd, b.p, b.len) != (ssize_t)b.len) {
		perror("jitdump_gen: write");
		exit(1);
	}
}

/* The dump created, its header written and its marker mapped; its path in @path. */
static void start(const char *dir, char *path, size_t len, int prot)
{
	uint64_t t = now_ns();

	self = (uint32_t)getpid();
	region = mmap(NULL, (size_t)SLOT * SLOTS, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (region == MAP_FAILED) {
		perror("jitdump_gen: mmap");
		exit(2);
	}
	snprintf(path, len, "%s/jit-%u.dump", dir, self);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0) {
		perror(path);
		exit(2);
	}
	jdb_header(&b, self);
	memcpy(b.p + 24, &t, 8);
	if (write(fd, b.p, b.len) != (ssize_t)b.len)
		exit(1);
	/* The marker: perf (and perfmapd) find the dump by this executable mapping. */
	if (mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0) ==
	    MAP_FAILED) {
		perror("jitdump_gen: marker");
		exit(2);
	}
}

static void wait_line(void)
{
	char line[64];

	if (!fgets(line, sizeof(line), stdin))
		exit(0);
}

static int stdin_closed(void)
{
	struct pollfd p = { .fd = 0, .events = POLLIN };
	char c;

	return poll(&p, 1, 0) == 1 && read(0, &c, 1) <= 0;
}

/* Loads at @rate a second, from now: @n of them, or until stdin closes when @n is 0. */
static void paced(unsigned long n, double rate)
{
	uint64_t t0 = now_ns(), due;
	unsigned long i;

	for (i = 0; !n || i < n; i++) {
		due = t0 + (uint64_t)((double)i * 1e9 / rate);
		/* Bursts of a millisecond's worth: a sleep per record would cost more than the record. */
		if (due > now_ns() + 1000000) {
			if (!n && stdin_closed())
				return;
			sleep_until(due);
		}
		load(NULL);
	}
}

/* Has @map's tail a line ending in " @name"? */
static int has_line(const char *map, const char *name)
{
	char buf[4097], want[80];
	off_t size;
	ssize_t got;
	int mfd = open(map, O_RDONLY | O_CLOEXEC);

	if (mfd < 0)
		return 0;
	size = lseek(mfd, 0, SEEK_END);
	got = pread(mfd, buf, sizeof(buf) - 1, size > 4096 ? size - 4096 : 0);
	close(mfd);
	if (got <= 0)
		return 0;
	buf[got] = '\0';
	snprintf(want, sizeof(want), " %s\n", name);
	return strstr(buf, want) != NULL;
}

/* Appends @name's load; its lag to its line in @map in ns (inotify on @dir wakes the look). */
static uint64_t lag_of(int in, const char *map, const char *name)
{
	char ev[4096] __attribute__((aligned(8)));
	struct pollfd p = { .fd = in, .events = POLLIN };
	uint64_t t0, t;

	while (read(in, ev, sizeof(ev)) > 0)
		;   /* what the last record's writes left */
	t0 = now_ns();
	load(name);
	for (;;) {
		if (has_line(map, name))
			return now_ns() - t0;
		t = now_ns();
		if (t - t0 > LINE_WAIT_NS) {
			fprintf(stderr, "jitdump_gen: %s not in %s after 10 s\n", name, map);
			exit(1);
		}
		/* The 5 ms timeout only backs up inotify; every write of the map wakes it. */
		if (poll(&p, 1, 5) == 1)
			while (read(in, ev, sizeof(ev)) > 0)
				;
	}
}

static void lag(const char *map_dir, unsigned int n, unsigned int pause_ms)
{
	char map[4096], name[32];
	unsigned int i;
	int in;

	snprintf(map, sizeof(map), "%s/perf-%u.map", map_dir, self);
	in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (in < 0 || inotify_add_watch(in, map_dir, IN_MODIFY | IN_CREATE | IN_MOVED_TO) < 0) {
		perror("jitdump_gen: inotify");
		exit(2);
	}
	/* The first function makes the map (the agent creates it whole): not timed. */
	lag_of(in, map, "lag_first");
	srand(self);
	for (i = 0; i < n; i++) {
		usleep((useconds_t)(rand() % (pause_ms * 1000 + 1)));
		snprintf(name, sizeof(name), "lag_fn_%u", i);
		printf("lag_us %llu\n", (unsigned long long)(lag_of(in, map, name) / 1000));
	}
	printf("done\n");
	fflush(stdout);
	close(in);
}

static void run(unsigned int ms)
{
	uint64_t end = now_ns() + (uint64_t)ms * 1000000;
	unsigned int i;

	while (now_ns() < end)
		for (i = 0; i < next_slot && now_ns() < end; i += 97)
			((uint64_t (*)(uint64_t))(uintptr_t)(region + (size_t)i * SLOT))(2000);
}

int main(int argc, char **argv)
{
	char path[4096];
	uint64_t t0;
	unsigned long i, n;

	if (argc == 5 && !strcmp(argv[1], "dump")) {
		n = strtoul(argv[3], NULL, 10);
		start(argv[2], path, sizeof(path), PROT_READ | PROT_WRITE | PROT_EXEC);
		for (i = 0; i < n; i++) {
			emit_loop(region + (size_t)next_slot * SLOT);
			load(NULL);
		}
		run((unsigned int)atoi(argv[4]));
		printf("dump %s %lu\n", path, n);
	} else if (argc == 6 && !strcmp(argv[1], "pace")) {
		start(argv[2], path, sizeof(path), PROT_READ | PROT_EXEC);
		for (n = strtoul(argv[5], NULL, 10); n; n--)
			load(NULL);
		printf("ready %u %s\n", self, path);
		fflush(stdout);
		wait_line();
		n = strtoul(argv[3], NULL, 10);
		t0 = now_ns();
		paced(n, atof(argv[4]));
		printf("appended %lu %llu\n", n, (unsigned long long)((now_ns() - t0) / 1000000));
		fflush(stdout);
		while (!stdin_closed())
			usleep(100000);
	} else if (argc == 4 && !strcmp(argv[1], "steady")) {
		start(argv[2], path, sizeof(path), PROT_READ | PROT_EXEC);
		printf("ready %u %s\n", self, path);
		fflush(stdout);
		paced(0, atof(argv[3]));
	} else if (argc == 6 && !strcmp(argv[1], "lag")) {
		start(argv[2], path, sizeof(path), PROT_READ | PROT_EXEC);
		printf("ready %u %s\n", self, path);
		fflush(stdout);
		wait_line();
		lag(argv[3], (unsigned int)atoi(argv[4]), (unsigned int)atoi(argv[5]));
	} else {
		fprintf(stderr, "usage: jitdump_gen dump DIR N MS | pace DIR N RATE P | steady DIR RATE | lag DIR MAPDIR N MS\n");
		return 2;
	}
	jdb_free(&b);
	return 0;
}

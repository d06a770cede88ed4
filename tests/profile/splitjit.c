/*
 * splitjit: a test JIT for perfmapctl profile. It generates two counting
 * loops in anonymous executable memory, names them in DIR/perf-<pid>.map
 * (PREFIX_hot, PREFIX_cold), and spends its time between them 3 to 1, by
 * instruction count: a profile must show 75 % and 25 %.
 *
 *   splitjit [--dir DIR] [--prefix P] [--run-ms MS] [--child] [--child-run-ms MS]
 *            [--after-ms MS] [--wait-map-ms MS] [--fork-delay-ms MS] [--rounds N]
 *            [--name NAME]...
 *
 * --child: after writing its map, fork a child that runs the loops (for
 * --child-run-ms, then exits) while the parent sleeps; the parent then
 * sleeps --after-ms more, so that the child is gone before a profile of
 * --run-ms ends. --wait-map-ms: the child first waits that long at most
 * for its own map (a copy perfmapd makes), and says whether it came.
 * --fork-delay-ms: the parent sleeps that long before it forks (a profiler
 * started meanwhile sees the fork). --rounds N: a fixed amount of work
 * instead of a time, for a benchmark to time (the child's, with --child).
 * --name NAME (up to 32): one loop per NAME, named NAME, each run as long
 * as the others, instead of the two split ones: names of the kind JIT
 * runtimes write, carrying a file and a line ("JS:*f /app/x.js:3:10").
 * Prints "pid N" (and "child N") lines. Exit status 0, 1 when the child
 * failed, 2 on usage or set-up errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../agent/jitloop.h"

#define SLOT 64
#define NAMES_MAX 32       /* --name: a loop each, SLOT bytes apart in one page */
#define CHUNK 400000ull   /* iterations of the cold loop per round; the hot one runs 3 times as many */

typedef uint64_t (*loop_fn)(uint64_t);

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}


static const char *names[NAMES_MAX];
static int nnames;

static int write_map(const char *dir, const char *prefix, unsigned char *code)
{
	char path[4096], text[NAMES_MAX * 4200];
	int fd, n = 0;

	snprintf(path, sizeof(path), "%s/perf-%d.map", dir, (int)getpid());
	if (!nnames)
		n = snprintf(text, sizeof(text), "%lx %x %s_hot\n%lx %x %s_cold\n",
			     (unsigned long)(uintptr_t)code, SLOT, prefix,
			     (unsigned long)(uintptr_t)(code + SLOT), SLOT, prefix);
	for (int i = 0; i < nnames; i++)
		n += snprintf(text + n, sizeof(text) - (size_t)n, "%lx %x %.4000s\n",
			      (unsigned long)(uintptr_t)(code + i * SLOT), SLOT, names[i]);
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, text, (size_t)n) != n) {
		fprintf(stderr, "splitjit: %s: %s\n", path, strerror(errno));
		return -1;
	}
	close(fd);
	return 0;
}

static uint64_t rounds;

static void run(unsigned char *code, uint64_t ms)
{
	loop_fn hot = (loop_fn)(void *)code, cold = (loop_fn)(void *)(code + SLOT);
	uint64_t end = now_ms() + ms, r = 0;
	volatile uint64_t sink = 0;

	while (rounds ? r++ < rounds : now_ms() < end) {
		if (nnames) {
			for (int i = 0; i < nnames; i++)
				sink += ((loop_fn)(void *)(code + i * SLOT))(CHUNK);
			continue;
		}
		sink += hot(3 * CHUNK);
		sink += cold(CHUNK);
	}
	(void)sink;
}

static int wait_map(const char *dir, uint64_t ms)
{
	uint64_t end = now_ms() + ms;
	char path[4096];
	struct stat st;

	snprintf(path, sizeof(path), "%s/perf-%d.map", dir, (int)getpid());
	while (now_ms() < end) {
		if (!stat(path, &st) && st.st_size > 0)
			return 0;
		usleep(2000);
	}
	return -1;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "prefix", required_argument, NULL, 'p' },
		{ "run-ms", required_argument, NULL, 'r' },
		{ "child", no_argument, NULL, 'c' },
		{ "child-run-ms", required_argument, NULL, 'C' },
		{ "after-ms", required_argument, NULL, 'a' },
		{ "wait-map-ms", required_argument, NULL, 'w' },
		{ "fork-delay-ms", required_argument, NULL, 'D' },
		{ "rounds", required_argument, NULL, 'R' },
		{ "name", required_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	const char *dir = "/tmp", *prefix = "split";
	uint64_t run_ms = 2000, child_ms = 0, after_ms = 0, wait_ms = 0, delay_ms = 0;
	unsigned char *code;
	int opt, child = 0, status;
	pid_t pid;

	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case 'd': dir = optarg; break;
		case 'p': prefix = optarg; break;
		case 'r': run_ms = strtoull(optarg, NULL, 10); break;
		case 'c': child = 1; break;
		case 'C': child_ms = strtoull(optarg, NULL, 10); break;
		case 'a': after_ms = strtoull(optarg, NULL, 10); break;
		case 'w': wait_ms = strtoull(optarg, NULL, 10); break;
		case 'D': delay_ms = strtoull(optarg, NULL, 10); break;
		case 'R': rounds = strtoull(optarg, NULL, 10); break;
		case 'n':
			if (nnames == NAMES_MAX) {
				fprintf(stderr, "splitjit: --name: %d at most\n", NAMES_MAX);
				return 2;
			}
			names[nnames++] = optarg;
			break;
		default: return 2;
		}
	}
	code = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (code == MAP_FAILED) {
		perror("splitjit: mmap");
		return 2;
	}
	for (int i = 0; i < (nnames ? nnames : 2); i++)
		emit_loop(code + i * SLOT);
	if (write_map(dir, prefix, code))
		return 2;
	printf("pid %d\n", (int)getpid());
	fflush(stdout);
	if (!child) {
		run(code, run_ms);
		return 0;
	}
	if (delay_ms)
		usleep((useconds_t)(delay_ms * 1000));
	pid = fork();
	if (pid < 0) {
		perror("splitjit: fork");
		return 2;
	}
	if (!pid) {
		if (wait_ms)
			printf("child_map %s\n", wait_map(dir, wait_ms) ? "missing" : "found");
		printf("child %d\n", (int)getpid());
		fflush(stdout);
		run(code, child_ms ? child_ms : run_ms);
		_exit(0);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		return 1;
	if (after_ms)
		usleep((useconds_t)(after_ms * 1000));
	return 0;
}

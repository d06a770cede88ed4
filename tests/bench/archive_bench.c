/*
 * A microbenchmark of the archive's bookkeeping (issue 9, M1): what one
 * store and one status request's usage cost with N maps archived already.
 * Not a test: `make bench-parts`; or build/bench/archive_bench /var/tmp/DIR N
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "archive/archive.h"
#include "lib/log.h"

#define STORES 200

static uint64_t ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	char maps[4096], arch[4096], path[8300];
	uint64_t t0, t1, c0, c1, files = 0, bytes = 0;
	struct archive_config cfg = { 0 };
	struct archive *ar;
	struct stat st;
	int i, n, fd;

	if (argc < 3)
		return 2;
	log_max_level = LOG_ERROR;
	n = atoi(argv[2]);
	snprintf(maps, sizeof(maps), "%s/maps", argv[1]);
	snprintf(arch, sizeof(arch), "%s/archive", argv[1]);
	mkdir(argv[1], 0700);
	mkdir(maps, 0700);
	mkdir(arch, 0700);
	/* N one-line maps archived before: a user's earlier flood. */
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/perf-%d-1.map", arch, 1000000 + i);
		fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
		if (fd < 0 || write(fd, "1000 10 f\n", 10) != 10)
			return 1;
		close(fd);
	}
	cfg.map_dir = maps;
	cfg.map_dir_fd = open(maps, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cfg.dir = arch;
	cfg.max_bytes = 1ull << 40;
	cfg.max_map_bytes = 1 << 20;
#ifdef ARCHIVE_FILES_PER_UID
	cfg.max_files_per_uid = 1u << 30;  /* this build's file bound: out of the way */
#endif
	ar = archive__open(&cfg);
	if (!ar)
		return 1;
	t0 = ns(CLOCK_MONOTONIC);
	for (i = 0; i < STORES; i++) {
		snprintf(path, sizeof(path), "%s/perf-%d.map", maps, 100 + i);
		fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
		if (fd < 0 || write(fd, "1000 10 fn_a\n2000 10 fn_b\n", 26) != 26 || fstat(fd, &st))
			return 1;
		close(fd);
		if (archive__move(ar, 100 + i, 7, ARCHIVE_EXIT, st.st_dev, st.st_ino, UINT64_MAX))
			return 1;
		archive__flush(ar);
	}
	t1 = ns(CLOCK_MONOTONIC);
	c0 = ns(CLOCK_THREAD_CPUTIME_ID);
	for (i = 0; i < 100; i++)
		archive__usage(ar, &files, &bytes);
	c1 = ns(CLOCK_THREAD_CPUTIME_ID);
	printf("%d archived: %.1f us per store (move + flush, wall), %.1f us of the event loop's CPU per status usage; %llu files, %llu bytes\n",
	       n, (double)(t1 - t0) / STORES / 1000, (double)(c1 - c0) / 100 / 1000,
	       (unsigned long long)files, (unsigned long long)bytes);
	archive__free(ar);
	return 0;
}

/*
 * An exited process's map made canonical where it waits out its retention,
 * so that every consumer reads it right meanwhile, not only once archived
 * and restored: a map no consumer misreads is left as it is; one some would
 * (overlaps perf's lookup misses, 0x-padded lines blazesym refuses whole) is
 * rewritten through perfmap__replace(): under a read lease, which any
 * process still holding it open for writing (a forked child appending to
 * its parent's file) refuses, and then nothing changes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "lib/mapname.h"
#include "perfmap_tools.h"
#include "store/canon.h"

/* Does every consumer read the map open as @fd as written? */
static int all_read_it(int fd, uint64_t max_bytes)
{
	const struct perfmap_reader_opts ropts = { .sz = sizeof(ropts), .max_bytes = max_bytes };
	struct perfmap_report rep = { 0 };
	struct perfmap_reader *r;
	int i, err;

	r = perfmap_reader__from_fd(fd, &ropts);
	if (!r)
		return -errno;
	err = perfmap_check(r, &rep);
	perfmap_reader__free(r);
	if (err)
		return err;
	for (i = 0; i < __PERFMAP_CONSUMER_MAX; i++)
		if (!rep.verdict[i].ok)
			return 0;
	return 1;
}

int store_canonicalize(int dirfd, const char *map_dir, pid_t pid, uint64_t max_bytes,
		       const struct map_info *expect)
{
	const struct perfmap_open_opts oopts = { .sz = sizeof(oopts), .max_bytes = max_bytes };
	struct perfmap_compact_job job = { .max_bytes = max_bytes, .max_table_bytes = max_bytes * 8 };
	struct perfmap_replace_result res;
	char name[32], path[4096];
	struct stat st;
	int fd, err;

	map_name(pid, name, sizeof(name));
	fd = perfmap__open_map_at(dirfd, name, O_RDONLY, &oopts, &st);
	if (fd < 0)
		return fd;
	if (st.st_dev != expect->dev || st.st_ino != expect->ino) {
		err = -ESTALE;
		goto close_fd;
	}
	err = all_read_it(fd, max_bytes);
	if (err) {
		err = err > 0 ? -EALREADY : err;
		goto close_fd;
	}
	if (lseek(fd, 0, SEEK_SET) < 0) {
		err = -errno;
		goto close_fd;
	}
	snprintf(path, sizeof(path), "%s/%s", map_dir, name);
	err = perfmap__replace(path, fd, perfmap__compact_fill, &job, &res);
close_fd:
	close(fd);
	return err;
}

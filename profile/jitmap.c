/*
 * A process's perf map: at its path while the process lives or perfmapd
 * retains it, in perfmapd's archive once it is gone. Opened as any
 * privileged reader of /tmp must (no symlink, FIFO, hard link; bounded),
 * read whole into libperfmap's table, where the later of two overlapping
 * lines wins, as the code at an address was replaced.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#define JITMAP_MAX_BYTES (256ull << 20)

struct jitmap {
	struct perfmap_table *t;
	uint64_t bytes;            /* read from the file */
	char path[PATH_MAX];
	struct perfmap_strtab names;  /* NUL-terminated copies of the names looked up */
};

static struct jitmap *load_path(const char *path, uid_t uid)
{
	const struct perfmap_open_opts oo = { .sz = sizeof(oo), .max_bytes = JITMAP_MAX_BYTES,
					      .check_owner = true, .owner = uid };
	const struct perfmap_reader_opts ro = { .sz = sizeof(ro), .max_bytes = JITMAP_MAX_BYTES };
	struct perfmap_reader *r = NULL;
	struct jitmap *j;
	int fd;

	fd = perfmap_open_map(path, &oo);
	if (fd < 0)
		return NULL;
	j = calloc(1, sizeof(*j));
	if (!j)
		goto close_fd;
	j->t = perfmap_table__new();
	r = perfmap_reader__from_fd(fd, &ro);
	if (!j->t || !r || perfmap_table__load(j->t, r)) {
		perfmap_prof__jitmap_free(j);
		j = NULL;
		goto close_fd;
	}
	snprintf(j->path, sizeof(j->path), "%s", path);
	j->bytes = perfmap_reader__stats(r)->bytes;
close_fd:
	perfmap_reader__free(r);
	close(fd);
	return j;
}

/* The archive's map of (@pid, @start_ticks): perf-<pid>-<ticks>[-c<id>].map, not an earlier image's. */
static struct jitmap *load_archived(const char *archive_dir, pid_t pid, uint64_t start_ticks,
				    uid_t uid)
{
	char prefix[64], path[PATH_MAX];
	struct jitmap *j = NULL;
	struct dirent *de;
	size_t plen;
	DIR *d;

	if (!start_ticks)
		return NULL;
	d = opendir(archive_dir);
	if (!d)
		return NULL;
	plen = (size_t)snprintf(prefix, sizeof(prefix), "perf-%d-%llu", (int)pid,
				(unsigned long long)start_ticks);
	while (!j && (de = readdir(d))) {
		const char *rest = de->d_name + plen;

		if (strncmp(de->d_name, prefix, plen) || strstr(rest, "-exec"))
			continue;
		if (strcmp(rest, ".map") && strncmp(rest, "-c", 2))
			continue;
		snprintf(path, sizeof(path), "%s/%s", archive_dir, de->d_name);
		j = load_path(path, uid);
	}
	closedir(d);
	return j;
}

struct jitmap *perfmap_prof__jitmap_load(const char *map_dir, const char *archive_dir, pid_t pid,
					 uint64_t start_ticks, uid_t uid)
{
	struct perfmap_proc_stat now;
	char path[PATH_MAX];
	struct jitmap *j;
	bool other;

	/* Another process at the pid now: what is at the path is not (only) this one's. */
	other = start_ticks && !perfmap__proc_stat_read(pid, &now) &&
		now.start_ticks != start_ticks;
	if (!other) {
		snprintf(path, sizeof(path), "%s/perf-%d.map", map_dir, (int)pid);
		j = load_path(path, uid);
		if (j)
			return j;
	}
	return load_archived(archive_dir, pid, start_ticks, uid);
}

const char *perfmap_prof__jitmap_lookup(struct jitmap *j, uint64_t addr, uint64_t *off)
{
	const char *name;
	ssize_t len;

	if (!j)
		return NULL;
	len = perfmap_table__lookup(j->t, addr, &name);
	if (len < 0)
		return NULL;
	/* The entry's start is the table's: a name's own offset is not known, 0 is said. */
	*off = 0;
	/* The table's name is not NUL-terminated: a copy, once per name, lives as long as the map. */
	return perfmap__strtab_intern_n(&j->names, name, (size_t)len);
}

const char *perfmap_prof__jitmap_path(const struct jitmap *j)
{
	return j->path;
}

uint64_t perfmap_prof__jitmap_bytes(const struct jitmap *j)
{
	return j->bytes;
}

void perfmap_prof__jitmap_free(struct jitmap *j)
{
	if (!j)
		return;
	perfmap__strtab_release(&j->names);
	perfmap_table__free(j->t);
	free(j);
}

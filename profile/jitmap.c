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

struct jname {
	const char *key;           /* the table's bytes */
	char *name;                /* NUL-terminated copy */
};

struct jitmap {
	struct perfmap_table *t;
	uint64_t bytes;            /* read from the file */
	char path[PATH_MAX];
	struct jname *names;       /* open addressing, by @key */
	size_t nnames, cap;
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
		jitmap_free(j);
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

struct jitmap *jitmap_load(const char *map_dir, const char *archive_dir, pid_t pid,
			   uint64_t start_ticks, uid_t uid)
{
	uint64_t now_ticks = 0;
	char path[PATH_MAX];
	struct jitmap *j;
	bool other;

	/* Another process at the pid now: what is at the path is not (only) this one's. */
	other = start_ticks && !proc_stat_of(pid, &now_ticks, NULL) && now_ticks != start_ticks;
	if (!other) {
		snprintf(path, sizeof(path), "%s/perf-%d.map", map_dir, (int)pid);
		j = load_path(path, uid);
		if (j)
			return j;
	}
	return load_archived(archive_dir, pid, start_ticks, uid);
}

static size_t slot_of(const struct jitmap *j, const char *key)
{
	return ((uintptr_t)key >> 3) * 2654435761u % j->cap;
}

static const char *intern(struct jitmap *j, const char *key, size_t len)
{
	struct jname *old = j->names;
	size_t i, oldcap = j->cap;

	if (2 * (j->nnames + 1) > j->cap) {
		j->cap = j->cap ? j->cap * 2 : 256;
		j->names = calloc(j->cap, sizeof(*j->names));
		if (!j->names) {
			j->names = old;
			j->cap = oldcap;
			return NULL;
		}
		for (i = 0; i < oldcap; i++) {
			size_t s;

			if (!old[i].key)
				continue;
			for (s = slot_of(j, old[i].key); j->names[s].key; s = (s + 1) % j->cap)
				;
			j->names[s] = old[i];
		}
		free(old);
	}
	for (i = slot_of(j, key); j->names[i].key; i = (i + 1) % j->cap)
		if (j->names[i].key == key)
			return j->names[i].name;
	j->names[i].name = strndup(key, len);
	if (!j->names[i].name)
		return NULL;
	j->names[i].key = key;
	j->nnames++;
	return j->names[i].name;
}

const char *jitmap_lookup(struct jitmap *j, uint64_t addr, uint64_t *off)
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
	return intern(j, name, (size_t)len);
}

const char *jitmap_path(const struct jitmap *j)
{
	return j->path;
}

uint64_t jitmap_bytes(const struct jitmap *j)
{
	return j->bytes;
}

void jitmap_free(struct jitmap *j)
{
	if (!j)
		return;
	for (size_t i = 0; i < j->cap; i++)
		free(j->names[i].name);
	free(j->names);
	perfmap_table__free(j->t);
	free(j);
}

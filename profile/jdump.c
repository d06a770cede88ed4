/*
 * A sampled process's jitdump (jit-<pid>.dump), read by the profiler itself,
 * so that code a runtime describes there is named without perfmapd and
 * without a perf map, with the source lines of its debug info. Found by its
 * marker (the dump mapped executable, as perf finds it), opened inside the
 * process's root as the process sees it, never through a link, only a
 * regular file of the process's uid and the very file mapped (its inode);
 * read as untrusted input (perfmap/jitdump.c bounds every size), from where
 * the last read ended, from an fd kept while the profile runs. One dump is
 * read once for every process that maps it: a forked child shares its
 * parent's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#define JDUMP_FDS_MAX 256                   /* dumps kept open; the rest reopened at each read */
#define JDUMP_RECORDS_PER_READ (1u << 20)   /* per read: a flood waits for the next */
#define JDUMP_RECORDS_MAX (16u << 20)       /* of one dump in all: a flood ends there */
#define JDUMP_BYTES_MAX (4ull << 30)        /* of one dump read at most, as perfmapd reads */
#define JDUMP_FUNCS_MAX (1u << 20)
#define JDUMP_NAME_BYTES_MAX (128u << 20)
#define JDUMP_LINES_BYTES_MAX (64u << 20)
#define JDUMP_FUNC_BYTES 64u                /* a live function's node, as counted in memory held */

struct jdump {
	struct jdump *next, **pprev;   /* in its list, shared by every process that maps it */
	struct jdumps *list;
	unsigned int refs;
	/* The marker's file, as /proc/<pid>/maps shows it: its key in the list. */
	uint32_t dev_major, dev_minor;
	uint64_t ino;
	uid_t uid;                     /* the owner it was opened as */
	uint32_t name_pid;             /* N of jit-N.dump: its producer's pid, as the header says */
	int fd;                        /* -1 when not kept */
	struct perfmap_jitdump *rd;
	uint64_t bytes;                /* held: counted in the symbolizer's bound */
	char path[];                   /* the marker's path, as the process sees it */
};

pid_t perfmap_prof__jdump_marker_pid(const char *path)
{
	return perfmap__jitdump_name_pid(path, strlen(path));
}

/*
 * @path's file in (@pid, @start_ticks)'s root, its directories resolved
 * inside that root without following any link, the file itself as
 * perfmap_open_map() opens a map (no link, no FIFO, a regular file of @uid,
 * not hard-linked), and only if it is inode @ino and the process is still
 * the one read: the fd, or -errno.
 */
static int open_in_root(pid_t pid, uint64_t start_ticks, const char *path, uid_t uid,
			uint64_t ino)
{
	enum perfmap_root_refusal why;
	struct perfmap_proc_stat now;
	struct stat st;
	int fd;

	fd = perfmap__jitdump_open(pid, path, uid, ino, &st, &why);
	if (fd < 0)
		return fd;
	/* The process it was, not a reuse of its pid. */
	if (perfmap__proc_stat_read(pid, &now) || (start_ticks && now.start_ticks != start_ticks)) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

static bool same_file(const struct jdump *d, const struct psnap_vma *v)
{
	return d->ino == v->ino && d->dev_major == v->dev_major && d->dev_minor == v->dev_minor;
}

bool perfmap_prof__jdump_is(const struct jdump *d, const struct psnap_vma *v)
{
	return same_file(d, v);
}

struct jdump *perfmap_prof__jdump_get(struct jdumps *t, pid_t pid, uint64_t start_ticks,
				      uid_t uid, const struct psnap_vma *v)
{
	pid_t named = v->path ? perfmap_prof__jdump_marker_pid(v->path) : 0;
	struct jdump *d;
	int fd;

	if (!named) {
		errno = EINVAL;
		return NULL;
	}
	for (d = t->head; d; d = d->next) {
		/* Another uid's process mapping the same file: not its own file, not read for it. */
		if (same_file(d, v) && d->uid == uid) {
			d->refs++;
			return d;
		}
	}
	fd = open_in_root(pid, start_ticks, v->path, uid, v->ino);
	if (fd < 0) {
		errno = -fd;
		return NULL;
	}
	d = calloc(1, sizeof(*d) + strlen(v->path) + 1);
	if (!d)
		goto close_fd;
	d->rd = perfmap__jitdump_new();
	if (!d->rd)
		goto free_dump;
	perfmap__jitdump_set_limits(d->rd, JDUMP_FUNCS_MAX, JDUMP_NAME_BYTES_MAX);
	perfmap__jitdump_keep_lines(d->rd, JDUMP_LINES_BYTES_MAX);
	/* A header naming another pid than its file's name is not this producer's dump. */
	perfmap__jitdump_expect_pid(d->rd, (uint32_t)named);
	strcpy(d->path, v->path);
	d->dev_major = v->dev_major;
	d->dev_minor = v->dev_minor;
	d->ino = v->ino;
	d->uid = uid;
	d->name_pid = (uint32_t)named;
	d->refs = 1;
	d->list = t;
	d->fd = -1;
	if (t->fds < JDUMP_FDS_MAX) {
		d->fd = fd;
		t->fds++;
	} else {
		close(fd);
	}
	d->next = t->head;
	d->pprev = &t->head;
	if (t->head)
		t->head->pprev = &d->next;
	t->head = d;
	return d;
free_dump:
	free(d);
close_fd:
	close(fd);
	errno = ENOMEM;
	return NULL;
}

static uint64_t held_bytes(const struct jdump *d)
{
	const struct perfmap_jitdump_stats *s = perfmap__jitdump_stats(d->rd);

	return s->funcs * JDUMP_FUNC_BYTES + s->name_bytes + s->lines_bytes;
}

void perfmap_prof__jdump_update(struct jdump *d, pid_t pid, uint64_t start_ticks, uint64_t *held,
				uint64_t max)
{
	const struct perfmap_jitdump_stats *s = perfmap__jitdump_stats(d->rd);
	uint64_t left, now;
	int fd = d->fd;

	if (s->stop || *held >= max || s->offset >= JDUMP_BYTES_MAX || s->records >= JDUMP_RECORDS_MAX)
		return;
	if (fd < 0) {
		/* Not kept open: reopened while the process is there, the same file or nothing. */
		if (!pid)
			return;
		fd = open_in_root(pid, start_ticks, d->path, d->uid, d->ino);
		if (fd < 0)
			return;
	}
	left = JDUMP_RECORDS_MAX - s->records;
	/* A malformed record ends the reading; what came before stays named. */
	perfmap__jitdump_read(d->rd, fd, left < JDUMP_RECORDS_PER_READ ? left : JDUMP_RECORDS_PER_READ);
	if (fd != d->fd)
		close(fd);
	now = held_bytes(d);
	*held = *held + now - d->bytes;
	d->bytes = now;
}

int perfmap_prof__jdump_lookup(const struct jdump *d, uint32_t pid, uint64_t addr,
			       struct perfmap_jitdump_sym *out)
{
	return perfmap__jitdump_lookup(d->rd, pid, addr, out);
}

uint32_t perfmap_prof__jdump_name_pid(const struct jdump *d)
{
	return d->name_pid;
}

const char *perfmap_prof__jdump_path(const struct jdump *d)
{
	return d->path;
}

uint64_t perfmap_prof__jdump_put(struct jdump *d)
{
	uint64_t bytes;

	if (!d || --d->refs)
		return 0;
	*d->pprev = d->next;
	if (d->next)
		d->next->pprev = d->pprev;
	if (d->fd >= 0) {
		close(d->fd);
		d->list->fds--;
	}
	bytes = d->bytes;
	perfmap__jitdump_free(d->rd);
	free(d);
	return bytes;
}

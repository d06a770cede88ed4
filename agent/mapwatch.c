/*
 * The map directory's inotify watch, and the index it keeps: a bit per pid
 * that has a perf-<pid>.map. Most processes never have a map; with the index
 * their fork, exec and exit cost the agent no system call at all.
 *
 * Why the index can be trusted: a runtime creates its map in a system call
 * that queues the inotify event before it returns, so a map made before a
 * fork is in the queue before the fork's BPF event exists. Once the queue has
 * been read up to a time T, the index is exact for every event before T.
 * Events after T, and any time the queue overflowed, go to the disk instead.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "agent.h"
#include "archive.h"
#include "events.h"
#include "log.h"
#include "mapfile.h"
#include "mapwatch.h"

#define PID_LIMIT (1u << 22)   /* the kernel's PID_MAX_LIMIT on 64-bit */

struct mapwatch {
	int fd;
	uint64_t *bits;
	uint32_t npids;        /* pids at or above this are never known absent */
	uint64_t exact_since;  /* CLOCK_BOOTTIME; 0 while unknown */
	bool blind;            /* the watch is gone: never exact again */
};

static uint32_t pid_max(void)
{
	unsigned long v = PID_LIMIT;
	FILE *f = fopen("/proc/sys/kernel/pid_max", "re");

	if (f) {
		if (fscanf(f, "%lu", &v) != 1)
			v = PID_LIMIT;
		fclose(f);
	}
	/* pid_max can be raised later: pids above the table are looked up on disk. */
	return v < PID_LIMIT ? (uint32_t)v : PID_LIMIT;
}

struct mapwatch *mapwatch__open(const struct agent *a)
{
	struct mapwatch *mw;
	int err;

	mw = calloc(1, sizeof(*mw));
	if (!mw)
		return NULL;
	mw->npids = pid_max();
	mw->bits = calloc((mw->npids + 63) / 64, sizeof(*mw->bits));
	mw->fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (!mw->bits || mw->fd < 0) {
		err = -errno;
		goto free_mw;
	}
	if (inotify_add_watch(mw->fd, a->cfg.map_dir,
			      IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM) < 0) {
		err = -errno;
		pr_err("%s: cannot watch for maps: %s%s", a->cfg.map_dir, strerror(-err),
		       err == -ENOSPC ? " (fs.inotify.max_user_watches)" :
		       err == -EMFILE ? " (fs.inotify.max_user_instances)" : "");
		goto free_mw;
	}
	return mw;

free_mw:
	mapwatch__free(mw);
	errno = -err;
	return NULL;
}

void mapwatch__free(struct mapwatch *mw)
{
	if (!mw)
		return;
	if (mw->fd >= 0)
		close(mw->fd);
	free(mw->bits);
	free(mw);
}

int mapwatch__fd(const struct mapwatch *mw)
{
	return mw->fd;
}

static void index_set(struct mapwatch *mw, pid_t pid, bool exists)
{
	uint64_t bit;

	if (pid <= 0 || (uint32_t)pid >= mw->npids)
		return;
	bit = 1ull << (pid % 64);
	if (exists)
		mw->bits[pid / 64] |= bit;
	else
		mw->bits[pid / 64] &= ~bit;
}

static void index_reset(struct mapwatch *mw)
{
	memset(mw->bits, 0, (mw->npids + 63) / 64 * sizeof(*mw->bits));
	mw->exact_since = 0;
}

void mapwatch__set(struct agent *a, pid_t pid, bool exists)
{
	index_set(a->watch, pid, exists);
	events__set_mapped(a->events, pid, exists);
}

void mapwatch__synced(struct mapwatch *mw, uint64_t since_ns)
{
	if (!mw->exact_since && !mw->blind)
		mw->exact_since = since_ns;
}

const char *mapwatch__state(const struct mapwatch *mw)
{
	return mw->blind ? "off" : mw->exact_since ? "exact" : "listing";
}

bool mapwatch__has(const struct mapwatch *mw, pid_t pid)
{
	if (!mw->exact_since || pid <= 0 || (uint32_t)pid >= mw->npids)
		return true;
	return mw->bits[pid / 64] & (1ull << (pid % 64));
}

bool mapwatch__may_exist(const struct mapwatch *mw, pid_t pid, uint64_t ts_ns)
{
	if (!mw->exact_since || !ts_ns || ts_ns >= mw->exact_since)
		return true;
	return mapwatch__has(mw, pid);
}

bool mapwatch__drain(struct agent *a)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	struct mapwatch *mw = a->watch;
	const struct inotify_event *ie;
	bool overflow = false, orphan = false;
	uint64_t t0 = boot_ns();
	ssize_t n;
	char *p;
	pid_t pid;

	while ((n = read(mw->fd, buf, sizeof(buf))) > 0) {
		for (p = buf; p < buf + n; p += sizeof(*ie) + ie->len) {
			ie = (const struct inotify_event *)p;
			/* Changes were lost: only a listing tells what is there. */
			if (ie->mask & IN_Q_OVERFLOW)
				overflow = true;
			/* Deleted or unmounted: no change is reported from now on. */
			if ((ie->mask & IN_IGNORED) && !mw->blind) {
				pr_warn("%s: the directory is no longer watched (deleted or unmounted); every event now looks on disk",
					a->cfg.map_dir);
				mw->blind = true;
				index_reset(mw);
			}
			if (!ie->len || !mapfile_pid(ie->name, &pid))
				continue;
			mapwatch__set(a, pid, ie->mask & (IN_CREATE | IN_MOVED_TO));
			/* A map for a pid no live process holds must not pile up. */
			if ((ie->mask & (IN_CREATE | IN_MOVED_TO)) &&
			    !proctab_find(&a->procs, pid) && !retain_has(a, pid))
				orphan = true;
		}
	}
	if (overflow) {
		pr_warn("%s: inotify queue overflowed; listing the directory again",
			a->cfg.map_dir);
		a->stats.index_overflows++;
		index_reset(mw);
	} else if (mw->exact_since) {
		mw->exact_since = t0;
	}
	return overflow || orphan;
}

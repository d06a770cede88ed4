/*
 * The map directory's inotify watch, and the index it keeps: for each pid
 * with a perf-<pid>.map, the file's inode and when it appeared. Most
 * processes never have a map; with the index their fork, exec and exit cost
 * the agent no system call at all.
 *
 * Why the index can be trusted: a runtime creates its map in a system call
 * that queues the inotify event before it returns, so a map made before a
 * fork is in the queue before the fork's BPF record exists. The queue is
 * read until it is empty; a change read now was queued after the previous
 * read that found it empty, and before the read that returned it. Those two
 * readings of CLOCK_BOOTTIME, the clock of the BPF events, bound when the
 * inode appeared, however coarse the file's own times are. Once the queue
 * has been emptied at T, the index is exact for every event before T.
 * Events after T, and any time the queue overflowed, go to the disk instead.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/mapname.h"
#include "in/mapwatch.h"
#include "lib/pidmap.h"

struct record {
	struct pidmap_node node;
	dev_t dev;
	ino_t ino;
	struct span born;
};

struct mapwatch {
	int fd;
	int dirfd;
	const char *dir;
	struct pidmap records;
	uint64_t quiet_ns;     /* the last read that found the queue empty began here */
	uint64_t exact_since;  /* CLOCK_BOOTTIME; 0 while unknown */
	uint64_t overflows;
	size_t max_records;    /* the index holds at most this many maps */
	uint64_t full;         /* times a map was left out of the full index */
	bool lossy;            /* a map was left out: not exact until a listing after it empties */
	bool blind;            /* the watch is gone: never exact again */
};

static struct record *record_of(const struct mapwatch *mw, pid_t pid)
{
	return (struct record *)pidmap_find(&mw->records, pid);
}

/*
 * Anyone can make perf-<pid>.map names by the million; the index keeps
 * MAPWATCH_RECORDS_MAX, and a map it cannot hold (or has no memory for) makes
 * it inexact: every event then looks on the disk, slower and never wrong,
 * as after an overflow of the inotify queue, until a listing once the index
 * has emptied by half (mapwatch__drain()).
 */
static void left_out(struct mapwatch *mw, pid_t pid)
{
	mw->exact_since = 0;
	if (mw->lossy)
		return;
	mw->lossy = true;
	mw->full++;
	pr_warn("%s: the map index holds %zu maps, the most it may; perf-%d.map and later ones are looked up on disk until it has emptied by half",
		mw->dir, mw->records.count, (int)pid);
}

/* Record (@dev, @ino) at @pid's path, born within @born; a known inode keeps the narrower span. */
static void record_set(struct mapwatch *mw, pid_t pid, dev_t dev, ino_t ino, struct span born)
{
	struct record *r = record_of(mw, pid);

	if (r && r->dev == dev && r->ino == ino) {
		/* Both spans hold the moment: so does their overlap. */
		if (born.lo > r->born.lo)
			r->born.lo = born.lo;
		if (born.hi < r->born.hi)
			r->born.hi = born.hi;
		return;
	}
	if (!r) {
		r = mw->records.count < mw->max_records ? calloc(1, sizeof(*r)) : NULL;
		if (!r) {
			left_out(mw, pid);
			return;
		}
		r->node.pid = pid;
		pidmap_insert(&mw->records, &r->node);
	}
	r->dev = dev;
	r->ino = ino;
	r->born = born;
}

static void record_del(struct mapwatch *mw, pid_t pid)
{
	free(pidmap_remove(&mw->records, pid));
}

static void index_reset(struct mapwatch *mw)
{
	pidmap_clear(&mw->records);
	mw->exact_since = 0;
	mw->lossy = false;
}

struct mapwatch *mapwatch__open(const char *dir, int dirfd)
{
	struct mapwatch *mw;
	int err;

	mw = calloc(1, sizeof(*mw));
	if (!mw)
		return NULL;
	mw->dir = dir;
	mw->dirfd = dirfd;
	mw->max_records = MAPWATCH_RECORDS_MAX;
	mw->fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (pidmap_init(&mw->records, 256) || mw->fd < 0) {
		err = -errno;
		goto free_mw;
	}
	if (inotify_add_watch(mw->fd, dir, IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM |
			      IN_DELETE_SELF | IN_MOVE_SELF) < 0) {
		err = -errno;
		pr_err("%s: cannot watch for maps: %s%s", dir, strerror(-err),
		       err == -ENOSPC ? " (fs.inotify.max_user_watches)" :
		       err == -EMFILE ? " (fs.inotify.max_user_instances)" : "");
		goto free_mw;
	}
	mw->quiet_ns = clock_boot_ns();
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
	pidmap_fini(&mw->records);
	free(mw);
}

int mapwatch__fd(const struct mapwatch *mw)
{
	return mw->fd;
}

void mapwatch__listed(struct mapwatch *mw, pid_t pid, const struct stat *st)
{
	record_set(mw, pid, st->st_dev, st->st_ino, (struct span){ 0, clock_boot_ns() });
}

void mapwatch__limit(struct mapwatch *mw, size_t max_records)
{
	mw->max_records = max_records;
}

void mapwatch__synced(struct mapwatch *mw, uint64_t since_ns)
{
	/* A listing that found more maps than the index holds leaves it inexact. */
	if (!mw->exact_since && !mw->blind && !mw->lossy)
		mw->exact_since = since_ns;
}

void mapwatch__made(struct mapwatch *mw, pid_t pid, dev_t dev, ino_t ino, struct span when)
{
	record_set(mw, pid, dev, ino, when);
}

void mapwatch__for_each(const struct mapwatch *mw, void (*fn)(pid_t pid, void *ctx), void *ctx)
{
	struct pidmap_node *n, *next;
	size_t i;

	pidmap_for_each(&mw->records, i, n, next)
		fn(n->pid, ctx);
}

const char *mapwatch__state(const struct mapwatch *mw)
{
	return mw->blind ? "off" : mw->exact_since ? "exact" : "listing";
}

uint64_t mapwatch__overflows(const struct mapwatch *mw)
{
	return mw->overflows;
}

uint64_t mapwatch__full(const struct mapwatch *mw)
{
	return mw->full;
}

bool mapwatch__has(const struct mapwatch *mw, pid_t pid)
{
	return !mw->exact_since || record_of(mw, pid);
}

bool mapwatch__may_exist(const struct mapwatch *mw, pid_t pid, uint64_t ts_ns)
{
	if (!mw->exact_since || !ts_ns || ts_ns >= mw->exact_since)
		return true;
	return mapwatch__has(mw, pid);
}

/* Are changes waiting in the queue, not yet read? */
static bool unread(const struct mapwatch *mw)
{
	int n = 0;

	return ioctl(mw->fd, FIONREAD, &n) || n > 0;
}

struct span mapwatch__born(const struct mapwatch *mw, pid_t pid, dev_t dev, ino_t ino)
{
	const struct record *r = record_of(mw, pid);

	if (r && r->dev == dev && r->ino == ino) {
		/*
		 * A file deleted and made again can get the same inode number.
		 * With changes unread, this may be such a later file: it
		 * appeared no earlier than the recorded one, how late is unknown.
		 */
		if (unread(mw))
			return (struct span){ r->born.lo, UINT64_MAX };
		return r->born;
	}
	/* Not the inode the queue told of: it came after the queue was last emptied. */
	if (mw->exact_since)
		return (struct span){ mw->quiet_ns, UINT64_MAX };
	return SPAN_UNKNOWN;
}

/* A map appeared at @name: note its inode, read now, while the queue still holds any later change. */
static bool appeared(struct mapwatch *mw, pid_t pid, const char *name)
{
	struct stat st;

	if (fstatat(mw->dirfd, name, &st, AT_SYMLINK_NOFOLLOW)) {
		record_del(mw, pid);  /* gone again: its deletion is queued too */
		return false;
	}
	record_set(mw, pid, st.st_dev, st.st_ino,
		   (struct span){ mw->quiet_ns, clock_boot_ns() });
	return true;
}

static void go_blind(struct mapwatch *mw)
{
	if (mw->blind)
		return;
	pr_warn("%s: the directory is no longer watched (deleted, moved or unmounted); every event now looks on disk",
		mw->dir);
	mw->blind = true;
	index_reset(mw);
}

void mapwatch__check(struct mapwatch *mw)
{
	struct stat st;

	/* Deleted while we hold it open: no inotify event says so until it is let go. */
	if (!fstat(mw->dirfd, &st) && st.st_nlink == 0)
		go_blind(mw);
}

bool mapwatch__drain(struct mapwatch *mw, mapwatch_fn fn, void *ctx)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	const struct inotify_event *ie;
	bool overflow = false;
	uint64_t t_read;
	ssize_t n;
	char *p;
	pid_t pid;

	for (;;) {
		t_read = clock_boot_ns();
		n = read(mw->fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		for (p = buf; p < buf + n; p += sizeof(*ie) + ie->len) {
			ie = (const struct inotify_event *)p;
			/* Changes were lost: only a listing tells what is there. */
			if (ie->mask & IN_Q_OVERFLOW)
				overflow = true;
			/*
			 * Deleted, moved or unmounted: the path is not the directory
			 * watched, or no change is reported from now on.
			 */
			if (ie->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF))
				go_blind(mw);
			if (!ie->len || !map_name_pid(ie->name, &pid))
				continue;
			if (ie->mask & (IN_CREATE | IN_MOVED_TO)) {
				if (appeared(mw, pid, ie->name))
					fn(ctx, pid, true);
			} else if (ie->mask & (IN_DELETE | IN_MOVED_FROM)) {
				record_del(mw, pid);
				fn(ctx, pid, false);
			}
		}
	}
	mw->quiet_ns = t_read;
	if (overflow) {
		pr_warn("%s: inotify queue overflowed; the directory will be listed again", mw->dir);
		mw->overflows++;
		index_reset(mw);
	} else if (mw->lossy && mw->records.count < mw->max_records / 2) {
		/* Room again for the maps left out: a listing finds them. */
		pr_info("%s: the map index has room again (%zu maps); the directory will be listed again",
			mw->dir, mw->records.count);
		index_reset(mw);
		overflow = true;
	} else if (mw->exact_since) {
		mw->exact_since = t_read;
	}
	return overflow;
}

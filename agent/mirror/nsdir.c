/* Container map directories: one record per inode, watched, found by watch or mount namespace. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/log.h"
#include "mirror/nsdir.h"
#include "lib/subids.h"

#define WATCH_MASK (IN_CREATE | IN_MOVED_TO | IN_ONLYDIR | IN_EXCL_UNLINK)

struct uid_dirs {
	struct pidmap_node node;     /* keyed by uid */
	size_t n;
};

int nsdirs_init(struct nsdirs *t, int map_dir_fd, const char *ns_map_dir)
{
	struct stat st;

	memset(t, 0, sizeof(*t));
	t->ifd = -1;
	if (fstat(map_dir_fd, &st))
		return -errno;
	t->map_dev = st.st_dev;
	t->map_ino = st.st_ino;
	/* No such directory on the host: the map directory is the only host one. */
	if (stat(ns_map_dir, &st))
		st.st_dev = t->map_dev, st.st_ino = t->map_ino;
	t->host_dev = st.st_dev;
	t->host_ino = st.st_ino;
	if (pidmap_init(&t->by_wd, 64) || pidmap_init(&t->uids, 16))
		return -ENOMEM;
	t->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	return t->ifd < 0 ? -errno : 0;
}

void nsdirs_fini(struct nsdirs *t)
{
	struct nsdir *d, *next;

	/* Empty once every mirror is closed; what is left goes, its nodes out of by_wd first. */
	for (d = t->list; d; d = next) {
		next = d->next;
		if (d->wd >= 0)
			pidmap_remove(&t->by_wd, d->wd);
		close(d->fd);
		pidmap_fini(&d->by_name);
		free(d);
	}
	t->list = NULL;
	if (t->by_wd.buckets)
		pidmap_fini(&t->by_wd);
	if (t->uids.buckets)
		pidmap_fini(&t->uids);
	if (t->ifd >= 0)
		close(t->ifd);
	t->ifd = -1;
}

/* Counted per user: a user's subordinate uids count as the user. */
static struct uid_dirs *uid_dirs(struct nsdirs *t, uid_t uid)
{
	return (struct uid_dirs *)pidmap_get(&t->uids, (pid_t)subids_owner(uid),
					     sizeof(struct uid_dirs));
}

/* Watched through its fd's magic link: exactly the directory resolved, not what is at its path now. */
static void watch(struct nsdirs *t, struct nsdir *d)
{
	char self[32];

	snprintf(self, sizeof(self), "/proc/self/fd/%d", d->fd);
	d->wd = inotify_add_watch(t->ifd, self, WATCH_MASK);
	if (d->wd < 0) {
		pr_warn("mirror: cannot watch a directory of another namespace: %s; its new maps are found by the polls (every 5 s)",
			strerror(errno));
		return;
	}
	/* The same inode watched again returns its watch: the record is already there. */
	if (!pidmap_find(&t->by_wd, d->wd)) {
		d->wd_node.pid = d->wd;
		pidmap_insert(&t->by_wd, &d->wd_node);
	} else {
		d->wd = -1;
	}
}

struct nsdir *nsdirs_get(struct nsdirs *t, int fd, const struct stat *st, uid_t uid,
			 uint64_t mnt_ns, pid_t resolver, uint64_t now_ns)
{
	struct uid_dirs *u;
	struct nsdir *d;

	for (d = t->list; d; d = d->next)
		if (d->dev == st->st_dev && d->ino == st->st_ino) {
			close(fd);
			d->refs++;
			d->mnt_ns = mnt_ns;
			d->resolved_ns = now_ns;
			d->resolver = resolver;
			return d;
		}
	u = uid_dirs(t, uid);
	if (!u || t->count >= NSDIRS_MAX || (uid && u->n >= NSDIRS_PER_UID))
		goto close_fd;
	d = calloc(1, sizeof(*d));
	if (!d || pidmap_init(&d->by_name, 16))
		goto free_dir;
	d->fd = fd;
	d->dev = st->st_dev;
	d->ino = st->st_ino;
	d->uid = uid;
	d->refs = 1;
	d->mnt_ns = mnt_ns;
	d->resolved_ns = now_ns;
	d->resolver = resolver;
	d->is_map_dir = st->st_dev == t->map_dev && st->st_ino == t->map_ino;
	d->is_host = d->is_map_dir || (st->st_dev == t->host_dev && st->st_ino == t->host_ino);
	d->wd = -1;
	if (d->is_map_dir)
		t->map_dir = d;
	else
		watch(t, d);
	d->next = t->list;
	t->list = d;
	t->count++;
	u->n++;
	return d;
free_dir:
	if (d)
		pidmap_fini(&d->by_name);
	free(d);
close_fd:
	close(fd);
	return NULL;
}

void nsdirs_put(struct nsdirs *t, struct nsdir *d)
{
	struct uid_dirs *u;
	struct nsdir **pp;

	if (!d || --d->refs)
		return;
	for (pp = &t->list; *pp; pp = &(*pp)->next)
		if (*pp == d) {
			*pp = d->next;
			break;
		}
	t->count--;
	u = (struct uid_dirs *)pidmap_find(&t->uids, (pid_t)subids_owner(d->uid));
	if (u && u->n)
		u->n--;
	if (t->map_dir == d)
		t->map_dir = NULL;
	if (d->wd >= 0) {
		pidmap_remove(&t->by_wd, d->wd);
		inotify_rm_watch(t->ifd, d->wd);
	}
	close(d->fd);
	pidmap_fini(&d->by_name);  /* empty: its mirrors took their nodes out */
	free(d);
}

/*
 * For a process that was gone before its fork was read (its /proc/<pid>/root
 * with it): its mount namespace's directory. A namespace whose root changed
 * (a container's init pivots) was resolved again by each later process: the
 * newest wins.
 */
struct nsdir *nsdirs_by_mnt_ns(struct nsdirs *t, uint64_t mnt_ns)
{
	struct nsdir *d, *best = NULL;

	if (!mnt_ns)
		return NULL;
	for (d = t->list; d; d = d->next)
		if (d->mnt_ns == mnt_ns && (!best || d->resolved_ns > best->resolved_ns))
			best = d;
	if (best)
		best->refs++;
	return best;
}

struct nsdir *nsdirs_by_wd(const struct nsdirs *t, int wd)
{
	struct pidmap_node *n = wd >= 0 ? pidmap_find(&t->by_wd, wd) : NULL;

	return n ? (struct nsdir *)((char *)n - offsetof(struct nsdir, wd_node)) : NULL;
}

/*
 * What a forked child gets: its own map under its own pid, or the parent's
 * entries too. The handlers, registered by writer.c's setup; the switch,
 * perfmap_set_persist_after_fork(), is writer.c's. Calls writer_open.c and
 * copy_fd.c, never writer.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "writer.h"

/*
 * The child handler runs in a child forked from any thread, possibly while
 * other threads held locks (malloc's among them): only async-signal-safe
 * calls here, and static buffers instead of the heap. The child has a single
 * thread, so the statics are not shared.
 */
static char child_read_buf[PERFMAP_LINE_MAX_DEFAULT + 1];
static char child_write_buf[16u << 10];

/*
 * Exclusive lock across fork(): no append is half done, and the size taken
 * here is exactly what this process had written when it forked.
 */
static void fork_prepare(void)
{
	struct perfmap_writer *w = &perfmap__writer;
	struct stat st;

	pthread_rwlock_wrlock(&w->lock);
	w->fork_size = -1;
	if (w->fd < 0 || !__atomic_load_n(&w->persist_after_fork, __ATOMIC_RELAXED))
		return;
	if (fstat(w->fd, &st))
		return;
	w->fork_size = st.st_size;
	w->fork_dev = st.st_dev;
	w->fork_ino = st.st_ino;
}

static void fork_parent(void)
{
	pthread_rwlock_unlock(&perfmap__writer.lock);
}

/*
 * A read-only fd on the parent's map, or -errno. /proc/self/fd reopens the
 * very file the inherited fd has open, whatever became of its path; without
 * /proc, the path must still lead to that inode (-ESTALE if it does not).
 */
static int open_parent_map(int parent_fd)
{
	struct perfmap_writer *w = &perfmap__writer;
	const int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
	char path[PATH_MAX];
	struct stat st;
	int fd, err;

	fd = perfmap__reopen_fd(parent_fd, flags);
	if (fd < 0) {
		err = perfmap__map_path(path, sizeof(path), w->dir, w->pid);
		if (err)
			return err;
		fd = open(path, flags | O_NOFOLLOW);
		if (fd < 0)
			return -errno;
	}
	err = fstat(fd, &st) ? -errno : 0;
	if (!err && (!S_ISREG(st.st_mode) || st.st_dev != w->fork_dev ||
		     st.st_ino != w->fork_ino))
		err = -ESTALE;
	if (err) {
		close(fd);
		return err;
	}
	return fd;
}

static void child_copy_parent_map(int parent_fd)
{
	struct perfmap_writer *w = &perfmap__writer;
	int src;

	src = open_parent_map(parent_fd);
	if (src < 0)
		return;
	/* Nothing to report to in a fresh child: a failed copy leaves no map. */
	if (!perfmap__writer_open_locked(true))
		perfmap__copy_fd(src, (uint64_t)w->fork_size, w->fd, child_read_buf,
				 sizeof(child_read_buf), child_write_buf,
				 sizeof(child_write_buf));
	close(src);
}

static void fork_child(void)
{
	struct perfmap_writer *w = &perfmap__writer;
	int parent_fd = w->fd;

	/*
	 * The lock is held exclusive by the thread that forked, which is this
	 * child's only thread but with a new tid: glibc would not recognise it
	 * as the owner on unlock. Start the lock afresh instead.
	 */
	pthread_rwlock_init(&w->lock, &w->lock_attr);
	w->fd = -1;
	if (parent_fd < 0)
		return;
	if (w->fork_size >= 0)
		child_copy_parent_map(parent_fd);
	/* The parent's map is never written by the child. */
	close(parent_fd);
}

int perfmap__fork_register(void)
{
	/* pthread_atfork() gives a positive errno. */
	return -pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/*
 * The writer's process-wide state, shared by writer.c, fork.c and copy.c;
 * not installed. Defined, and the map opened, in writer_open.c, which calls
 * none of them. Errors are negative errno values throughout.
 */
#ifndef PERFMAP_WRITER_H
#define PERFMAP_WRITER_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>

/*
 * Appends take the lock shared, so threads write in parallel (O_APPEND makes
 * each write() land whole); open, close and fork take it exclusive, so no
 * append is in flight while the fd changes or the process forks.
 */
struct perfmap_writer {
	pthread_rwlock_t lock;
	pthread_rwlockattr_t lock_attr;
	int fd;                 /* -1 while closed */
	pid_t pid;              /* the pid the open map is named after */
	int ready;              /* lock and fork handlers set up (atomic) */
	int persist_after_fork; /* atomic */
	bool have_dir;
	char dir[PATH_MAX];     /* $PERFMAP_DIR or /tmp, as of the last open */
	/* The parent's map at the fork, recorded under the lock in prepare. */
	off_t fork_size;        /* -1: nothing for the child to copy */
	dev_t fork_dev;
	ino_t fork_ino;
};

extern struct perfmap_writer perfmap__writer;

/* writer.c: set up the lock and fork handlers once. 0 or -errno. */
int perfmap__writer_ready(void);
/*
 * writer_open.c, with the lock held exclusive: open the map unless open.
 * $PERFMAP_DIR is read again unless @reuse_dir (a fork child must not call
 * getenv()). Async-signal-safe with @reuse_dir. 0 or -errno.
 */
int perfmap__writer_open_locked(bool reuse_dir);
/*
 * writer.c: take the lock shared with the map open, opening it if needed.
 * 0 with the lock held; -errno with the lock not held (the lock could not be
 * made, or the map not opened).
 */
int perfmap__writer_lock_open(void);
void perfmap__writer_unlock(void);
/* fork.c: register the atfork handlers. 0 or -errno. */
int perfmap__fork_register(void);

#endif /* PERFMAP_WRITER_H */
